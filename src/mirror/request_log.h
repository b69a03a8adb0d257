// The mirror's request log: JSON lines appended to a file (mode 0600) by a
// background thread so that I/O threads never wait on the disk; the thread
// fsyncs after its batches (at most one fsync per `sync_every`). Two kinds
// of line (docs/mirror.md, "Request log"): a request line, queued before the
// request is forwarded (body, headers, arrival: what a replay needs), and an
// end line when both copies ended. Request lines are never dropped for the
// queue bound (their bodies are bounded by `max_body_bytes` in all, past
// which a request is logged without its body and counted not replayable);
// end lines past `max_queued` pending lines are dropped and counted
// (dropped()). A batch the disk refused counts its request lines not
// replayable and names their ids (not_replayable_ids()).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"

namespace twinscope::mirror {

struct RequestLogOptions {
  size_t max_queued = 65536;                    // pending end lines; past it they are dropped
  uint64_t max_body_bytes = uint64_t{1} << 30;  // request bodies kept in the log, all requests together
  std::chrono::milliseconds sync_every{200};    // the writer fsyncs at most this often (and at Close)
};

class RequestLog {
 public:
  RequestLog() = default;
  ~RequestLog();
  RequestLog(const RequestLog&) = delete;
  RequestLog& operator=(const RequestLog&) = delete;

  // Opens `path` for appending (created 0600; an existing file is set to
  // 0600) and starts the writer thread.
  Status Open(const std::string& path, size_t max_queued = 65536);
  Status Open(const std::string& path, const RequestLogOptions& options);
  bool is_open() const { return fd_ >= 0; }
  void Write(std::string line);  // an end line, without its newline
  // Takes `bytes` of the body bound for one request's body; false (and the
  // request counts not replayable) when they no longer fit.
  bool ReserveBody(uint64_t bytes);
  // A request line (without its newline); `replayable` false when its body
  // was left out. Never dropped for the queue bound.
  void WriteRequest(std::string line, const std::string& id, bool replayable);
  // Writes what is queued, fsyncs, stops the thread, closes the file. Idempotent.
  void Close();
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  uint64_t written() const { return written_.load(std::memory_order_relaxed); }
  uint64_t syncs() const { return syncs_.load(std::memory_order_relaxed); }
  uint64_t write_errors() const { return write_errors_.load(std::memory_order_relaxed); }
  uint64_t not_replayable() const { return not_replayable_.load(std::memory_order_relaxed); }
  uint64_t body_bytes() const { return body_bytes_.load(std::memory_order_relaxed); }
  // The ids of requests not replayable (the first 1000).
  std::vector<std::string> not_replayable_ids() const;

 private:
  struct Line {
    std::string text;
    std::string request_id;  // a request line's id; empty for an end line
  };
  void Run();
  void NameNotReplayable(const std::string& id);

  int fd_ = -1;
  RequestLogOptions opt_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Line> queue_;
  size_t queued_end_lines_ = 0;
  bool stop_ = false;
  std::thread thread_;
  std::vector<std::string> not_replayable_ids_;  // under mu_
  std::atomic<uint64_t> dropped_{0}, written_{0}, syncs_{0}, write_errors_{0}, not_replayable_{0}, body_bytes_{0};
};

}  // namespace twinscope::mirror
