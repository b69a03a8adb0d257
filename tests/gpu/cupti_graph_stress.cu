// Seed 001 on a real GPU: a CUDA graph of one device-to-device copy (64 KiB by
// default) and K tiny kernels, captured once and replayed N times. Run it
// under libtwinscope_cupti.so (CUDA_INJECTION64_PATH) with and without the
// graph mitigation and compare the trace's kernel records with K x N.
// Prints one JSON line: what ran, GPU memory used before and after the
// replays (cudaMemGetInfo), wall time, and host RSS (VmHWM).
// Usage: cupti_graph_stress [--replays N] [--kernels K] [--copy-bytes B]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#define CHECK(call)                                                                                   \
  do {                                                                                                \
    cudaError_t err_ = (call);                                                                        \
    if (err_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "cupti_graph_stress: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, \
                   cudaGetErrorString(err_));                                                         \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

__global__ void tiny(int* p) {
  if (threadIdx.x == 0 && p) p[blockIdx.x] += 1;
}

static double UsedMiB() {
  size_t free_b = 0, total_b = 0;
  CHECK(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<double>(total_b - free_b) / (1 << 20);
}

static long StatusKiB(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  size_t n = std::strlen(field);
  while (std::getline(f, line))
    if (line.compare(0, n, field) == 0) return std::atol(line.c_str() + n + 1);
  return -1;
}

int main(int argc, char** argv) {
  long long replays = 600000;
  int kernels = 1;
  long long copy_bytes = 64 << 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--replays")
      replays = std::atoll(argv[i + 1]);
    else if (a == "--kernels")
      kernels = std::atoi(argv[i + 1]);
    else if (a == "--copy-bytes")
      copy_bytes = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--replays N] [--kernels K] [--copy-bytes B]\n", argv[0]);
      return 2;
    }
  }
  if (replays <= 0 || kernels <= 0 || copy_bytes < 0) {
    std::fprintf(stderr, "cupti_graph_stress: replays and kernels must be > 0, copy-bytes >= 0\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cupti_graph_stress: no CUDA GPU found\n");
    return 2;
  }
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char *src = nullptr, *dst = nullptr;
  int* counter = nullptr;
  if (copy_bytes > 0) {
    CHECK(cudaMalloc(&src, copy_bytes));
    CHECK(cudaMalloc(&dst, copy_bytes));
  }
  CHECK(cudaMalloc(&counter, sizeof(int)));
  CHECK(cudaMemset(counter, 0, sizeof(int)));

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  if (copy_bytes > 0) CHECK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, s));
  for (int k = 0; k < kernels; ++k) tiny<<<1, 32, 0, s>>>(counter);
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, s));  // warm-up, counted below
  CHECK(cudaStreamSynchronize(s));

  double before = UsedMiB();
  auto t0 = std::chrono::steady_clock::now();
  for (long long r = 1; r < replays; ++r) {
    CHECK(cudaGraphLaunch(exec, s));
    if (r % 10000 == 0) CHECK(cudaStreamSynchronize(s));
  }
  CHECK(cudaStreamSynchronize(s));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double after = UsedMiB();
  int count = 0;
  CHECK(cudaMemcpy(&count, counter, sizeof count, cudaMemcpyDeviceToHost));
  bool ok = static_cast<unsigned>(count) == static_cast<unsigned>(replays * kernels);  // the GPU did every kernel

  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  std::printf(
      "{\"replays\": %lld, \"kernels_per_graph\": %d, \"copy_bytes\": %lld, \"kernels_launched\": %lld, "
      "\"gpu_used_mib_before\": %.1f, \"gpu_used_mib_after\": %.1f, \"seconds\": %.3f, \"ns_per_kernel\": %.1f, "
      "\"rss_peak_kib\": %ld, \"device_counter_ok\": %s}\n",
      replays, kernels, copy_bytes, replays * kernels, before, after, secs,
      secs * 1e9 / static_cast<double>((replays - 1) * kernels), StatusKiB("VmHWM:"), ok ? "true" : "false");
  return ok ? 0 : 1;
}
