// The mirror's request log: one JSON object per line, appended to a file by a
// background thread so that I/O threads never wait on the disk. Write() is
// thread-safe and never blocks; past `max_queued` pending lines it drops the
// line and counts it (dropped()), which /health reports.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"

namespace twinscope::mirror {

class RequestLog {
 public:
  RequestLog() = default;
  ~RequestLog();
  RequestLog(const RequestLog&) = delete;
  RequestLog& operator=(const RequestLog&) = delete;

  // Opens `path` for appending and starts the writer thread.
  Status Open(const std::string& path, size_t max_queued = 65536);
  bool is_open() const { return file_ != nullptr; }
  void Write(std::string line);  // `line` without its newline
  // Writes what is queued, stops the thread, closes the file. Idempotent.
  void Close();
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  uint64_t written() const { return written_.load(std::memory_order_relaxed); }

 private:
  void Run();

  std::FILE* file_ = nullptr;
  size_t max_queued_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool stop_ = false;
  std::thread thread_;
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> written_{0};
};

}  // namespace twinscope::mirror
