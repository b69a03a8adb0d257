// The application thread's cost of one launch under an injection library, on
// the CPU: a stand-in application that loads the library the way the CUDA
// driver does (dlopen, InitializeInjection) and drives the fake CUPTI through
// one workload. scripts/bench_launch_path.sh runs it under callgrind (counting
// only inside the bench_measured_* functions, on this thread) for twinscope's
// collector and for the floors (bench/gpu/bare_cupti.cpp built against the
// fake), and prints the differences.
//
// Allocations: malloc and friends are interposed here; calls made on the
// measured thread inside a measured function are counted and printed, so the
// script can subtract the floor's (the fake's own record buffers).
//
// Usage: launch_path_driver <injection.so> <workload> [units]
//   workloads: plain (one NVTX range), cudart (the same, as the CUDA runtime
//   launches: cudaLaunchKernel with the driver's cuLaunchKernel inside it, so
//   four callbacks a launch, as on the GPU), nested8 (8 nested ranges), capture
//   (launches into a capturing stream), graph100 (graph launches of 100 kernel
//   nodes; per node = per unit / 100), memcpy (cudaMemcpyAsync API calls).
// Prints "UNITS <n> ALLOCS <n> KERNELS_PER_UNIT <k>".
#include <malloc.h>
#include <nvtx3/nvToolsExt.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fakecupti.h"
#include "load_injection.h"

// ---- allocation counter --------------------------------------------------------
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}

namespace {
thread_local bool t_counting = false;  // this thread is inside a measured function
unsigned long long g_allocs = 0;       // written only by the counting thread
inline void Count() {
  if (t_counting) ++g_allocs;
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
  Count();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  Count();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  Count();
  return __libc_realloc(p, n);
}
void* memalign(size_t align, size_t n) {
  Count();
  return __libc_memalign(align, n);
}
void* aligned_alloc(size_t align, size_t n) {
  Count();
  return __libc_memalign(align, n);
}
int posix_memalign(void** out, size_t align, size_t n) {
  Count();
  void* p = __libc_memalign(align, n);
  if (!p) return 12;  // ENOMEM
  *out = p;
  return 0;
}
void free(void* p) { __libc_free(p); }
}

// ---- workloads -------------------------------------------------------------------
namespace {

constexpr char kKernel[] = "_Z4tinyPi";

FakeLaunch TinyLaunch(CUstream s, int api = FAKE_API_RUNTIME) {
  FakeLaunch l{};
  l.name = kKernel;
  l.grid[0] = 1;
  l.grid[1] = l.grid[2] = 1;
  l.block[0] = 32;
  l.block[1] = l.block[2] = 1;
  l.api = api;
  l.stream = s;
  return l;
}

struct Guard {  // counts allocations while alive
  Guard() { t_counting = true; }
  ~Guard() { t_counting = false; }
};

}  // namespace

// The measured functions: callgrind collects only inside these (by name).
extern "C" __attribute__((noinline)) void bench_measured_launch(const FakeLaunch* l) {
  Guard g;
  fakecupti_launch(l);
}
extern "C" __attribute__((noinline)) void bench_measured_graph_launch(CUgraphExec exec) {
  Guard g;
  fakecupti_graph_launch(exec, nullptr, 0);
}
extern "C" __attribute__((noinline)) void bench_measured_memcpy() {
  Guard g;
  fakecupti_memcpy(65536);
}

namespace {

// Between batches, unmeasured: records go to the injection library, whose
// own threads get time to take them (so steady state is measured, never a
// backlog).
void Settle() {
  fakecupti_flush();
  usleep(2000);
}

int Run(const std::string& workload, long units) {
  const long warmup = units, batch = workload == "graph100" ? 5 : 250;
  int kernels_per_unit = 1;
  auto repeat = [&](auto&& one) {
    for (long i = 0; i < warmup; ++i) {
      one(false);
      if (i % batch == batch - 1) Settle();
    }
    Settle();
    for (long i = 0; i < units; ++i) {
      one(true);
      if (i % batch == batch - 1) Settle();
    }
    Settle();
  };
  if (workload == "plain" || workload == "cudart" || workload == "nested8" || workload == "capture") {
    const int depth = workload == "nested8" ? 8 : 1;
    CUstream s = nullptr;
    if (workload == "capture") {
      s = fakecupti_create_stream();
      fakecupti_set_capturing(s, 1);
      kernels_per_unit = 0;
    }
    for (int d = 0; d < depth; ++d) nvtxRangePushA(d == 0 ? "step" : "layer");
    const FakeLaunch l = TinyLaunch(s, workload == "cudart" ? FAKE_API_RUNTIME_NESTED : FAKE_API_RUNTIME);
    repeat([&](bool measured) {
      if (measured)
        bench_measured_launch(&l);
      else
        fakecupti_launch(&l);
    });
    for (int d = 0; d < depth; ++d) nvtxRangePop();
  } else if (workload == "graph100") {
    kernels_per_unit = 100;
    CUgraph g = fakecupti_graph_create();
    for (int k = 0; k < 100; ++k) fakecupti_graph_add_kernel(g, kKernel, 1, 1, 1, 32, 1, 1);
    CUgraphExec exec = fakecupti_graph_instantiate(g, 1);
    nvtxRangePushA("step");
    repeat([&](bool measured) {
      if (measured)
        bench_measured_graph_launch(exec);
      else
        fakecupti_graph_launch(exec, nullptr, 0);
    });
    nvtxRangePop();
  } else if (workload == "memcpy") {
    kernels_per_unit = 0;
    nvtxRangePushA("step");
    repeat([&](bool measured) {
      if (measured)
        bench_measured_memcpy();
      else
        fakecupti_memcpy(65536);
    });
    nvtxRangePop();
  } else {
    std::fprintf(stderr, "launch_path_driver: unknown workload %s (plain, nested8, capture, graph100, memcpy)\n",
                 workload.c_str());
    return 2;
  }
  std::printf("UNITS %ld ALLOCS %llu KERNELS_PER_UNIT %d\n", units, g_allocs, kernels_per_unit);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <injection.so> <workload> [units]\n", argv[0]);
    return 2;
  }
  long units = argc > 3 ? std::atol(argv[3]) : 2000;
  if (units <= 0) units = 2000;
  if (int rc = LoadInjection(argv[1])) return rc;
  fakecupti_create_context(0);
  return Run(argv[2], units);
}
