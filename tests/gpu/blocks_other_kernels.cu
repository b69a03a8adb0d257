// The module without a target (see blocks_kernels.h).
#include "blocks_kernels.h"

__global__ void gemm_like_kernel(const float* a, const float* b, float* c, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) c[i] = a[i] * b[i] + c[i];
}

extern "C" __global__ void rms_norm_kernel(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 0.5f;
}

namespace blocks_gpu {

void LaunchGemmLike(const float* a, const float* b, float* c, int n, int blocks, cudaStream_t stream) {
  gemm_like_kernel<<<blocks, 256, 0, stream>>>(a, b, c, n);
}

void LaunchRmsNorm(float* x, int n, cudaStream_t stream) { rms_norm_kernel<<<(n + 127) / 128, 128, 0, stream>>>(x, n); }

}  // namespace blocks_gpu
