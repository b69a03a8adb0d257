// Continuous batching and the paged KV-cache allocator (batcher.h).
#include "server/batcher.h"

#include <algorithm>
#include <unordered_set>

namespace twinscope::demo {

Batcher::Batcher(BatcherOptions options) : opt_(std::move(options)) {
  std::sort(opt_.graph_sizes.begin(), opt_.graph_sizes.end());
  free_.reserve(static_cast<size_t>(std::max<int64_t>(opt_.num_blocks, 0)));
  for (int64_t b = opt_.num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

int Batcher::BlocksFor(int prompt_tokens, int max_tokens) const {
  const int64_t tokens = int64_t(prompt_tokens) + max_tokens;
  return static_cast<int>((tokens + opt_.block_size - 1) / opt_.block_size);
}

std::string Batcher::WhyNotFits(int prompt_tokens, int max_tokens) const {
  const int64_t total = int64_t(prompt_tokens) + max_tokens;
  if (total > opt_.max_model_len) {
    return "this model's maximum context length is " + std::to_string(opt_.max_model_len) + " tokens, but " +
           std::to_string(total) + " were requested (" + std::to_string(prompt_tokens) + " in the messages, " +
           std::to_string(max_tokens) + " in the completion); reduce the messages or max_tokens";
  }
  if (prompt_tokens > opt_.max_step_tokens) {
    return "the prompt has " + std::to_string(prompt_tokens) + " tokens, more than one prefill step takes (" +
           std::to_string(opt_.max_step_tokens) + ", --max-prefill-tokens)";
  }
  if (BlocksFor(prompt_tokens, max_tokens) > opt_.num_blocks) {
    return "the request needs " + std::to_string(BlocksFor(prompt_tokens, max_tokens)) +
           " KV-cache blocks but the pool has " + std::to_string(opt_.num_blocks) + " (raise --gpu-memory-fraction)";
  }
  return "";
}

int Batcher::PaddedDecodeBatch(int n) const {
  for (int g : opt_.graph_sizes) {
    if (g >= n) return g;
  }
  return n;
}

Status Batcher::Enqueue(SeqRequest r) {
  if (r.prompt.empty() || r.max_tokens < 1) return Status::Error("a request needs a prompt and max_tokens >= 1");
  if (seqs_.count(r.id)) return Status::Error("request id '" + r.id + "' is already in flight");
  std::string why = WhyNotFits(static_cast<int>(r.prompt.size()), r.max_tokens);
  if (!why.empty()) return Status::Error(why);
  std::string id = r.id;
  Seq s;
  s.req = std::move(r);
  seqs_.emplace(id, std::move(s));
  waiting_.push_back(std::move(id));
  return Status::Ok();
}

bool Batcher::Abort(const std::string& id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return false;
  if (!it->second.running) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), id));
    seqs_.erase(it);
    return true;
  }
  Release(id);
  pending_aborts_.push_back(id);
  return true;
}

void Batcher::Admit(Seq& s) {
  const int n = BlocksFor(static_cast<int>(s.req.prompt.size()), s.req.max_tokens);
  s.blocks.assign(free_.end() - n, free_.end());
  std::reverse(s.blocks.begin(), s.blocks.end());
  free_.resize(free_.size() - n);
  s.running = true;
  s.generated = 0;
  running_.push_back(s.req.id);
}

void Batcher::Release(const std::string& id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  // Back in reverse, so the next admission gets the same blocks in the same order.
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b) free_.push_back(*b);
  running_.erase(std::remove(running_.begin(), running_.end(), id), running_.end());
  seqs_.erase(it);
}

std::optional<ScheduledStep> Batcher::Plan(uint64_t index) {
  ScheduledStep step;
  step.index = index;
  int step_tokens = 0;
  int64_t free_blocks = static_cast<int64_t>(free_.size());
  size_t admit = 0;
  while (admit < waiting_.size() && running_.size() + admit < static_cast<size_t>(opt_.max_batch)) {
    const Seq& s = seqs_.at(waiting_[admit]);
    const int p = static_cast<int>(s.req.prompt.size());
    const int need = BlocksFor(p, s.req.max_tokens);
    if (step_tokens + p > opt_.max_step_tokens || need > free_blocks) break;  // first come, first served
    step_tokens += p;
    free_blocks -= need;
    ++admit;
  }
  if (admit > 0) {
    step.kind = StepKind::kPrefill;
    for (size_t i = 0; i < admit; ++i) {
      Seq& s = seqs_.at(waiting_.front());
      Admit(s);
      step.batch.push_back({s.req.id, static_cast<int>(s.req.prompt.size()), s.req.max_tokens, s.req.sample_seed});
      waiting_.pop_front();
    }
    step.padded = step_tokens;
  } else if (!running_.empty()) {
    step.kind = StepKind::kDecode;
    for (const auto& id : running_) step.batch.push_back({id, 1, 0, 0});
    step.padded = PaddedDecodeBatch(static_cast<int>(running_.size()));
  } else {
    return std::nullopt;  // pending aborts are listed in the next step that runs
  }
  step.aborted = std::move(pending_aborts_);
  pending_aborts_.clear();
  step.name = StepName(step.kind, step.index, step.batch);
  return step;
}

Status Batcher::Follow(const ScheduledStep& step, std::vector<SeqRequest> admitted) {
  const std::string at = "step " + std::to_string(step.index) + ": ";
  if (step.name != StepName(step.kind, step.index, step.batch)) {
    return Status::Error(at + "its name '" + step.name + "' does not match its batch");
  }
  if (step.batch.size() > static_cast<size_t>(opt_.max_batch)) {
    return Status::Error(at + std::to_string(step.batch.size()) + " sequences, but this server runs at most " +
                         std::to_string(opt_.max_batch) + " (start it with the primary's --max-batch)");
  }
  for (const auto& id : step.aborted) {
    if (!IsRunning(id)) return Status::Error(at + "aborts '" + id + "', which is not running here");
  }
  std::unordered_set<std::string> seen;
  for (const auto& e : step.batch) {
    if (!seen.insert(e.id).second) return Status::Error(at + "'" + e.id + "' is in the batch twice");
  }
  if (step.kind == StepKind::kDecode) {
    for (const auto& e : step.batch) {
      if (e.tokens != 1) return Status::Error(at + "a decode entry with " + std::to_string(e.tokens) + " tokens");
      if (!IsRunning(e.id) || std::find(step.aborted.begin(), step.aborted.end(), e.id) != step.aborted.end()) {
        return Status::Error(at + "decodes '" + e.id + "', which is not running here");
      }
    }
    if (step.padded < static_cast<int>(step.batch.size())) {
      return Status::Error(at + "padded batch " + std::to_string(step.padded) + " is smaller than the batch");
    }
  } else {
    if (admitted.size() != step.batch.size()) return Status::Error(at + "internal: admissions do not match the batch");
    int tokens = 0;
    int need = 0;
    for (size_t i = 0; i < step.batch.size(); ++i) {
      const auto& e = step.batch[i];
      if (seqs_.count(e.id)) return Status::Error(at + "prefills '" + e.id + "', which is already running here");
      if (admitted[i].id != e.id || static_cast<int>(admitted[i].prompt.size()) != e.tokens ||
          admitted[i].max_tokens != e.max_tokens || admitted[i].sample_seed != e.seed) {
        return Status::Error(at + "internal: admission of '" + e.id + "' does not match its entry");
      }
      if (e.tokens + int64_t(e.max_tokens) > opt_.max_model_len) {
        return Status::Error(at + "'" + e.id + "' needs " + std::to_string(e.tokens + int64_t(e.max_tokens)) +
                             " tokens, more than --max-model-len " + std::to_string(opt_.max_model_len) +
                             " here (start the follower with the primary's --max-model-len)");
      }
      tokens += e.tokens;
      need += BlocksFor(e.tokens, e.max_tokens);
    }
    if (step.padded != tokens) return Status::Error(at + "a prefill step's padded size must be its token count");
    if (tokens > opt_.max_step_tokens) {
      return Status::Error(at + std::to_string(tokens) + " prompt tokens, more than --max-prefill-tokens " +
                           std::to_string(opt_.max_step_tokens) + " here (start the follower with the primary's)");
    }
    int64_t free_after_aborts = static_cast<int64_t>(free_.size());
    for (const auto& id : step.aborted) free_after_aborts += static_cast<int64_t>(seqs_.at(id).blocks.size());
    if (need > free_after_aborts) {
      return Status::Error(at + "needs " + std::to_string(need) + " KV-cache blocks, " +
                           std::to_string(free_after_aborts) +
                           " are free here (give the follower a larger --gpu-memory-fraction)");
    }
  }
  for (const auto& id : step.aborted) Release(id);
  if (step.kind == StepKind::kPrefill) {
    for (auto& r : admitted) {
      std::string id = r.id;
      Seq fresh;
      fresh.req = std::move(r);
      Admit(seqs_.emplace(id, std::move(fresh)).first->second);
    }
  }
  return Status::Ok();
}

EngineStep Batcher::Build(const ScheduledStep& step) const {
  EngineStep es;
  es.index = step.index;
  es.kind = step.kind;
  es.padded = step.padded;
  es.name = step.name;
  es.seqs.reserve(step.batch.size());
  const int bs = opt_.block_size;
  for (const auto& e : step.batch) {
    const Seq& s = seqs_.at(e.id);
    EngineSeq q;
    const int p = static_cast<int>(s.req.prompt.size());
    if (step.kind == StepKind::kPrefill) {
      q.input_ids = s.req.prompt;
      q.first_position = 0;
    } else {
      q.input_ids = {s.last_token};
      q.first_position = p + s.generated - 1;
    }
    for (size_t i = 0; i < q.input_ids.size(); ++i) {
      const int pos = q.first_position + static_cast<int>(i);
      q.slots.push_back(int64_t(s.blocks[pos / bs]) * bs + pos % bs);
    }
    q.block_table = s.blocks;
    q.context_len = q.first_position + static_cast<int>(q.input_ids.size());
    q.sample_seed = s.req.sample_seed;
    q.sample_index = s.generated;
    es.seqs.push_back(std::move(q));
  }
  return es;
}

std::vector<std::string> Batcher::Complete(const ScheduledStep& step, const std::vector<int32_t>& tokens) {
  std::vector<std::string> finished;
  for (size_t i = 0; i < step.batch.size() && i < tokens.size(); ++i) {
    auto it = seqs_.find(step.batch[i].id);
    if (it == seqs_.end()) continue;
    Seq& s = it->second;
    s.last_token = tokens[i];
    if (++s.generated >= s.req.max_tokens) finished.push_back(s.req.id);
  }
  for (const auto& id : finished) Release(id);
  return finished;
}

bool Batcher::IsRunning(const std::string& id) const {
  auto it = seqs_.find(id);
  return it != seqs_.end() && it->second.running;
}

int Batcher::Generated(const std::string& id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? -1 : it->second.generated;
}

}  // namespace twinscope::demo
