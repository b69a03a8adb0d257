// Block probe and CUDA graphs (GPU only): one module holding a target kernel
// and two other kernels, captured into a graph (by default [other, target,
// other]; LAYOUT spells another: a = add, t = target, s = scale) and
// replayed; optionally uploaded first (cudaGraphUpload, as PyTorch does), and
// optionally with an eager phase before. The shadow trace of
//   twinscope blocks --kernel graph_target -- graph_nodes UPLOAD REPLAYS EAGER [LAYOUT]
// must hold REPLAYS launches of graph_target with 96 blocks each, and the
// program's results must be right (the other kernels' nodes run patched but
// untraced). Prints what it did; exits 1 on a wrong result.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

__global__ void graph_other_add(float* x, int n, float v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}

__global__ void graph_target(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}

__global__ void graph_other_scale(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] *= 0.5f;
}

int main(int argc, char** argv) {
  const int upload = argc > 1 ? std::atoi(argv[1]) : 0;
  const int replays = argc > 2 ? std::atoi(argv[2]) : 10;
  const int eager = argc > 3 ? std::atoi(argv[3]) : 0;
  const char* layout = argc > 4 ? argv[4] : "ats";
  const int n = 96 * 128;
  float *x, *y;
  CHECK(cudaMalloc(&x, n * sizeof(float)));
  CHECK(cudaMalloc(&y, n * sizeof(float)));
  CHECK(cudaMemset(x, 0, n * sizeof(float)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < eager; ++i) graph_target<<<96, 128, 0, s>>>(x, y, n);
  CHECK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t e;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (const char* c = layout; *c; ++c) {
    if (*c == 'a') graph_other_add<<<96, 128, 0, s>>>(x, n, 1.0f);
    if (*c == 't') graph_target<<<96, 128, 0, s>>>(x, y, n);
    if (*c == 's') graph_other_scale<<<96, 128, 0, s>>>(y, n);
  }
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&e, g, 0));
  if (upload) CHECK(cudaGraphUpload(e, s));
  for (int r = 0; r < replays; ++r) CHECK(cudaGraphLaunch(e, s));
  CHECK(cudaStreamSynchronize(s));
  float got = 0;
  CHECK(cudaMemcpy(&got, y + n / 2, sizeof got, cudaMemcpyDeviceToHost));
  float hx = 0, hy = 0;  // the same steps on the host (eager launches leave y = 0)
  for (int r = 0; r < replays; ++r)
    for (const char* c = layout; *c; ++c) {
      if (*c == 'a') hx += 1.0f;
      if (*c == 't') hy = 2.0f * hx;
      if (*c == 's') hy *= 0.5f;
    }
  const bool ok = got == hy;
  std::printf("graph_nodes: layout %s, upload %d, %d replays, %d eager: y = %.1f (want %.1f): %s\n", layout, upload,
              replays, eager, got, hy, ok ? "OK" : "WRONG");
  return ok ? 0 : 1;
}
