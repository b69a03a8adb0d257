// The target module (see blocks_kernels.h).
#include "blocks_kernels.h"

namespace vllm {
// Same shape as vLLM's kernel: one block per token, each block copies the
// token's K and V rows into the paged cache at (slot / block_size, slot % block_size).
template <typename scalar_t, typename cache_t>
__global__ void reshape_and_cache_flash_kernel(const scalar_t* __restrict__ key, const scalar_t* __restrict__ value,
                                               cache_t* __restrict__ key_cache, cache_t* __restrict__ value_cache,
                                               const int64_t* __restrict__ slot_mapping, int block_stride,
                                               int num_heads, int head_size, int block_size) {
  const int64_t token = blockIdx.x;
  const int64_t slot = slot_mapping[token];
  if (slot < 0) return;  // padding
  const int64_t block = slot / block_size, offset = slot % block_size;
  const int n = num_heads * head_size;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t dst = (block * block_size + offset) * n + i;
    key_cache[dst] = static_cast<cache_t>(key[token * n + i]);
    value_cache[dst] = static_cast<cache_t>(value[token * n + i]);
  }
}
}  // namespace vllm

__global__ void grid3d_kernel(float* out) {
  const uint64_t b = blockIdx.x + uint64_t(gridDim.x) * (blockIdx.y + uint64_t(gridDim.y) * blockIdx.z);
  const uint32_t t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  if ((b + t) % 7 == 0) return;  // some threads leave early
  out[b * blockDim.x * blockDim.y * blockDim.z + t] = float(b);
}

namespace blocks_gpu {

void LaunchReshapeAndCache(const float* key, const float* value, float* key_cache, float* value_cache,
                           const int64_t* slot_mapping, int tokens, int heads, int head_size, int block_size,
                           cudaStream_t stream) {
  const int threads = heads * head_size < 512 ? heads * head_size : 512;
  vllm::reshape_and_cache_flash_kernel<float, float><<<tokens, threads, 0, stream>>>(
      key, value, key_cache, value_cache, slot_mapping, 0, heads, head_size, block_size);
}

void LaunchGrid3d(float* out, dim3 grid, dim3 block, cudaStream_t stream) {
  grid3d_kernel<<<grid, block, 0, stream>>>(out);
}

}  // namespace blocks_gpu
