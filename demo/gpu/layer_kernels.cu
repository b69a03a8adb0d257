// The demo engine's per-layer elementwise kernels (names after vLLM's):
// embedding lookup, RMS norm, fused residual add + RMS norm, rotary
// embedding, SiLU-and-mul, row gather, and the weight initialiser.
#include <cuda_bf16.h>

#include "common/sampling.h"
#include "gpu/kernels.h"

namespace tsdemo {

using bf16 = __nv_bfloat16;
constexpr float kEps = 1e-5f;

__device__ float BlockSum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = threadIdx.x < warps ? partial[threadIdx.x] : 0.f;
  if (warp == 0) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  const float total = partial[0];
  __syncthreads();
  return total;
}

__global__ void embedding_kernel(bf16* __restrict__ out, const int32_t* __restrict__ ids,
                                 const bf16* __restrict__ table, int hidden, int vocab) {
  const int64_t t = blockIdx.x;
  int id = ids[t];
  id = id < 0 || id >= vocab ? 0 : id;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[t * hidden + i] = table[int64_t(id) * hidden + i];
}

__global__ void rms_norm_kernel(bf16* __restrict__ out, const bf16* __restrict__ x, const bf16* __restrict__ w,
                                int hidden) {
  const int64_t t = blockIdx.x;
  float ss = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = __bfloat162float(x[t * hidden + i]);
    ss += v * v;
  }
  const float r = rsqrtf(BlockSum(ss) / hidden + kEps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    out[t * hidden + i] = __float2bfloat16(__bfloat162float(x[t * hidden + i]) * r * __bfloat162float(w[i]));
  }
}

__global__ void fused_add_rms_norm_kernel(bf16* __restrict__ residual, const bf16* __restrict__ delta,
                                          const bf16* __restrict__ w, bf16* __restrict__ out, int hidden) {
  const int64_t t = blockIdx.x;
  float ss = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = __bfloat162float(residual[t * hidden + i]) + __bfloat162float(delta[t * hidden + i]);
    residual[t * hidden + i] = __float2bfloat16(v);
    ss += v * v;
  }
  const float r = rsqrtf(BlockSum(ss) / hidden + kEps);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    out[t * hidden + i] = __float2bfloat16(__bfloat162float(residual[t * hidden + i]) * r * __bfloat162float(w[i]));
  }
}

__global__ void rotary_embedding_kernel(bf16* __restrict__ qkv, const int32_t* __restrict__ positions, int64_t stride,
                                        int rotated_heads, int head_dim) {
  const int64_t t = blockIdx.x;
  const int half = head_dim / 2;
  const float pos = static_cast<float>(positions[t]);
  for (int i = threadIdx.x; i < rotated_heads * half; i += blockDim.x) {
    const int h = i / half, j = i % half;
    const float inv_freq = __powf(500000.f, -2.f * j / head_dim);
    float s, c;
    __sincosf(pos * inv_freq, &s, &c);
    bf16* x = qkv + t * stride + int64_t(h) * head_dim;
    const float a = __bfloat162float(x[j]), b = __bfloat162float(x[j + half]);
    x[j] = __float2bfloat16(a * c - b * s);
    x[j + half] = __float2bfloat16(b * c + a * s);
  }
}

__global__ void silu_and_mul_kernel(bf16* __restrict__ out, const bf16* __restrict__ in, int intermediate) {
  const int64_t t = blockIdx.x;
  for (int i = threadIdx.x; i < intermediate; i += blockDim.x) {
    const float g = __bfloat162float(in[t * 2 * intermediate + i]);
    const float u = __bfloat162float(in[t * 2 * intermediate + intermediate + i]);
    out[t * intermediate + i] = __float2bfloat16(g / (1.f + __expf(-g)) * u);
  }
}

__global__ void gather_last_tokens_kernel(bf16* __restrict__ out, const bf16* __restrict__ in,
                                          const int32_t* __restrict__ rows, int hidden) {
  const int64_t r = blockIdx.x;
  const int64_t src = rows[r];
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[r * hidden + i] = in[src * hidden + i];
}

__global__ void init_weights_kernel(bf16* __restrict__ w, int64_t n, uint64_t seed, float scale, float offset) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t h = twinscope::demo::Mix64(seed ^ twinscope::demo::Mix64(static_cast<uint64_t>(i)));
    const float u = static_cast<float>(h >> 40) * (2.f / 16777216.f) - 1.f;
    w[i] = __float2bfloat16(offset + scale * u);
  }
}

int Threads(int work) { return work >= 1024 ? 1024 : work >= 256 ? 256 : ((work + 31) / 32) * 32; }

}  // namespace tsdemo

namespace twinscope::demo::gpu {

using tsdemo::bf16;
using tsdemo::Threads;

cudaError_t LaunchEmbedding(void* out, const int32_t* ids, const void* table, int num_tokens, int hidden, int vocab,
                            cudaStream_t stream) {
  tsdemo::embedding_kernel<<<num_tokens, Threads(hidden), 0, stream>>>(static_cast<bf16*>(out), ids,
                                                                       static_cast<const bf16*>(table), hidden, vocab);
  return cudaGetLastError();
}

cudaError_t LaunchRmsNorm(void* out, const void* x, const void* weight, int num_tokens, int hidden,
                          cudaStream_t stream) {
  tsdemo::rms_norm_kernel<<<num_tokens, Threads(hidden), 0, stream>>>(
      static_cast<bf16*>(out), static_cast<const bf16*>(x), static_cast<const bf16*>(weight), hidden);
  return cudaGetLastError();
}

cudaError_t LaunchFusedAddRmsNorm(void* residual, const void* delta, const void* weight, void* out, int num_tokens,
                                  int hidden, cudaStream_t stream) {
  tsdemo::fused_add_rms_norm_kernel<<<num_tokens, Threads(hidden), 0, stream>>>(
      static_cast<bf16*>(residual), static_cast<const bf16*>(delta), static_cast<const bf16*>(weight),
      static_cast<bf16*>(out), hidden);
  return cudaGetLastError();
}

cudaError_t LaunchRotaryEmbedding(void* qkv, const int32_t* positions, int num_tokens, int64_t stride, int heads,
                                  int kv_heads, int head_dim, cudaStream_t stream) {
  const int work = (heads + kv_heads) * head_dim / 2;
  tsdemo::rotary_embedding_kernel<<<num_tokens, Threads(work), 0, stream>>>(static_cast<bf16*>(qkv), positions, stride,
                                                                            heads + kv_heads, head_dim);
  return cudaGetLastError();
}

cudaError_t LaunchSiluAndMul(void* out, const void* in, int num_tokens, int intermediate, cudaStream_t stream) {
  tsdemo::silu_and_mul_kernel<<<num_tokens, Threads(intermediate), 0, stream>>>(
      static_cast<bf16*>(out), static_cast<const bf16*>(in), intermediate);
  return cudaGetLastError();
}

cudaError_t LaunchGatherRows(void* out, const void* in, const int32_t* rows, int num_rows, int hidden,
                             cudaStream_t stream) {
  tsdemo::gather_last_tokens_kernel<<<num_rows, Threads(hidden), 0, stream>>>(
      static_cast<bf16*>(out), static_cast<const bf16*>(in), rows, hidden);
  return cudaGetLastError();
}

cudaError_t LaunchInitWeights(void* w, int64_t n, uint64_t seed, float scale, float offset, cudaStream_t stream) {
  tsdemo::init_weights_kernel<<<1024, 256, 0, stream>>>(static_cast<bf16*>(w), n, seed, scale, offset);
  return cudaGetLastError();
}

}  // namespace twinscope::demo::gpu
