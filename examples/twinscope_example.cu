// The example program of the README: a small CUDA workload shaped like an
// inference step loop, to record with `twinscope record`. It uses
//   - plain kernel launches and a cudaMemsetAsync (the "setup" range),
//   - a CUDA Graph captured once from a device-to-device copy and three
//     kernels, replayed once per "step" NVTX range,
//   - a host-to-device and a device-to-host copy,
// checks every CUDA call and the numerical result, and prints what it did.
// Usage: twinscope_example [steps]   (default 20)
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                                  \
  do {                                                                                               \
    cudaError_t err_ = (call);                                                                       \
    if (err_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "twinscope_example: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, \
                   cudaGetErrorString(err_));                                                        \
      std::exit(1);                                                                                  \
    }                                                                                                \
  } while (0)

__global__ void fill(float* x, int n, float v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}

__global__ void scale(float* x, int n, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

__global__ void axpy(const float* x, float* y, int n, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

__global__ void reduce_sum(const float* x, int n, float* out) {
  __shared__ float partial[256];
  float s = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k /= 2) {
    if (threadIdx.x < k) partial[threadIdx.x] += partial[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

int main(int argc, char** argv) {
  int steps = argc > 1 ? std::atoi(argv[1]) : 20;
  if (steps <= 0) {
    std::fprintf(stderr, "twinscope_example: steps must be a positive number (got '%s')\n", argv[1]);
    return 2;
  }
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::fprintf(stderr,
                 "twinscope_example: no CUDA GPU found (cudaGetDeviceCount: %s). This example needs an NVIDIA GPU "
                 "and its driver.\n",
                 e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    return 2;
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("twinscope_example on %s (%d SMs), %d steps\n", prop.name, prop.multiProcessorCount, steps);

  const int n = 1 << 20;
  const int threads = 256, blocks = (n + threads - 1) / threads;
  float *x, *y, *tmp, *sum;
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  CHECK(cudaMalloc(&tmp, n * sizeof(float)));
  CHECK(cudaMalloc(&sum, sizeof(float)));

  int plain_launches = 0;
  nvtxRangePushA("setup");
  std::vector<float> host(n, 1.0f);
  CHECK(cudaMemcpyAsync(x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream));
  CHECK(cudaMemsetAsync(y, 0, n * sizeof(float), stream));
  fill<<<blocks, threads, 0, stream>>>(tmp, n, 0.0f);
  CHECK(cudaGetLastError());
  scale<<<blocks, threads, 0, stream>>>(x, n, 2.0f);  // x = 2
  CHECK(cudaGetLastError());
  plain_launches += 2;
  nvtxRangePop();

  // One step: tmp = x (DtoD copy); tmp *= 0.5; y += 1 * tmp; sum += reduce(y).
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  CHECK(cudaMemcpyAsync(tmp, x, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  scale<<<blocks, threads, 0, stream>>>(tmp, n, 0.5f);
  axpy<<<blocks, threads, 0, stream>>>(tmp, y, n, 1.0f);
  reduce_sum<<<prop.multiProcessorCount, 256, 0, stream>>>(y, n, sum);
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const int graph_kernels = 3;

  CHECK(cudaMemsetAsync(sum, 0, sizeof(float), stream));
  for (int s = 0; s < steps; ++s) {
    nvtxRangePushA("step");
    CHECK(cudaGraphLaunch(exec, stream));
    nvtxRangePop();
  }
  CHECK(cudaStreamSynchronize(stream));

  // After step k (1-based), every y[i] == k, and sum accumulates n * k.
  float got_y = 0, got_sum = 0;
  CHECK(cudaMemcpy(&got_y, y + n / 2, sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&got_sum, sum, sizeof(float), cudaMemcpyDeviceToHost));
  double want_sum = static_cast<double>(n) * steps * (steps + 1) / 2.0;
  bool ok = got_y == static_cast<float>(steps) && std::fabs(got_sum - want_sum) <= 1e-3 * want_sum;

  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  CHECK(cudaFree(tmp));
  CHECK(cudaFree(sum));
  CHECK(cudaStreamDestroy(stream));

  std::printf("plain kernel launches: %d (in NVTX range \"setup\")\n", plain_launches);
  std::printf(
      "graph: 1 device-to-device copy + %d kernels, replayed %d times (one NVTX \"step\" range each) = %d "
      "graph kernels\n",
      graph_kernels, steps, graph_kernels * steps);
  std::printf("copies: 1 host-to-device, %d device-to-device (graph), 2 device-to-host; memsets: 2\n", steps);
  std::printf("kernels in total: %d\n", plain_launches + graph_kernels * steps);
  std::printf("result check: y = %.1f (want %d), sum = %.6g (want %.6g): %s\n", got_y, steps, got_sum, want_sum,
              ok ? "OK" : "WRONG");
  return ok ? 0 : 1;
}
