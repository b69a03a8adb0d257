// Continuous batching for the demo server, vLLM-style, CUDA-free: requests
// wait in FIFO order; each step either prefills newly admitted requests
// (eager, all their prompt tokens) or decodes one token for every running
// request (a CUDA graph on the GPU, its batch padded to the next captured
// size). The KV cache is paged: a request is admitted only when blocks for
// its whole prompt + max_tokens are free, so nothing is ever preempted.
//
// Two ways to get a step: Plan() decides it (a primary), Follow() takes a
// primary's step from its schedule and checks that it fits the state here (a
// follower). Either way Build() gives the engine its input and Complete()
// applies the sampled tokens. Blocks are handed out deterministically, so a
// follower with the same pool size gets the same slots as its primary.
// Not thread-safe: the serving loop owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "common/engine.h"
#include "server/schedule.h"

namespace twinscope::demo {

struct BatcherOptions {
  int max_batch = 64;            // sequences per step
  int max_step_tokens = 8192;    // prompt tokens per prefill step
  int block_size = 16;           // tokens per KV-cache block
  int64_t num_blocks = 0;        // the pool
  int max_model_len = 4096;      // prompt + output tokens of one sequence
  std::vector<int> graph_sizes;  // ascending; decode batches are padded to the smallest that holds them
};

struct SeqRequest {
  std::string id;
  std::vector<int32_t> prompt;  // token ids, at least one
  int max_tokens = 0;           // output tokens to generate (all of them: no end-of-sequence token)
  uint64_t sample_seed = 0;
};

class Batcher {
 public:
  explicit Batcher(BatcherOptions options);

  const BatcherOptions& options() const { return opt_; }
  // Why a request of this size can never run here (empty when it can).
  std::string WhyNotFits(int prompt_tokens, int max_tokens) const;
  // The padded batch size of a decode step of `n` sequences.
  int PaddedDecodeBatch(int n) const;

  // ---- A primary's own scheduling ----
  // Queues a request. Errors: duplicate id, or it can never fit.
  Status Enqueue(SeqRequest r);
  // Drops a waiting request at once, or releases a running one before the
  // next step (listed in that step's `aborted`). False if the id is unknown.
  bool Abort(const std::string& id);
  // The next step, or none when there is nothing to run. Fills everything but
  // `finished` and the times.
  std::optional<ScheduledStep> Plan(uint64_t index);

  // ---- A follower ----
  // Checks a primary's step against the state here and applies its
  // admissions and aborts; `admitted` holds one request per prefill entry, in
  // batch order (their sizes must match the entries). An error means the
  // follower cannot run the step (the schedule does not fit the state here).
  Status Follow(const ScheduledStep& step, std::vector<SeqRequest> admitted);

  // ---- Both ----
  EngineStep Build(const ScheduledStep& step) const;
  // Applies one sampled token per batch entry; returns the ids that reached
  // max_tokens (released now), in batch order.
  std::vector<std::string> Complete(const ScheduledStep& step, const std::vector<int32_t>& tokens);

  size_t waiting() const { return waiting_.size(); }
  size_t running() const { return running_.size(); }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  bool IsRunning(const std::string& id) const;
  // Output tokens generated so far for a running sequence (-1 if unknown).
  int Generated(const std::string& id) const;

 private:
  struct Seq {
    SeqRequest req;
    std::vector<int32_t> blocks;
    int generated = 0;
    int32_t last_token = 0;
    bool running = false;
  };
  int BlocksFor(int prompt_tokens, int max_tokens) const;
  void Admit(Seq& s);
  void Release(const std::string& id);

  BatcherOptions opt_;
  std::unordered_map<std::string, Seq> seqs_;  // waiting and running
  std::deque<std::string> waiting_;
  std::vector<std::string> running_;         // admission order
  std::vector<std::string> pending_aborts_;  // released, not yet listed in a step
  std::vector<int32_t> free_;                // a stack: back() is handed out next
};

}  // namespace twinscope::demo
