// A CUDA "program" over the fake Sanitizer that runs until it is killed:
// bursts of launches of the block probe's target kernel (random grids) and of
// another kernel, inside NVTX ranges, synchronised now and then (where the
// probe drains), with idle pauses between bursts. The fake loads the probe from
// CUDA_INJECTION64_PATH; progress goes to a shared page (progress.h) for
// crash_test.cpp, which SIGKILLs it at a random moment.
//
// Usage: blocks_crash_app <target.cubin> <other.cubin> <progress file> <seed>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include "fakesan.h"
#include "progress.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s <target.cubin> <other.cubin> <progress file> <seed>\n", argv[0]);
    return 2;
  }
  twinscope::crash::Progress* progress = twinscope::crash::MapProgress(argv[3]);
  if (!progress || fakesan_init() != 0) return 3;
  const uintptr_t target = fakesan_load_module_file(argv[1]), other = fakesan_load_module_file(argv[2]);
  if (!target || !other) return 4;
  const char* kTarget = "_ZN4vllm30reshape_and_cache_flash_kernelIffEEvPKT_PT0_PKlii";
  const char* kOther = "_Z16gemm_like_kernelPKfS0_Pfi";

  std::mt19937_64 rng(std::strtoull(argv[4], nullptr, 10));
  uint64_t launches = 0, traced = 0;
  for (;;) {
    const unsigned burst = 1 + rng() % 400;
    nvtxRangePushA("step");
    for (unsigned i = 0; i < burst; ++i) {
      if (fakesan_launch(target, kTarget, 1 + rng() % 200, 1, 1, 64, 1, 1, 0, nullptr) != 0) return 5;
      if (fakesan_launch(other, kOther, 8, 1, 1, 128, 1, 1, 0, nullptr) != 0) return 5;
      launches += 2;
      ++traced;
      progress->traced.store(traced, std::memory_order_release);
      progress->launches.store(launches, std::memory_order_release);
      if (rng() % 50 == 0) fakesan_ctx_sync();
      if (i % 16 == 15) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    nvtxRangePop();
    fakesan_ctx_sync();
    if (rng() % 3 == 0) {
      progress->idle.store(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 300));
      progress->idle.store(0);
    }
  }
}
