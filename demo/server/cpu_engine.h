// An engine without a GPU (`--engine cpu`, and the tests' fake engine): it
// draws the same tokens as the GPU sampling kernel (common/sampling.h), takes
// `step_time` per step, and checks what the batcher hands it as the GPU
// kernels would use it: every slot inside the pool, no two tokens of a step
// on one slot, and every cache position a step attends to written earlier by
// the same sequence (so allocator bugs fail loudly in CI). Runs no kernels.
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "common/engine.h"

namespace twinscope::demo {

struct CpuEngineOptions {
  ModelShape model;
  int block_size = 16;
  int64_t num_blocks = 4096;
  int max_batch = 64;
  int max_step_tokens = 8192;
  int max_model_len = 4096;
  std::vector<int> graph_sizes;  // the sizes a GPU engine would capture (reported, used for padding)
  std::chrono::microseconds step_time{0};
};

class CpuEngine : public Engine {
 public:
  explicit CpuEngine(CpuEngineOptions options);
  const EngineInfo& info() const override { return info_; }
  Status Run(const EngineStep& step, std::vector<int32_t>* tokens) override;

  // Tests: called with every step before it runs (on the serving loop's thread).
  std::function<void(const EngineStep&)> on_step;
  // Tests: Run fails at this step index (-1: never).
  int64_t fail_at_step = -1;

 private:
  EngineInfo info_;
  std::chrono::microseconds step_time_;
  std::vector<uint64_t> cache_;  // per slot: a tag of (sample seed, position) last written there, 0 = never
};

}  // namespace twinscope::demo
