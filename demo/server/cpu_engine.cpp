// The GPU-less engine (cpu_engine.h).
#include "server/cpu_engine.h"

#include <algorithm>
#include <thread>
#include <unordered_set>

#include "common/sampling.h"

namespace twinscope::demo {
namespace {

uint64_t Tag(uint64_t seed, int position) {
  return Mix64(seed * 0x100000001b3ULL + static_cast<uint64_t>(position)) | 1;
}

}  // namespace

CpuEngine::CpuEngine(CpuEngineOptions o) : step_time_(o.step_time) {
  info_.model = o.model;
  info_.kind = "cpu";
  info_.device = "cpu (no GPU work)";
  info_.block_size = o.block_size;
  info_.num_blocks = o.num_blocks;
  info_.max_batch = o.max_batch;
  info_.max_step_tokens = o.max_step_tokens;
  info_.max_model_len = o.max_model_len;
  info_.graph_sizes = o.graph_sizes;
  cache_.assign(static_cast<size_t>(o.num_blocks) * o.block_size, 0);
}

Status CpuEngine::Run(const EngineStep& step, std::vector<int32_t>* tokens) {
  if (on_step) on_step(step);
  const std::string at = "cpu engine, step " + std::to_string(step.index) + ": ";
  if (fail_at_step >= 0 && step.index == static_cast<uint64_t>(fail_at_step)) {
    return Status::Error(at + "failing on purpose (test)");
  }
  if (step.seqs.empty() || step.seqs.size() > static_cast<size_t>(info_.max_batch)) {
    return Status::Error(at + std::to_string(step.seqs.size()) + " sequences (1.." + std::to_string(info_.max_batch) +
                         " allowed)");
  }
  size_t tokens_in = 0;
  for (const auto& q : step.seqs) tokens_in += q.input_ids.size();
  if (step.kind == StepKind::kDecode &&
      (step.padded < static_cast<int>(step.seqs.size()) || tokens_in != step.seqs.size())) {
    return Status::Error(at + "a decode step needs one token per sequence and padded >= batch");
  }
  if (step.kind == StepKind::kPrefill &&
      (tokens_in != static_cast<size_t>(step.padded) || tokens_in > static_cast<size_t>(info_.max_step_tokens))) {
    return Status::Error(at + "a prefill step's token count must be its padded size and fit --max-prefill-tokens");
  }
  const int64_t slots = static_cast<int64_t>(cache_.size());
  std::unordered_set<int64_t> written;
  for (const auto& q : step.seqs) {
    if (q.slots.size() != q.input_ids.size() ||
        q.context_len != q.first_position + static_cast<int>(q.input_ids.size())) {
      return Status::Error(at + "a sequence's slots, inputs and context length disagree");
    }
    for (size_t i = 0; i < q.slots.size(); ++i) {
      const int64_t slot = q.slots[i];
      const int pos = q.first_position + static_cast<int>(i);
      if (slot < 0 || slot >= slots || !written.insert(slot).second) {
        return Status::Error(at + "slot " + std::to_string(slot) + " is outside the pool or used twice");
      }
      const size_t blk = static_cast<size_t>(pos / info_.block_size);
      if (blk >= q.block_table.size() ||
          slot != int64_t(q.block_table[blk]) * info_.block_size + pos % info_.block_size) {
        return Status::Error(at + "slot " + std::to_string(slot) + " does not match the block table");
      }
      cache_[slot] = Tag(q.sample_seed, pos);
    }
  }
  // What attention reads: every earlier position of each sequence.
  for (const auto& q : step.seqs) {
    for (int pos = 0; pos < q.context_len; ++pos) {
      const size_t blk = static_cast<size_t>(pos / info_.block_size);
      const int64_t slot =
          blk < q.block_table.size() ? int64_t(q.block_table[blk]) * info_.block_size + pos % info_.block_size : -1;
      if (slot < 0 || slot >= slots || cache_[slot] != Tag(q.sample_seed, pos)) {
        return Status::Error(at + "cache position " + std::to_string(pos) +
                             " of a sequence was never written by it, or was overwritten");
      }
    }
  }
  if (step_time_.count() > 0) std::this_thread::sleep_for(step_time_);
  tokens->clear();
  for (const auto& q : step.seqs) {
    tokens->push_back(SampleToken(q.sample_seed, static_cast<uint32_t>(q.sample_index), info_.model.vocab));
  }
  return Status::Ok();
}

}  // namespace twinscope::demo
