// Cost of the block probe (scripts/gpu_blocks.sh): microseconds per loop
// iteration in three phases, in one process, with whatever collector the
// environment injects (none, the probe, the naive probe):
//   other:  kernels of the module WITHOUT the target (gemm_like 4096x256 + rms_norm)
//   target: the reshape_and_cache stand-in, 1000 tokens x 512 threads
//   mixed:  both, the two-kernel loop of shared/FACTS.md (1000-block + 4096x256)
//   target_1, target_65536: the stand-in at 1 and 65,536 tokens (how the cost
//           scales with the number of blocks: fixed per launch, or per thread)
//   same:   the target (1000 tokens) and a kernel of the SAME module (grid3d,
//           512 blocks x 256 threads): what patch toggling saves (docs/block-probe.md)
//   same_small: the same with the target at 7 tokens (long toggle runs: few block records)
// One target launch runs first (untimed) so its module is loaded (and patched)
// before any phase. Each phase: 20 warm-up iterations, then `iters` timed ones
// with a single sync at the end; repeated `reps` times, median reported.
// "same" and "same_small" run only when named.
// Prints one JSON line per phase.  Usage: blocks_bench [iters] [reps] [phase,phase,...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "blocks_kernels.h"

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 500;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  const std::string only = argc > 3 ? std::string(",") + argv[3] + "," : "";  // empty: every phase
  const int tokens = 1000, max_tokens = 65536, heads = 8, head_size = 64, block_size = 16, n = heads * head_size;
  const int gemm_n = 4096 * 256;
  float *key, *value, *kc, *vc, *a, *out3d;
  int64_t* slots;
  CHECK(cudaMalloc(&key, sizeof(float) * max_tokens * n));
  CHECK(cudaMalloc(&value, sizeof(float) * max_tokens * n));
  CHECK(cudaMalloc(&kc, sizeof(float) * max_tokens * n));
  CHECK(cudaMalloc(&vc, sizeof(float) * max_tokens * n));
  CHECK(cudaMalloc(&a, sizeof(float) * gemm_n));
  const dim3 g3(64, 8, 1), b3(16, 16, 1);
  CHECK(cudaMalloc(&out3d, sizeof(float) * g3.x * g3.y * b3.x * b3.y));
  std::vector<int64_t> host(max_tokens);
  for (int i = 0; i < max_tokens; ++i) host[i] = (i % 5 == 4) ? -1 : i;
  CHECK(cudaMalloc(&slots, sizeof(int64_t) * max_tokens));
  CHECK(cudaMemcpy(slots, host.data(), sizeof(int64_t) * max_tokens, cudaMemcpyHostToDevice));

  auto target_n = [&](int t) {
    blocks_gpu::LaunchReshapeAndCache(key, value, kc, vc, slots, t, heads, head_size, block_size, 0);
  };
  auto target = [&] { target_n(tokens); };
  auto other = [&] {
    blocks_gpu::LaunchGemmLike(a, a, a, gemm_n, 4096, 0);
    blocks_gpu::LaunchRmsNorm(a, 1 << 16, 0);
  };
  target();  // load (and patch) the target module first
  CHECK(cudaDeviceSynchronize());

  struct Phase {
    const char* name;
    std::function<void()> body;
    int divisor = 1;          // runs iters / divisor iterations (65,536 blocks would flood the trace)
    bool named_only = false;  // runs only when named on the command line
  } phases[] = {{"other", other},
                {"target", target},
                {"mixed",
                 [&] {
                   target();
                   blocks_gpu::LaunchGemmLike(a, a, a, gemm_n, 4096, 0);
                 }},
                {"target_1", [&] { target_n(1); }},
                {"target_65536", [&] { target_n(max_tokens); }, 20},
                {"same",
                 [&] {
                   target();
                   blocks_gpu::LaunchGrid3d(out3d, g3, b3, 0);
                 },
                 1, true},
                {"same_small",
                 [&] {
                   target_n(7);
                   blocks_gpu::LaunchGrid3d(out3d, g3, b3, 0);
                 },
                 1, true}};
  for (const Phase& p : phases) {
    if (only.empty() ? p.named_only : only.find(std::string(",") + p.name + ",") == std::string::npos) continue;
    const int n_iters = std::max(5, iters / p.divisor), warmup = std::min(20, n_iters);
    std::vector<double> us;
    for (int r = 0; r < reps; ++r) {
      for (int i = 0; i < warmup; ++i) p.body();
      CHECK(cudaDeviceSynchronize());
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < n_iters; ++i) p.body();
      CHECK(cudaDeviceSynchronize());
      auto t1 = std::chrono::steady_clock::now();
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / n_iters);
    }
    std::sort(us.begin(), us.end());
    std::printf(
        "{\"phase\": \"%s\", \"us_per_iter\": %.2f, \"min\": %.2f, \"max\": %.2f, \"iters\": %d, \"reps\": %d}\n",
        p.name, us[us.size() / 2], us.front(), us.back(), n_iters, reps);
  }
  CHECK(cudaGetLastError());
  return 0;
}
