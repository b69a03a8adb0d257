// The serving loop (serving.h).
#include "server/serving.h"

#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/iso_time.h"
#include "server/text.h"

namespace twinscope::demo {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
using Out = nlohmann::ordered_json;  // trace lines keep their fields in a readable order

constexpr size_t kFollowedKeep = 1024;  // finished followed sequences kept for requests that arrive late

BatcherOptions BatcherOptionsFrom(const EngineInfo& e) {
  BatcherOptions b;
  b.max_batch = e.max_batch;
  b.max_step_tokens = e.max_step_tokens;
  b.block_size = e.block_size;
  b.num_blocks = e.num_blocks;
  b.max_model_len = e.max_model_len;
  b.graph_sizes = e.graph_sizes;
  return b;
}

void Log(const char* fmt, const std::string& a, const std::string& b = "") {
  std::fprintf(stderr, fmt, a.c_str(), b.c_str());
  std::fflush(stderr);
}

}  // namespace

std::string IsoTimeNow() { return IsoTimeUtcNow(); }

int64_t UnixMicrosNow() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ---- Sequence -------------------------------------------------------------------

Sequence::View Sequence::Read(size_t from) const {
  std::lock_guard<std::mutex> lock(mu_);
  View v;
  if (from < tokens_.size()) v.tokens.assign(tokens_.begin() + static_cast<ptrdiff_t>(from), tokens_.end());
  v.done = done_;
  v.finish_reason = finish_reason_;
  v.error_status = error_status_;
  v.error = error_;
  return v;
}

size_t Sequence::generated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_.size();
}

void Sequence::SetWaker(std::function<void()> waker) {
  std::lock_guard<std::mutex> lock(mu_);
  waker_ = std::move(waker);
}

void Sequence::Wake() {
  std::function<void()> w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    w = waker_;
  }
  if (w) w();
}

void Sequence::Append(int32_t token) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    tokens_.push_back(token);
  }
  Wake();
}

void Sequence::Finish(std::string reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    finish_reason_ = std::move(reason);
  }
  Wake();
}

void Sequence::Fail(int status, std::string message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    finish_reason_ = "error";
    error_status_ = status;
    error_ = std::move(message);
  }
  Wake();
}

// ---- ServingCore ----------------------------------------------------------------

ServingCore::ServingCore(ServingOptions options, Engine& engine)
    : opt_(std::move(options)),
      engine_(engine),
      batcher_(BatcherOptionsFrom(engine.info())),
      schedule_(opt_.schedule_keep),
      start_(Clock::now()) {}

ServingCore::~ServingCore() {
  StopNow();
  Wait();
  if (trace_) std::fclose(trace_);
}

Status ServingCore::Start() {
  start_ = Clock::now();
  if (!opt_.schedule_out.empty()) {
    Status s = schedule_.OpenFile(opt_.schedule_out);
    if (!s.ok()) return s;
  }
  if (!opt_.trace_requests.empty()) {
    trace_ = std::fopen(opt_.trace_requests.c_str(), "w");
    if (!trace_) {
      return Status::Error("cannot write the request trace to " + opt_.trace_requests + ": " + std::strerror(errno));
    }
    trace_path_ = opt_.trace_requests;
  }
  const EngineInfo& e = engine_.info();
  ScheduleHeader h;
  h.model = e.model;
  h.engine = e.kind;
  h.block_size = e.block_size;
  h.max_batch = e.max_batch;
  h.graph_sizes = e.graph_sizes;
  h.started = IsoTimeNow();
  schedule_.SetHeader(FormatHeader(h));
  free_blocks_ = batcher_.free_blocks();
  if (opt_.follow) opt_.follow->SetNotify([this] { Notify(); });
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

int64_t ServingCore::NowUs() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_).count();
}

void ServingCore::Notify() {
  std::lock_guard<std::mutex> lock(mu_);
  ++wake_gen_;
  cv_.notify_all();
}

int ServingCore::MaxTokens(std::optional<int> requested) const {
  return requested ? *requested : opt_.default_max_tokens;
}

std::string ServingCore::WhyNotFits(int prompt_tokens, int max_tokens) const {
  return batcher_.WhyNotFits(prompt_tokens, max_tokens);
}

SubmitResult ServingCore::Submit(SubmitRequest r) {
  auto error = [](int status, std::string message) {
    SubmitResult res;
    res.status = status;
    res.error = std::move(message);
    return res;
  };
  std::string why = batcher_.WhyNotFits(static_cast<int>(r.prompt.size()), r.max_tokens);  // options only: no lock
  if (!why.empty()) return error(400, why);
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_ || stop_now_ || draining_) return error(503, "the server is shutting down");
  if (engine_failed_) return error(503, "the engine failed: " + engine_error_);
  auto seq = std::make_shared<Sequence>(r.id, static_cast<int>(r.prompt.size()), r.max_tokens, r.sample_seed);
  seq->id_generated_ = r.id_generated;
  seq->arrival_unix_us_ = UnixMicrosNow();
  seq->arrival_us_ = NowUs();
  if (opt_.follow) {
    if (r.id_generated) {
      return error(400,
                   "this server follows a schedule: every request needs the primary's X-Request-Id "
                   "(send requests through twinscope mirror)");
    }
    if (follow_ended_) return error(503, "the followed schedule has ended; send requests to the primary");
    if (auto it = followed_.find(r.id); it != followed_.end()) {
      // The schedule got here first: this request reads what its sequence has produced.
      const auto& s = it->second;
      if (s->prompt_tokens != seq->prompt_tokens || s->max_tokens != r.max_tokens || s->sample_seed != r.sample_seed) {
        ++mismatched_;
      }
      ++attached_;
      ++requests_;
      return {s, 200, ""};
    }
    if (pending_local_.count(r.id)) return error(409, "request id '" + r.id + "' is already in flight");
    ++requests_;
    std::string id = r.id;
    pending_local_.emplace(std::move(id), PendingLocal{seq, std::move(r)});
  } else {
    if (inflight_ids_.count(r.id)) return error(409, "request id '" + r.id + "' is already in flight");
    inflight_ids_.insert(r.id);
    ++requests_;
    inbox_.push_back({seq, std::move(r), false});
  }
  ++wake_gen_;
  cv_.notify_all();
  return {seq, 200, ""};
}

void ServingCore::Cancel(const std::shared_ptr<Sequence>& seq) {
  if (!seq || opt_.follow) return;  // a follower runs what the schedule says
  std::lock_guard<std::mutex> lock(mu_);
  inbox_.push_back({seq, {}, true});
  ++wake_gen_;
  cv_.notify_all();
}

void ServingCore::TraceRejected(const std::string& id, bool id_generated, int status, const std::string& error) {
  if (!trace_) return;
  Out j = {{"id", id},       {"id_generated", id_generated},       {"status", status},
           {"error", error}, {"arrival_unix_us", UnixMicrosNow()}, {"steps", Out::array()}};
  std::string line = j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  if (std::fputs(line.c_str(), trace_) < 0 || std::fflush(trace_) != 0) ++trace_errors_;
}

void ServingCore::TraceLine(const Sequence& s, const std::string& finish_reason, int status, const std::string& error) {
  if (!trace_) return;
  const int64_t now = NowUs();
  auto rel = [&](int64_t t) -> Out { return t < 0 ? Out(nullptr) : Out(t - s.arrival_us_); };
  Out steps = Out::array();
  for (uint64_t st : s.steps_) steps.push_back(st);
  Out j = {{"id", s.id},
           {"id_generated", s.id_generated_},
           {"status", status},
           {"finish_reason", finish_reason},
           {"prompt_tokens", s.prompt_tokens},
           {"max_tokens", s.max_tokens},
           {"completion_tokens", s.generated()},
           {"seed", s.sample_seed},
           {"arrival_unix_us", s.arrival_unix_us_},
           {"queued_us", rel(s.first_step_us_)},
           {"first_token_us", rel(s.first_token_us_)},
           {"done_us", now - s.arrival_us_},
           {"prefill_step", s.steps_.empty() ? Out(nullptr) : Out(s.steps_.front())},
           {"steps", std::move(steps)}};
  if (opt_.follow) j["synthesized"] = s.synthesized_;
  if (!error.empty()) j["error"] = error;
  std::string line = j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  if (std::fputs(line.c_str(), trace_) < 0 || std::fflush(trace_) != 0) {
    if (trace_errors_++ == 0) Log("twinscope-demo-server: writing the request trace to %s failed%s\n", trace_path_);
  }
}

Json ServingCore::Health() const {
  const EngineInfo& e = engine_.info();
  bool draining, ended;
  std::string follow_error, engine_error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining = draining_ || stop_now_;
    ended = follow_ended_;
    follow_error = follow_error_;
    engine_error = engine_error_;
  }
  std::string status = engine_failed_ ? "failed" : stopped_ ? "stopped" : draining ? "draining" : "ok";
  Json j = {{"status", status},
            {"role", opt_.follow ? "follower" : "primary"},
            {"engine", e.kind},
            {"device", e.device},
            {"model", opt_.served_model},
            {"model_shape", e.model.ToJson()},
            {"steps", steps_.load()},
            {"prefill_steps", prefill_steps_.load()},
            {"decode_steps", decode_steps_.load()},
            {"tokens", tokens_out_.load()},
            {"running", running_.load()},
            {"waiting", waiting_.load()},
            {"kv_blocks", {{"total", e.num_blocks}, {"free", free_blocks_.load()}, {"block_size", e.block_size}}},
            {"requests",
             {{"received", requests_.load()},
              {"finished", finished_.load()},
              {"aborted", aborted_.load()},
              {"failed", failed_.load()}}},
            {"schedule",
             {{"steps", schedule_.steps()}, {"file", opt_.schedule_out}, {"file_errors", schedule_.file_errors()}}}};
  if (!engine_error.empty()) j["error"] = engine_error;
  if (opt_.follow) {
    Json f = {{"source", opt_.follow->source},
              {"synthesized", synthesized_.load()},
              {"attached", attached_.load()},
              {"mismatched", mismatched_.load()},
              {"ended", ended}};
    if (!follow_error.empty()) f["error"] = follow_error;
    j["follow"] = f;
  }
  return j;
}

bool ServingCore::healthy() const { return !engine_failed_ && !stopped_; }

void ServingCore::Drain() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!draining_) {
    draining_ = true;
    drain_deadline_ = Clock::now() + opt_.drain_timeout;
  }
  ++wake_gen_;
  cv_.notify_all();
}

void ServingCore::StopNow() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_now_ = true;
  ++wake_gen_;
  cv_.notify_all();
}

void ServingCore::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stopped_.load() || !thread_.joinable(); });
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) {
    std::thread t = std::move(thread_);
    lock.unlock();
    t.join();
  }
}

void ServingCore::SetOnStopped(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  on_stopped_ = std::move(fn);
}

void ServingCore::Loop() {
  std::string reason;
  try {
    LoopBody();
  } catch (const std::exception& e) {
    engine_failed_ = true;
    exit_code_ = 1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      engine_error_ = std::string("internal error: ") + e.what();
    }
    Log("twinscope-demo-server: internal error in the serving loop: %s%s (stopping)\n", e.what());
    FailAll(500, std::string("internal error: ") + e.what());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    reason = engine_failed_           ? "engine error: " + engine_error_
             : !follow_error_.empty() ? "follow error: " + follow_error_
             : follow_ended_          ? "schedule ended"
             : stop_now_              ? "stopped"
                                      : "shutdown";
  }
  FailAll(503, "the server stopped before this request finished");
  schedule_.End(FormatEnd({next_step_, reason}));
  std::function<void()> on_stopped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (trace_) std::fflush(trace_);
    stopped_ = true;
    on_stopped = on_stopped_;
    cv_.notify_all();
  }
  if (on_stopped) on_stopped();
}

void ServingCore::LoopBody() {
  for (;;) {
    std::vector<InboxItem> items;
    uint64_t gen;
    bool draining, stop_now;
    Clock::time_point drain_deadline;
    {
      std::lock_guard<std::mutex> lock(mu_);
      items.swap(inbox_);
      gen = wake_gen_;
      draining = draining_;
      stop_now = stop_now_;
      drain_deadline = drain_deadline_;
    }
    if (stop_now) return;
    for (auto& it : items) {
      if (it.cancel) {
        if (live_.count(it.seq->id) && batcher_.Abort(it.seq->id)) FinishSeq(live_.at(it.seq->id), "abort");
        continue;
      }
      const std::string id = it.seq->id;
      Status s = batcher_.Enqueue({id, std::move(it.req.prompt), it.req.max_tokens, it.req.sample_seed});
      if (!s.ok()) {
        it.seq->Fail(400, s.message());
        TraceLine(*it.seq, "error", 400, s.message());
        ++failed_;
        std::lock_guard<std::mutex> lock(mu_);
        inflight_ids_.erase(id);
        continue;
      }
      live_[id] = it.seq;
    }

    std::optional<ScheduledStep> step;
    Clock::time_point wait_until = Clock::time_point::max();
    if (following()) {
      if (draining) return;  // a follower stops after its current step
      step = NextFollowedStep(&wait_until);
      bool ended;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ended = follow_ended_;
      }
      if (!step && ended && opt_.exit_after_schedule) return;
    } else {
      if (draining && Clock::now() >= drain_deadline) {
        Log("twinscope-demo-server: %s%s\n", "drain timeout: cutting the requests still in flight");
        return;
      }
      step = batcher_.Plan(next_step_);
      if (!step && draining && batcher_.waiting() == 0 && batcher_.running() == 0) return;
      if (draining) wait_until = drain_deadline;
    }
    running_ = static_cast<int64_t>(batcher_.running());
    waiting_ = static_cast<int64_t>(batcher_.waiting());
    free_blocks_ = batcher_.free_blocks();
    if (step) {
      if (!RunStep(*step, following())) return;
      running_ = static_cast<int64_t>(batcher_.running());
      free_blocks_ = batcher_.free_blocks();
      continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    auto changed = [&] { return wake_gen_ != gen; };
    if (wait_until == Clock::time_point::max()) {
      cv_.wait(lock, changed);
    } else {
      cv_.wait_until(lock, wait_until, changed);
    }
  }
}

bool ServingCore::RunStep(ScheduledStep& step, bool following) {
  EngineStep es = batcher_.Build(step);
  const int64_t t0 = NowUs();
  for (const auto& e : step.batch) {
    auto& seq = live_.at(e.id);
    if (seq->first_step_us_ < 0) seq->first_step_us_ = t0;
  }
  std::vector<int32_t> tokens;
  Status st;
  try {
    st = engine_.Run(es, &tokens);
  } catch (const std::exception& e) {
    st = Status::Error(std::string("exception: ") + e.what());
  }
  if (st.ok() && tokens.size() != step.batch.size()) {
    st = Status::Error("the engine returned " + std::to_string(tokens.size()) + " tokens for " +
                       std::to_string(step.batch.size()) + " sequences");
  }
  if (!st.ok()) {
    Log("twinscope-demo-server: the engine failed at %s: %s; no more steps run\n", step.name.substr(0, 200),
        st.message());
    {
      std::lock_guard<std::mutex> lock(mu_);
      engine_error_ = st.message();
    }
    engine_failed_ = true;
    exit_code_ = 1;
    FailAll(500, "the engine failed: " + st.message());
    return false;
  }
  const int64_t t1 = NowUs();
  std::vector<std::string> finished = batcher_.Complete(step, tokens);
  std::string diverged;
  if (following) {
    if (finished != step.finished) {
      diverged = "step " + std::to_string(step.index) + ": the primary finished " +
                 std::to_string(step.finished.size()) + " sequences, this server " + std::to_string(finished.size());
    }
  }
  step.finished = finished;
  step.start_us = t0;
  step.dur_us = t1 - t0;
  for (size_t i = 0; i < step.batch.size(); ++i) {
    auto& seq = live_.at(step.batch[i].id);
    seq->steps_.push_back(step.index);
    if (seq->first_token_us_ < 0) seq->first_token_us_ = t1;
    seq->Append(tokens[i]);
  }
  tokens_out_ += tokens.size();
  ++steps_;
  ++(step.kind == StepKind::kPrefill ? prefill_steps_ : decode_steps_);
  schedule_.Append(step.index, FormatStep(step));
  next_step_ = step.index + 1;
  for (const auto& id : finished) FinishSeq(live_.at(id), "length");
  if (!diverged.empty()) EndFollowing(Status::Error(diverged));
  return true;
}

void ServingCore::FinishSeq(const std::shared_ptr<Sequence>& seq_in, const std::string& reason) {
  std::shared_ptr<Sequence> seq = seq_in;  // the map entry goes below
  seq->Finish(reason);
  TraceLine(*seq, reason, 200, "");
  ++(reason == "length" ? finished_ : aborted_);
  live_.erase(seq->id);
  std::lock_guard<std::mutex> lock(mu_);
  inflight_ids_.erase(seq->id);
  if (opt_.follow) {
    followed_done_.push_back(seq->id);
    while (followed_done_.size() > kFollowedKeep) {
      followed_.erase(followed_done_.front());
      followed_done_.pop_front();
    }
  }
}

void ServingCore::FailAll(int status, const std::string& message) {
  std::vector<std::shared_ptr<Sequence>> all;
  for (auto& [id, seq] : live_) all.push_back(seq);
  live_.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, p] : pending_local_) all.push_back(p.seq);
    pending_local_.clear();
    for (auto& it : inbox_) {
      if (!it.cancel) all.push_back(it.seq);
    }
    inbox_.clear();
    inflight_ids_.clear();
  }
  for (auto& seq : all) {
    if (seq->Read(SIZE_MAX).done) continue;
    seq->Fail(status, message);
    TraceLine(*seq, "error", status, message);
    ++failed_;
  }
}

std::optional<ScheduledStep> ServingCore::NextFollowedStep(Clock::time_point* wait_until) {
  StepFeed& feed = *opt_.follow;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (follow_ended_) return std::nullopt;
  }
  for (;;) {
    auto line = feed.Front();
    if (!line) {
      if (feed.drained()) {
        Status why = feed.close_status();
        EndFollowing(why.ok() ? Status::Error("the schedule from " + feed.source +
                                              " ended without an end line (the primary " +
                                              "stopped before it finished, or the file is cut)")
                              : why);
      }
      return std::nullopt;
    }
    if (line->type == ScheduleLine::Type::kHeader) {
      feed.Pop();
      if (!line->header.model.SameShape(engine_.info().model)) {
        EndFollowing(Status::Error("the schedule was made with model " + line->header.model.Describe() +
                                   ", this server runs " + engine_.info().model.Describe() +
                                   ": start it with the primary's --model"));
        return std::nullopt;
      }
      continue;
    }
    if (line->type == ScheduleLine::Type::kEnd) {
      feed.Pop();
      EndFollowing(Status::Ok());
      return std::nullopt;
    }
    ScheduledStep& step = line->step;
    if (step.index != next_step_) {
      EndFollowing(Status::Error("the schedule's step " + std::to_string(step.index) + " came where step " +
                                 std::to_string(next_step_) + " was due (a follower must see every step from 0)"));
      return std::nullopt;
    }
    std::vector<SeqRequest> admitted;
    if (step.kind == StepKind::kPrefill) {
      bool missing = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& e : step.batch) missing = missing || !pending_local_.count(e.id);
      }
      if (missing) {
        const auto now = Clock::now();
        if (!front_since_) front_since_ = now;
        const auto deadline = *front_since_ + opt_.follow_wait;
        if (now < deadline) {
          *wait_until = deadline;
          return std::nullopt;
        }
      }
      const int vocab = engine_.info().model.vocab;
      for (const auto& e : step.batch) {
        std::shared_ptr<Sequence> seq;
        SeqRequest r{e.id, {}, e.max_tokens, e.seed};
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (auto it = pending_local_.find(e.id); it != pending_local_.end()) {
            seq = it->second.seq;
            const SubmitRequest& local = it->second.req;
            if (static_cast<int>(local.prompt.size()) == e.tokens && local.max_tokens == e.max_tokens &&
                local.sample_seed == e.seed) {
              r.prompt = local.prompt;
            } else {
              ++mismatched_;
            }
            pending_local_.erase(it);
          }
        }
        if (!seq) {
          seq = std::make_shared<Sequence>(e.id, e.tokens, e.max_tokens, e.seed);
          seq->synthesized_ = true;
          seq->arrival_unix_us_ = UnixMicrosNow();
          seq->arrival_us_ = NowUs();
          ++synthesized_;
        }
        if (r.prompt.empty()) r.prompt = SyntheticPrompt(e.seed, e.tokens, vocab);
        live_[e.id] = seq;
        {
          std::lock_guard<std::mutex> lock(mu_);
          followed_[e.id] = seq;
        }
        admitted.push_back(std::move(r));
      }
    }
    Status s = batcher_.Follow(step, std::move(admitted));
    if (!s.ok()) {
      EndFollowing(s);
      return std::nullopt;
    }
    for (const auto& id : step.aborted) {
      if (auto it = live_.find(id); it != live_.end()) FinishSeq(it->second, "abort");
    }
    ScheduledStep out = std::move(step);
    feed.Pop();
    front_since_.reset();
    return out;
  }
}

void ServingCore::EndFollowing(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (follow_ended_) return;
    follow_ended_ = true;
    if (!why.ok()) follow_error_ = why.message();
  }
  if (!why.ok()) {
    exit_code_ = 1;
    Log("twinscope-demo-server: cannot follow the schedule from %s: %s\n", opt_.follow->source, why.message());
  } else {
    std::fprintf(stderr, "twinscope-demo-server: the followed schedule ended after %llu steps\n",
                 static_cast<unsigned long long>(next_step_));
  }
  // Sequences the schedule never finished, and requests it never reached.
  std::vector<std::shared_ptr<Sequence>> open;
  for (auto& [id, seq] : live_) open.push_back(seq);
  for (auto& seq : open) FinishSeq(seq, "abort");
  std::vector<PendingLocal> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, p] : pending_local_) pending.push_back(p);
    pending_local_.clear();
  }
  for (auto& p : pending) {
    p.seq->Fail(503, "request id '" + p.seq->id + "' is not in the followed schedule (it has ended)");
    TraceLine(*p.seq, "error", 503, "not in the followed schedule");
    ++failed_;
  }
}

}  // namespace twinscope::demo
