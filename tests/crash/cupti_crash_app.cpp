// A CUDA "program" over the fake CUPTI that runs until it is killed: bursts of
// eager launches (runtime and driver API), graph launches and copies inside
// NVTX ranges, with idle pauses between bursts. Loads the CUPTI collector the
// way the CUDA driver does and reports its progress in a shared page
// (progress.h) for crash_test.cpp, which SIGKILLs it at a random moment.
//
// Usage: cupti_crash_app <collector.so> <progress file> <seed>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "fakecupti.h"
#include "progress.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <collector.so> <progress file> <seed>\n", argv[0]);
    return 2;
  }
  twinscope::crash::Progress* progress = twinscope::crash::MapProgress(argv[2]);
  if (!progress) return 3;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  auto init = lib ? reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection")) : nullptr;
  if (!init || init() != 1) {
    std::fprintf(stderr, "cannot load the collector %s: %s\n", argv[1], lib ? "no InitializeInjection" : dlerror());
    return 4;
  }
  fakecupti_create_context(0);
  constexpr unsigned kGraphKernels = 3;
  CUgraph g = fakecupti_graph_create();
  for (unsigned k = 0; k < kGraphKernels; ++k) fakecupti_graph_add_kernel(g, "_Z5graphv", 4, 1, 1, 128, 1, 1);
  fakecupti_graph_add_memcpy(g, 65536);
  CUgraphExec exec = fakecupti_graph_instantiate(g, 1);

  std::mt19937_64 rng(std::strtoull(argv[3], nullptr, 10));
  uint64_t launches = 0;
  for (;;) {
    const unsigned burst = 1 + rng() % 3000;
    nvtxRangePushA("step");
    for (unsigned i = 0; i < burst; ++i) {
      const unsigned what = rng() % 16;
      if (what == 0) {
        fakecupti_graph_launch(exec, nullptr, 0);
        launches += kGraphKernels;
      } else if (what == 1) {
        fakecupti_memcpy(4096);
      } else {
        FakeLaunch l{};
        l.name = what % 2 ? "_Z5eagerPf" : "_Z6driverv";
        l.grid[0] = 1 + what;
        l.grid[1] = l.grid[2] = 1;
        l.block[0] = 128;
        l.block[1] = l.block[2] = 1;
        l.api = what % 2 ? FAKE_API_RUNTIME : FAKE_API_DRIVER;
        fakecupti_launch(&l);
        ++launches;
      }
      progress->launches.store(launches, std::memory_order_release);
      // A GPU-bound program's pace (~100k launches/s at most), not the CPU's.
      if (i % 64 == 63) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    nvtxRangePop();
    if (rng() % 3 == 0) {
      progress->idle.store(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 300));
      progress->idle.store(0);
    }
  }
}
