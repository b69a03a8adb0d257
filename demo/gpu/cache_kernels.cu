// The paged KV-cache write, alone in its module so that a block probe
// patching it (twinscope blocks --kernel reshape_and_cache_flash) leaves the
// engine's other kernels unpatched. Same launch shape as vLLM's kernel of the
// same name: one block per token, min(kv_heads * head_dim, 512) threads.
#include <cuda_bf16.h>

#include "gpu/kernels.h"

namespace tsdemo {

template <typename scalar_t>
__global__ void reshape_and_cache_flash_kernel(const scalar_t* __restrict__ key, const scalar_t* __restrict__ value,
                                               scalar_t* __restrict__ key_cache, scalar_t* __restrict__ value_cache,
                                               const int64_t* __restrict__ slot_mapping, int64_t block_stride,
                                               int64_t key_stride, int64_t value_stride, int num_heads, int head_size,
                                               int block_size) {
  const int64_t token = blockIdx.x;
  const int64_t slot = slot_mapping[token];
  if (slot < 0) return;  // padding
  const int64_t block = slot / block_size;
  const int64_t offset = slot % block_size;
  const int n = num_heads * head_size;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t dst = block * block_stride + offset * n + i;
    key_cache[dst] = key[token * key_stride + i];
    value_cache[dst] = value[token * value_stride + i];
  }
}

}  // namespace tsdemo

namespace twinscope::demo::gpu {

cudaError_t LaunchReshapeAndCacheFlash(const void* key, const void* value, void* key_cache, void* value_cache,
                                       const int64_t* slot_mapping, int num_tokens, int64_t key_stride,
                                       int64_t value_stride, int kv_heads, int head_dim, int block_size,
                                       cudaStream_t stream) {
  using T = __nv_bfloat16;
  const int n = kv_heads * head_dim;
  const int threads = n < 512 ? n : 512;
  tsdemo::reshape_and_cache_flash_kernel<T><<<num_tokens, threads, 0, stream>>>(
      static_cast<const T*>(key), static_cast<const T*>(value), static_cast<T*>(key_cache),
      static_cast<T*>(value_cache), slot_mapping, int64_t(block_size) * n, key_stride, value_stride, kv_heads, head_dim,
      block_size);
  return cudaGetLastError();
}

}  // namespace twinscope::demo::gpu
