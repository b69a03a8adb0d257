// The probe child's CUDA side: the device count and the test launches.
#include <cuda_runtime.h>

#include "probe/child/sides.h"

namespace {
__global__ void probe_test_kernel(int* out) {
  if (out) out[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x;
}
}  // namespace

namespace twinscope::probe_child {

int CudaDeviceCount(int* count, std::string* error) {
  cudaError_t e = cudaGetDeviceCount(count);
  if (e != cudaSuccess)
    *error = std::string("cudaGetDeviceCount returned ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  return static_cast<int>(e);
}

int LaunchTestKernels(int n, std::string* error) {
  int* out = nullptr;
  cudaError_t e = cudaMalloc(&out, 8 * 64 * sizeof(int));
  for (int i = 0; e == cudaSuccess && i < n; ++i) {
    probe_test_kernel<<<8, 64>>>(out);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (out) cudaFree(out);
  if (e != cudaSuccess) *error = std::string("test launches failed: ") + cudaGetErrorName(e);
  return static_cast<int>(e);
}

}  // namespace twinscope::probe_child
