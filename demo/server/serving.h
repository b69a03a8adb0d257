// The demo server's serving loop: one thread that owns the batcher and the
// engine, takes requests from the HTTP handlers, runs one step after another
// and hands each request its tokens as they are sampled. It publishes every
// step it runs to the schedule (file, GET /v1/schedule) and, with
// --trace-requests, one line per request naming the steps it was in.
//
// A primary batches on its own (Batcher::Plan). A follower (ServingOptions::
// follow) runs exactly the steps of a primary's schedule instead: requests
// that arrive over HTTP (through the mirror, with the primary's X-Request-Id)
// are attached to the schedule's sequences by id; a sequence whose request
// has not arrived within `follow_wait` runs without one (synthesized from the
// schedule: a replay of a file needs no client at all).
//
// Threads: Submit, Cancel, Health, Drain, StopNow and Wait may be called from
// any thread; the loop calls the engine and Sequence writers on its own.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/engine.h"
#include "server/batcher.h"
#include "server/schedule.h"

namespace twinscope::demo {

struct ServingOptions {
  std::string served_model = "twinscope-demo";  // the model name in replies and /v1/models
  uint64_t seed = 0;                            // sample seed of requests that bring none
  int default_max_tokens = 128;                 // for requests without max_tokens
  std::string schedule_out;                     // schedule file ("" = none; GET /v1/schedule works anyway)
  size_t schedule_keep = 100000;                // steps held in memory for GET /v1/schedule
  std::string trace_requests;                   // request trace file ("" = none)
  // A follower: the primary's schedule arrives here (not owned). nullptr = a primary.
  StepFeed* follow = nullptr;
  std::chrono::milliseconds follow_wait{5000};  // a prefill waits this long for its requests to arrive
  bool exit_after_schedule = false;             // a follower stops when the schedule ends
  std::chrono::milliseconds drain_timeout{30000};
};

// One request's output, written by the serving loop and read by its HTTP
// handler. Thread-safe.
class Sequence {
 public:
  Sequence(std::string id, int prompt_tokens, int max_tokens, uint64_t sample_seed)
      : id(std::move(id)), prompt_tokens(prompt_tokens), max_tokens(max_tokens), sample_seed(sample_seed) {}
  const std::string id;
  const int prompt_tokens;
  const int max_tokens;
  const uint64_t sample_seed;

  struct View {
    std::vector<int32_t> tokens;  // from the index asked for
    bool done = false;
    std::string finish_reason;  // "length", "abort"
    int error_status = 0;       // non-zero: the request failed (HTTP status), `error` says why
    std::string error;
  };
  View Read(size_t from) const;
  size_t generated() const;
  // Called after every change, on the serving loop's thread; must not block.
  // nullptr detaches (the handler is gone).
  void SetWaker(std::function<void()> waker);

  // The serving loop's side.
  void Append(int32_t token);
  void Finish(std::string reason);
  void Fail(int status, std::string message);

 private:
  void Wake();
  mutable std::mutex mu_;
  std::vector<int32_t> tokens_;
  bool done_ = false;
  std::string finish_reason_;
  int error_status_ = 0;
  std::string error_;
  std::function<void()> waker_;

  friend class ServingCore;
  // Serving loop only: what the request trace says about it.
  std::vector<uint64_t> steps_;
  bool id_generated_ = false, synthesized_ = false;
  int64_t arrival_unix_us_ = 0;
  int64_t arrival_us_ = -1, first_step_us_ = -1, first_token_us_ = -1;
};

struct SubmitRequest {
  std::string id;
  bool id_generated = false;
  std::vector<int32_t> prompt;
  int max_tokens = 0;
  uint64_t sample_seed = 0;
};

struct SubmitResult {
  std::shared_ptr<Sequence> seq;  // null on error
  int status = 200;               // the HTTP status of the error
  std::string error;
};

class ServingCore {
 public:
  ServingCore(ServingOptions options, Engine& engine);
  ~ServingCore();  // StopNow() + Wait()
  ServingCore(const ServingCore&) = delete;
  ServingCore& operator=(const ServingCore&) = delete;

  // Opens the schedule and trace files, writes the header and starts the loop.
  Status Start();

  const EngineInfo& engine_info() const { return engine_.info(); }
  const ServingOptions& options() const { return opt_; }
  bool following() const { return opt_.follow != nullptr; }
  ScheduleLog& schedule() { return schedule_; }

  // A request's max_tokens (the default when it has none).
  int MaxTokens(std::optional<int> requested) const;
  // Why a request of this size can never run here ("" when it can).
  std::string WhyNotFits(int prompt_tokens, int max_tokens) const;

  SubmitResult Submit(SubmitRequest r);
  // The request's client went away: a primary drops it (running: before the
  // next step); a follower keeps running it as the schedule says.
  void Cancel(const std::shared_ptr<Sequence>& seq);
  // A request refused before Submit (bad JSON, too long): one trace line.
  void TraceRejected(const std::string& id, bool id_generated, int status, const std::string& error);

  nlohmann::json Health() const;
  bool healthy() const;  // false after an engine failure or once stopped

  // Stops taking requests, finishes those in flight (a primary; at most
  // drain_timeout), then stops. A follower stops after its current step.
  void Drain();
  void StopNow();
  // Blocks until the loop has stopped.
  void Wait();
  bool stopped() const { return stopped_.load(); }
  // 0 after a clean stop; 1 after an engine failure or a follower that could
  // not follow its schedule.
  int exit_code() const { return exit_code_.load(); }
  // Called once, on the loop's thread, when it stops (main stops HTTP then).
  void SetOnStopped(std::function<void()> fn);

 private:
  struct InboxItem {
    std::shared_ptr<Sequence> seq;
    SubmitRequest req;
    bool cancel = false;
  };
  struct PendingLocal {  // a follower's request that the schedule has not reached yet
    std::shared_ptr<Sequence> seq;
    SubmitRequest req;
  };

  void Loop();
  void LoopBody();
  void Notify();
  int64_t NowUs() const;
  bool RunStep(ScheduledStep& step, bool following);  // false: the engine failed
  void FinishSeq(const std::shared_ptr<Sequence>& seq, const std::string& reason);
  void FailAll(int status, const std::string& message);
  void TraceLine(const Sequence& s, const std::string& finish_reason, int status, const std::string& error);
  // Follower: takes the next feed line if it can run now. Returns a step to
  // run, or none (waiting, or the line was a header/end handled here).
  std::optional<ScheduledStep> NextFollowedStep(std::chrono::steady_clock::time_point* wait_until);
  void EndFollowing(const Status& why);

  ServingOptions opt_;
  Engine& engine_;
  Batcher batcher_;
  ScheduleLog schedule_;
  std::chrono::steady_clock::time_point start_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t wake_gen_ = 0;
  std::vector<InboxItem> inbox_;
  std::unordered_set<std::string> inflight_ids_;                 // a primary's requests, Submit to end
  std::unordered_map<std::string, PendingLocal> pending_local_;  // follower
  std::unordered_map<std::string, std::shared_ptr<Sequence>>
      followed_;                           // follower: scheduled sequences, for late attach
  std::deque<std::string> followed_done_;  // ... finished ones, oldest first (bounded)
  bool draining_ = false, stop_now_ = false;
  bool follow_ended_ = false;
  std::string follow_error_;
  std::chrono::steady_clock::time_point drain_deadline_;
  std::function<void()> on_stopped_;
  std::string trace_path_;
  std::FILE* trace_ = nullptr;
  uint64_t trace_errors_ = 0;

  // Serving loop only.
  std::unordered_map<std::string, std::shared_ptr<Sequence>> live_;  // admitted or waiting, by id
  uint64_t next_step_ = 0;
  std::optional<std::chrono::steady_clock::time_point> front_since_;  // follower: when the waiting step came up

  // Counters for Health (written by the loop).
  std::atomic<uint64_t> steps_{0}, prefill_steps_{0}, decode_steps_{0}, tokens_out_{0};
  std::atomic<uint64_t> requests_{0}, finished_{0}, aborted_{0}, failed_{0};
  std::atomic<uint64_t> synthesized_{0}, attached_{0}, mismatched_{0};
  std::atomic<int64_t> running_{0}, waiting_{0}, free_blocks_{0};
  std::atomic<bool> engine_failed_{false}, stopped_{false};
  std::atomic<int> exit_code_{0};
  std::string engine_error_;  // under mu_
  std::thread thread_;
};

// ISO-8601 UTC time with microseconds.
std::string IsoTimeNow();
int64_t UnixMicrosNow();

}  // namespace twinscope::demo
