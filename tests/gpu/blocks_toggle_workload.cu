// GPU workload for the block probe's toggle mode (scripts/gpu_blocks_toggle.sh),
// run under the probe with TWINSCOPE_KERNELS=reshape_and_cache_flash and
// TWINSCOPE_EVERY=N (odd, > 1). Phases, each counted in matching launches
// (launches of the target, which toggle mode numbers 0, 1, 2, ...):
//   eager:   the target (1000 tokens x 512 threads), a kernel of the SAME module
//            (grid3d) and one of another module, on one stream, no syncs
//   streams: the target on stream A and the same-module kernel on stream B at once
//   graphs:  two CUDA graphs holding the target, "U" instantiated where the
//            module would be unpatched and "P" where it would be patched (toggle
//            mode patches it when the next matching launch is a multiple of N).
//            Since a graph exec keeps the patch state of its instantiation (an
//            exec made unpatched faulted when launched after a re-patch), the
//            probe patches and pins the module at the first instantiation, so
//            both run patched. Both are replayed alternately, each replay
//            synchronised and timed: a replay at a multiple of N must be traced
//            with all its blocks.
// Writes argv[1] (JSON): N, the SM count, each phase's first and last matching
// index, and per replay {exec, index, us}.
//   blocks_toggle_workload <expect.json> <N> [eager_iters]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "blocks_kernels.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: blocks_toggle_workload <expect.json> <N> [eager_iters]\n");
    return 2;
  }
  const int every = std::atoi(argv[2]);
  const int iters = argc > 3 ? std::atoi(argv[3]) : 40;
  if (every < 2) {
    std::fprintf(stderr, "blocks_toggle_workload: N must be >= 2 (got %d)\n", every);
    return 2;
  }
  const int tokens = 1000, heads = 8, head_size = 64, block_size = 16, n = heads * head_size;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  float *key, *value, *kc, *vc, *x, *out3d;
  int64_t* slots;
  CHECK(cudaMalloc(&key, sizeof(float) * tokens * n));
  CHECK(cudaMalloc(&value, sizeof(float) * tokens * n));
  CHECK(cudaMalloc(&kc, sizeof(float) * tokens * n));
  CHECK(cudaMalloc(&vc, sizeof(float) * tokens * n));
  CHECK(cudaMalloc(&x, sizeof(float) * (1 << 20)));
  const dim3 g3(64, 8, 1), b3(16, 16, 1);
  CHECK(cudaMalloc(&out3d, sizeof(float) * g3.x * g3.y * b3.x * b3.y));
  std::vector<int64_t> host(tokens);
  for (int i = 0; i < tokens; ++i) host[i] = (i % 5 == 4) ? -1 : i;
  CHECK(cudaMalloc(&slots, sizeof(int64_t) * tokens));
  CHECK(cudaMemcpy(slots, host.data(), sizeof(int64_t) * tokens, cudaMemcpyHostToDevice));

  long m = 0;  // matching launches so far
  auto target = [&](cudaStream_t s) {
    blocks_gpu::LaunchReshapeAndCache(key, value, kc, vc, slots, tokens, heads, head_size, block_size, s);
    ++m;
  };
  cudaStream_t sa, sb, sg;
  // TOGGLE_WL_NONBLOCKING=1 (diagnosis): streams that do not sync with the legacy default stream.
  const unsigned stream_flags = std::getenv("TOGGLE_WL_NONBLOCKING") ? cudaStreamNonBlocking : cudaStreamDefault;
  CHECK(cudaStreamCreateWithFlags(&sa, stream_flags));
  CHECK(cudaStreamCreateWithFlags(&sb, stream_flags));
  CHECK(cudaStreamCreateWithFlags(&sg, stream_flags));

  // Progress on stderr, flushed, so a run that hangs says where (the toggle workload timed out on the H200).
  auto phase = [&](const char* name) {
    std::fprintf(stderr, "blocks_toggle_workload: %s at matching %ld\n", name, m);
    std::fflush(stderr);
  };
  // TOGGLE_WL_WARM (diagnosis, scripts/gpu_toggle_diag.sh): launch on both streams before the first
  // toggle, "other" a kernel of another module, "same" one of the target's module.
  if (const char* warm = std::getenv("TOGGLE_WL_WARM")) {
    for (cudaStream_t s : {sa, sb}) {
      if (std::string(warm) == "same")
        blocks_gpu::LaunchGrid3d(out3d, g3, b3, s);
      else
        blocks_gpu::LaunchGemmLike(x, x, x, 1 << 20, 256, s);
    }
    CHECK(cudaDeviceSynchronize());
    phase("warmed");
  }
  phase("eager");
  const long eager_first = m;
  for (int i = 0; i < iters; ++i) {
    target(0);
    blocks_gpu::LaunchGrid3d(out3d, g3, b3, 0);
    blocks_gpu::LaunchGemmLike(x, x, x, 1 << 20, 256, 0);
  }
  CHECK(cudaDeviceSynchronize());
  const long eager_last = m - 1;

  phase("streams");
  const long streams_first = m;
  for (int i = 0; i < iters; ++i) {
    target(sa);
    blocks_gpu::LaunchGrid3d(out3d, g3, b3, sb);
  }
  CHECK(cudaStreamSynchronize(sa));
  CHECK(cudaStreamSynchronize(sb));
  const long streams_last = m - 1;

  // The module is patched now exactly if the next matching launch (index m) is a multiple of N.
  auto capture = [&](cudaGraphExec_t* exec) {
    cudaGraph_t graph;
    CHECK(cudaStreamBeginCapture(sg, cudaStreamCaptureModeGlobal));
    blocks_gpu::LaunchReshapeAndCache(key, value, kc, vc, slots, tokens, heads, head_size, block_size, sg);
    CHECK(cudaStreamEndCapture(sg, &graph));
    CHECK(cudaGraphInstantiate(exec, graph, 0));
  };
  phase("capture U");
  while (m % every == 0) target(0);  // unpatched from here on (until the next arming)
  CHECK(cudaDeviceSynchronize());
  cudaGraphExec_t exec_u, exec_p;
  capture(&exec_u);
  const long u_at = m;
  while (m % every != 0) target(0);  // patched: the next matching launch is sampled
  phase("capture P");
  capture(&exec_p);
  const long p_at = m;
  CHECK(cudaDeviceSynchronize());
  // That sync may be where the probe arms the module: it stays patched until index m runs.

  struct Replay {
    char exec;
    long index;
    double us;
  };
  std::vector<Replay> replays;
  phase("replays");
  const long graphs_first = m;
  for (int r = 0; r < 4 * every; ++r) {
    const bool p = r % 2 == 1;
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(cudaGraphLaunch(p ? exec_p : exec_u, sg));
    CHECK(cudaStreamSynchronize(sg));
    const auto t1 = std::chrono::steady_clock::now();
    replays.push_back({p ? 'P' : 'U', m, std::chrono::duration<double, std::micro>(t1 - t0).count()});
    ++m;
  }
  const long graphs_last = m - 1;
  CHECK(cudaGetLastError());

  FILE* f = std::fopen(argv[1], "w");
  if (!f) return 1;
  std::fprintf(f,
               "{\"every\": %d, \"sms\": %d, \"tokens\": %d, \"eager\": [%ld, %ld], \"streams\": [%ld, %ld], "
               "\"graphs\": [%ld, %ld], \"exec_u_instantiated_before\": %ld, \"exec_p_instantiated_before\": %ld, "
               "\"replays\": [",
               every, prop.multiProcessorCount, tokens, eager_first, eager_last, streams_first, streams_last,
               graphs_first, graphs_last, u_at, p_at);
  for (size_t i = 0; i < replays.size(); ++i)
    std::fprintf(f, "%s{\"exec\": \"%c\", \"index\": %ld, \"us\": %.2f}", i ? ", " : "", replays[i].exec,
                 replays[i].index, replays[i].us);
  std::fprintf(f, "], \"matching\": %ld}\n", m);
  std::fclose(f);
  std::printf("blocks_toggle_workload: %ld target launches (every %d), %zu graph replays on %s\n", m, every,
              replays.size(), prop.name);
  return 0;
}
