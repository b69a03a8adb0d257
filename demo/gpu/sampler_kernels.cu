// The demo engine's sampler: per row of logits, the max and log-sum-exp (what
// a real sampler's softmax costs), then the deterministic token of
// common/sampling.h and its log-probability under the logits.
#include <cuda_bf16.h>

#include <cfloat>

#include "common/sampling.h"
#include "gpu/kernels.h"

namespace tsdemo {

constexpr int kThreads = 1024;

__global__ void sampling_kernel(int32_t* __restrict__ tokens, float* __restrict__ logprobs,
                                const __nv_bfloat16* __restrict__ logits, const uint64_t* __restrict__ seeds,
                                const int32_t* __restrict__ sample_index, int vocab) {
  const int64_t r = blockIdx.x;
  const int index = sample_index[r];
  if (index < 0) {  // padding row
    if (threadIdx.x == 0) {
      tokens[r] = -1;
      logprobs[r] = 0.f;
    }
    return;
  }
  const __nv_bfloat16* row = logits + r * vocab;
  __shared__ float red[kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float mx = -FLT_MAX;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) mx = fmaxf(mx, __bfloat162float(row[i]));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  if (lane == 0) red[warp] = mx;
  __syncthreads();
  mx = -FLT_MAX;
  for (int w = 0; w < kThreads / 32; ++w) mx = fmaxf(mx, red[w]);
  __syncthreads();
  float sum = 0.f;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) sum += __expf(__bfloat162float(row[i]) - mx);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (lane == 0) red[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.f;
    for (int w = 0; w < kThreads / 32; ++w) total += red[w];
    const int32_t token = twinscope::demo::SampleToken(seeds[r], static_cast<uint32_t>(index), vocab);
    tokens[r] = token;
    logprobs[r] = __bfloat162float(row[token]) - mx - __logf(total);
  }
}

}  // namespace tsdemo

namespace twinscope::demo::gpu {

cudaError_t LaunchSampling(int32_t* tokens, float* logprobs, const void* logits, const uint64_t* seeds,
                           const int32_t* sample_index, int rows, int vocab, cudaStream_t stream) {
  tsdemo::sampling_kernel<<<rows, tsdemo::kThreads, 0, stream>>>(
      tokens, logprobs, static_cast<const __nv_bfloat16*>(logits), seeds, sample_index, vocab);
  return cudaGetLastError();
}

}  // namespace twinscope::demo::gpu
