// GPU correctness workload of the block probe (scripts/gpu_blocks.sh): steps in
// NVTX ranges, each launching the reshape_and_cache stand-in for 1, 7, 1000
// and 65536 tokens (512 threads, every 5th slot negative: those blocks exit at
// once), a 3-D grid kernel and kernels of another module; then a CUDA graph
// holding the target kernel, replayed. Writes what a trace must contain to the
// JSON file argv[1] (read by blocks_trace_check).
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "blocks_kernels.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: blocks_workload <expect.json> [steps] [graph_replays]\n");
    return 2;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 3;
  const int replays = argc > 3 ? std::atoi(argv[3]) : 4;
  const int heads = 8, head_size = 128, block_size = 16;
  const std::vector<int> token_counts = {1, 7, 1000, 65536};
  const int max_tokens = 65536, n = heads * head_size;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));

  float *key, *value, *kc, *vc, *x, *out3d;
  int64_t* slots;
  CHECK(cudaMalloc(&key, sizeof(float) * max_tokens * n));
  CHECK(cudaMalloc(&value, sizeof(float) * max_tokens * n));
  CHECK(cudaMalloc(&kc, sizeof(float) * max_tokens * n));
  CHECK(cudaMalloc(&vc, sizeof(float) * max_tokens * n));
  CHECK(cudaMalloc(&x, sizeof(float) * (1 << 20)));
  const dim3 g3(9, 5, 3), b3(8, 8, 2);
  CHECK(cudaMalloc(&out3d, sizeof(float) * g3.x * g3.y * g3.z * b3.x * b3.y * b3.z));
  std::vector<int64_t> host_slots(max_tokens);
  for (int i = 0; i < max_tokens; ++i) host_slots[i] = (i % 5 == 4) ? -1 : i;
  CHECK(cudaMalloc(&slots, sizeof(int64_t) * max_tokens));
  CHECK(cudaMemcpy(slots, host_slots.data(), sizeof(int64_t) * max_tokens, cudaMemcpyHostToDevice));

  int reshape_launches = 0, grid3d_launches = 0, other_launches = 0;
  std::vector<int> reshape_grids;
  for (int s = 0; s < steps; ++s) {
    nvtxRangePushA("step");
    for (int tokens : token_counts) {
      blocks_gpu::LaunchGemmLike(x, x, x, 1 << 20, 4096 / 16, 0);
      ++other_launches;
      blocks_gpu::LaunchReshapeAndCache(key, value, kc, vc, slots, tokens, heads, head_size, block_size, 0);
      ++reshape_launches;
      reshape_grids.push_back(tokens);
    }
    blocks_gpu::LaunchGrid3d(out3d, g3, b3, 0);
    ++grid3d_launches;
    blocks_gpu::LaunchRmsNorm(x, 1 << 20, 0);
    ++other_launches;
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    nvtxRangePop();
  }

  // A CUDA graph: other kernel + target (1000 tokens), replayed.
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  blocks_gpu::LaunchRmsNorm(x, 1 << 20, stream);
  blocks_gpu::LaunchReshapeAndCache(key, value, kc, vc, slots, 1000, heads, head_size, block_size, stream);
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < replays; ++r) CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaStreamSynchronize(stream));

  FILE* f = std::fopen(argv[1], "w");
  if (!f) return 1;
  std::fprintf(f,
               "{\"sms\": %d, \"reshape_launches\": %d, \"grid3d_launches\": %d, \"other_launches\": %d,"
               " \"graph_replays\": %d, \"graph_target_tokens\": 1000, \"reshape_grids\": [",
               prop.multiProcessorCount, reshape_launches, grid3d_launches, other_launches, replays);
  for (size_t i = 0; i < reshape_grids.size(); ++i) std::fprintf(f, "%s%d", i ? ", " : "", reshape_grids[i]);
  std::fprintf(f, "], \"grid3d\": [%u, %u, %u]}\n", g3.x, g3.y, g3.z);
  std::fclose(f);
  std::printf("blocks_workload: %d steps, %d target launches, %d graph replays on %s (%d SMs)\n", steps,
              reshape_launches, replays, prop.name, prop.multiProcessorCount);
  return 0;
}
