// Launch-overhead workloads for the CUPTI collector benchmark: prints one JSON
// line per workload with ns per kernel (wall time of the launches through the
// final synchronize, divided by the kernels launched).
//   eager: N launches of a 1-block tiny kernel on one stream
//   graph: a CUDA graph of K tiny kernels replayed R times
//   eager_call (--eager-burst B): the same N launches in bursts of B, timing
//     only the launch calls of each burst (a sync between bursts, untimed):
//     the launch's cost on the application thread. With the GPU slower than
//     plain launches, "eager" times the GPU when untraced and the CPU when
//     traced, which inflates the added cost of the traced variants; bursts
//     short enough for the launch queue never wait for it. B may be a list
//     (--eager-burst 256,16): the first is reported as "eager_call", the others
//     as "eager_call_b<B>" (to see whether B waits for the queue).
//   levels (--levels R): within this one process, R rounds of N launch calls
//     (bursts of 256, timed as eager_call) at each level of the injection
//     named by CUDA_INJECTION64_PATH, in a rotating order: 0 nothing enabled,
//     1 the activity kinds only (the bare floor), 2 everything the injection
//     does. The injection must export twinscope_bench_level (twinscope with
//     TWINSCOPE_BENCH_LEVELS=1, or bench/gpu/bare_cupti). One process sees all
//     three, so the noise between processes (placement, clocks) cancels.
//     Prints {"workload": "levels", "round", "level", "ns_per_kernel"} per
//     phase, and nothing else.
//   primitives (--primitives N): N calls each of what the collector's launch
//     path calls per launch, on this host: clock_gettime (three clocks),
//     cuptiGetTimestamp (when an injection loaded CUPTI), cuStreamIsCapturing;
//     ns per call, and which clock cuptiGetTimestamp reads (its offset to
//     each). Prints {"workload": "prim_<name>", "ns_per_call"} lines and
//     {"workload": "cupti_clock", ...}, and nothing else.
// Usage: bench_kernels [--eager N] [--eager-burst B[,B...]] [--graph-kernels K] [--graph-replays R] [--levels R]
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cudaError_t err_ = (call);                                                                   \
    if (err_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "bench_kernels: %s failed at %s:%d: %s\n", #call, __FILE__, __LINE__, \
                   cudaGetErrorString(err_));                                                    \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

__global__ void tiny(int* p) {
  if (threadIdx.x == 0 && p) p[0] += 1;
}

using Clock = std::chrono::steady_clock;

static void Report(const char* workload, long long kernels, Clock::time_point t0) {
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("{\"workload\": \"%s\", \"kernels\": %lld, \"seconds\": %.4f, \"ns_per_kernel\": %.1f}\n", workload,
              kernels, secs, secs * 1e9 / static_cast<double>(kernels));
  std::fflush(stdout);
}

// Launch calls of `n` tiny kernels in bursts of `burst` (a sync between bursts, untimed): ns per call.
static double BurstNs(long long n, long long burst, cudaStream_t s, int* counter) {
  double calls_s = 0;
  for (long long done = 0; done < n;) {
    const long long k = std::min(burst, n - done);
    const auto b0 = Clock::now();
    for (long long i = 0; i < k; ++i) tiny<<<1, 32, 0, s>>>(counter);
    calls_s += std::chrono::duration<double>(Clock::now() - b0).count();
    CHECK(cudaStreamSynchronize(s));
    done += k;
  }
  CHECK(cudaGetLastError());
  return calls_s * 1e9 / static_cast<double>(n);
}

template <typename Fn>
static void TimeCalls(const char* name, long long n, Fn&& fn) {
  fn();  // first call outside the timing (lazy binding)
  const auto t0 = Clock::now();
  for (long long i = 0; i < n; ++i) fn();
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(n);
  std::printf("{\"workload\": \"prim_%s\", \"calls\": %lld, \"ns_per_call\": %.1f}\n", name, n, ns);
}

static uint64_t ClockNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

static int Primitives(long long n, cudaStream_t s) {
  volatile uint64_t sink = 0;
  TimeCalls("clock_monotonic", n, [&] { sink = sink + ClockNs(CLOCK_MONOTONIC); });
  TimeCalls("clock_monotonic_raw", n, [&] { sink = sink + ClockNs(CLOCK_MONOTONIC_RAW); });
  TimeCalls("clock_realtime", n, [&] { sink = sink + ClockNs(CLOCK_REALTIME); });
  using GetTimestamp = int (*)(uint64_t*);
  // Both libraries are loaded privately (RTLD_LOCAL) by the injection and the runtime: found by name.
  auto sym = [](const char* lib, const char* name) -> void* {
    void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    return h ? dlsym(h, name) : dlsym(RTLD_DEFAULT, name);
  };
  auto cupti_ts = reinterpret_cast<GetTimestamp>(sym("libcupti.so.13", "cuptiGetTimestamp"));
  if (cupti_ts) {
    TimeCalls("cuptiGetTimestamp", n, [&] {
      uint64_t t = 0;
      cupti_ts(&t);
      sink = sink + t;
    });
    uint64_t c = 0;
    const uint64_t mono = ClockNs(CLOCK_MONOTONIC), raw = ClockNs(CLOCK_MONOTONIC_RAW), real = ClockNs(CLOCK_REALTIME);
    cupti_ts(&c);
    std::printf(
        "{\"workload\": \"cupti_clock\", \"minus_monotonic_ns\": %lld, \"minus_monotonic_raw_ns\": %lld, "
        "\"minus_realtime_ns\": %lld}\n",
        static_cast<long long>(c - mono), static_cast<long long>(c - raw), static_cast<long long>(c - real));
  }
  using IsCapturing = int (*)(cudaStream_t, int*);
  auto is_capturing = reinterpret_cast<IsCapturing>(sym("libcuda.so.1", "cuStreamIsCapturing"));
  if (is_capturing)
    TimeCalls("cuStreamIsCapturing", n, [&] {
      int status = 0;
      is_capturing(s, &status);
      sink = sink + static_cast<uint64_t>(status);
    });
  if (!cupti_ts || !is_capturing)
    std::fprintf(stderr, "bench_kernels --primitives: %s%s not found\n", cupti_ts ? "" : "cuptiGetTimestamp ",
                 is_capturing ? "" : "cuStreamIsCapturing");
  std::fflush(stdout);
  return 0;
}

static int Levels(long long rounds, long long n, cudaStream_t s, int* counter) {
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  void* lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  auto set = lib ? reinterpret_cast<int (*)(int)>(dlsym(lib, "twinscope_bench_level")) : nullptr;
  if (!set) {
    std::fprintf(stderr,
                 "bench_kernels --levels: the injection (CUDA_INJECTION64_PATH=%s) is not loaded or has no "
                 "twinscope_bench_level\n",
                 path ? path : "unset");
    return 2;
  }
  for (long long r = 0; r < rounds; ++r) {
    for (int i = 0; i < 3; ++i) {
      const int level = static_cast<int>((r + i) % 3);
      if (int e = set(level); e != 0) {
        std::fprintf(stderr,
                     "bench_kernels --levels: twinscope_bench_level(%d) returned %d (for twinscope: set "
                     "TWINSCOPE_BENCH_LEVELS=1)\n",
                     level, e);
        return 2;
      }
      BurstNs(1000, 256, s, counter);  // settle after the switch
      const double ns = BurstNs(n, 256, s, counter);
      std::printf("{\"workload\": \"levels\", \"round\": %lld, \"level\": %d, \"ns_per_kernel\": %.1f}\n", r, level,
                  ns);
    }
  }
  std::fflush(stdout);
  set(2);
  return 0;
}

int main(int argc, char** argv) {
  long long eager = 1000000, replays = 10000, level_rounds = 0, primitives = 0;
  std::vector<long long> bursts;
  int graph_kernels = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--eager")
      eager = std::atoll(argv[i + 1]);
    else if (a == "--eager-burst") {
      for (const char* p = argv[i + 1]; *p;) {
        char* end = nullptr;
        const long long b = std::strtoll(p, &end, 10);
        if (end == p || b <= 0) {
          std::fprintf(stderr, "bench_kernels: --eager-burst wants positive numbers, comma-separated: %s\n",
                       argv[i + 1]);
          return 2;
        }
        bursts.push_back(b);
        p = *end == ',' ? end + 1 : end;
      }
    } else if (a == "--primitives")
      primitives = std::atoll(argv[i + 1]);
    else if (a == "--levels")
      level_rounds = std::atoll(argv[i + 1]);
    else if (a == "--graph-kernels")
      graph_kernels = std::atoi(argv[i + 1]);
    else if (a == "--graph-replays")
      replays = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr,
                   "usage: %s [--eager N] [--eager-burst B[,B...]] [--graph-kernels K] [--graph-replays R] "
                   "[--levels R] [--primitives N]\n",
                   argv[0]);
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "bench_kernels: no CUDA GPU found\n");
    return 2;
  }
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int* counter;
  CHECK(cudaMalloc(&counter, sizeof(int)));

  for (int i = 0; i < 1000; ++i) tiny<<<1, 32, 0, s>>>(counter);  // warm-up
  CHECK(cudaStreamSynchronize(s));
  if (primitives > 0) return Primitives(primitives, s);
  if (level_rounds > 0) return Levels(level_rounds, eager > 0 ? eager : 100000, s, counter);
  if (eager > 0) {
    auto t0 = Clock::now();
    for (long long i = 0; i < eager; ++i) tiny<<<1, 32, 0, s>>>(counter);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamSynchronize(s));
    Report("eager", eager, t0);
  }
  for (size_t bi = 0; eager > 0 && bi < bursts.size(); ++bi) {
    const long long burst = bursts[bi];
    const double ns = BurstNs(eager, burst, s, counter);
    const std::string name = bi == 0 ? "eager_call" : "eager_call_b" + std::to_string(burst);
    std::printf(
        "{\"workload\": \"%s\", \"kernels\": %lld, \"burst\": %lld, \"seconds\": %.4f, "
        "\"ns_per_kernel\": %.1f}\n",
        name.c_str(), eager, burst, ns * static_cast<double>(eager) * 1e-9, ns);
    std::fflush(stdout);
  }
  if (graph_kernels > 0 && replays > 0) {
    cudaGraph_t g;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < graph_kernels; ++k) tiny<<<1, 32, 0, s>>>(counter);
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    auto t0 = Clock::now();
    for (long long r = 0; r < replays; ++r) CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    Report("graph", replays * graph_kernels, t0);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(g));
  }
  CHECK(cudaFree(counter));
  return 0;
}
