// The seam between the demo server's CUDA-free part (HTTP, batching,
// schedule) and what runs a step: the GPU engine (demo/gpu) or the CPU engine
// used by tests and GPU-less runs (demo/server/cpu_engine.h). The batcher
// decides every step and hands the engine all it needs to run it: which
// tokens go in at which positions, where their K/V go in the paged cache
// (slots), each sequence's block table, and how to draw each sequence's next
// token. Engines are called from one thread (the serving loop).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "common/model.h"

namespace twinscope::demo {

enum class StepKind { kPrefill, kDecode };
inline const char* StepKindName(StepKind k) { return k == StepKind::kPrefill ? "prefill" : "decode"; }

// One sequence's part of a step.
struct EngineSeq {
  std::vector<int32_t> input_ids;    // tokens fed this step (the prompt on prefill, the last output on decode)
  int32_t first_position = 0;        // position of input_ids[0]
  std::vector<int64_t> slots;        // KV-cache slot of each input token: block * block_size + offset
  std::vector<int32_t> block_table;  // the sequence's cache blocks, in order
  int32_t context_len = 0;           // tokens in the cache after this step (first_position + input_ids.size())
  uint64_t sample_seed = 0;          // the next token is SampleToken(sample_seed, sample_index, vocab)
  int32_t sample_index = 0;
};

struct EngineStep {
  uint64_t index = 0;
  StepKind kind = StepKind::kDecode;
  // Decode: the batch size the step runs at (a captured graph's size; rows
  // past seqs.size() are padding, their cache slots negative). Prefill: the
  // number of prompt tokens (no padding).
  int padded = 0;
  std::string name;  // the NVTX range the step runs in (schedule.h StepName)
  std::vector<EngineSeq> seqs;
};

struct EngineInfo {
  ModelShape model;
  std::string kind;              // "gpu" or "cpu"
  std::string device;            // e.g. "NVIDIA H200 (device 0)"
  int block_size = 16;           // tokens per KV-cache block
  int64_t num_blocks = 0;        // KV-cache pool
  int max_batch = 0;             // most sequences in one step
  int max_step_tokens = 0;       // most tokens in one prefill step
  int max_model_len = 0;         // longest sequence (prompt + output)
  std::vector<int> graph_sizes;  // decode batch sizes with a captured graph, ascending (empty: eager only)
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const EngineInfo& info() const = 0;
  // Runs one step; `tokens` gets one sampled token per step.seqs entry. An
  // error is fatal for the server (the GPU state is unknown).
  virtual Status Run(const EngineStep& step, std::vector<int32_t>* tokens) = 0;
};

// vLLM's CUDA-graph capture sizes up to `max_batch`: 1, 2, 4, then multiples
// of 8, and max_batch itself.
inline std::vector<int> DefaultGraphSizes(int max_batch) {
  std::vector<int> sizes;
  for (int s : {1, 2, 4}) {
    if (s <= max_batch) sizes.push_back(s);
  }
  for (int s = 8; s <= max_batch; s += 8) sizes.push_back(s);
  if (sizes.empty() || sizes.back() != max_batch) sizes.push_back(max_batch);
  return sizes;
}

}  // namespace twinscope::demo
