// A background thread that writes a collector's counters into its trace every
// flush period, so a killed process's trace ends with counters at most one
// period old (docs/trace-format.md, STATUS).
//
// Every `period` it calls `publish` (which sets the collector's counters in the
// writer; it may take the collector's own lock, as it runs on the ticker's
// thread, never on an application thread) and then TraceWriter::Checkpoint().
// For collectors without a background thread of their own that does this (the
// block probe; the CUPTI collector's flush thread checkpoints itself). All
// signals are blocked in the thread, so the program's own threads get them.
// It also answers the stop request (format/stop_request.h): after a tick that
// finds <TWINSCOPE_CONTROL_DIR>/stop it writes the SUMMARY marked
// "at_stop_request" and acknowledges.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "format/stop_request.h"
#include "format/trace_writer.h"

namespace twinscope {

class StatusTicker {
 public:
  // Starts the thread; a period of zero or less starts nothing. `writer` must
  // outlive Stop().
  StatusTicker(TraceWriter* writer, std::chrono::milliseconds period, std::function<void()> publish);
  ~StatusTicker();  // Stop()
  StatusTicker(const StatusTicker&) = delete;
  StatusTicker& operator=(const StatusTicker&) = delete;

  // Ends the thread (waits for a tick in progress); idempotent. Call before
  // the writer is closed. In a forked child, which has no such thread, it only
  // lets go of it.
  void Stop();

 private:
  void Loop();

  TraceWriter* writer_;
  const std::chrono::milliseconds period_;
  std::function<void()> publish_;
  StopRequest stop_request_;
  pid_t pid_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace twinscope
