// What the mirror counts and logs: the shared counters, and the trace of one request (one request-log line).
//
// The counters are relaxed atomics, bumped from any I/O thread; a snapshot
// (Load) is a set of separate loads, not one instant. A RequestTrace is
// touched by one I/O thread only (its request's primary and shadow
// coroutines run on the same io_context).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mirror/mirror.h"
#include "mirror/request_log.h"

namespace twinscope::mirror {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

inline int64_t MicrosBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::microseconds>(to - from).count();
}

// The live counters behind MirrorCounters (mirror.h), one set per Mirror.
struct AtomicCounters {
  std::atomic<uint64_t> connections_accepted{0}, connections_open{0}, connections_refused{0};
  std::atomic<uint64_t> requests{0}, health_requests{0};
  std::atomic<uint64_t> rejected_bad_request{0}, rejected_too_large{0}, rejected_header_too_large{0};
  std::atomic<uint64_t> primary_inflight{0}, primary_ok{0}, primary_unreachable{0}, primary_bad_gateway{0};
  std::atomic<uint64_t> primary_timeouts{0}, primary_failed{0}, primary_retries{0}, client_disconnects{0};
  std::atomic<uint64_t> shadow_sent{0}, shadow_ok{0}, shadow_failed{0}, shadow_timeouts{0}, shadow_skipped{0};
  std::atomic<uint64_t> shadow_inflight{0}, drain_cut{0};
  // All but the request log's counts (log_written, log_dropped: the
  // RequestLog keeps those).
  MirrorCounters Load() const;
};

inline void Bump(std::atomic<uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); }

// Decrements a gauge when it goes out of scope (also when a coroutine frame is
// destroyed at a hard stop).
struct GaugeHold {
  explicit GaugeHold(std::atomic<uint64_t>& g, bool already_counted = false) : gauge(g) {
    if (!already_counted) gauge.fetch_add(1, std::memory_order_relaxed);
  }
  ~GaugeHold() { gauge.fetch_sub(1, std::memory_order_relaxed); }
  std::atomic<uint64_t>& gauge;
};

// One upstream's side of one request, for the request log.
struct LegTrace {
  std::string state;  // see docs/mirror.md, "Request log"
  int status = 0;
  int64_t sent_us = -1, first_byte_us = -1, done_us = -1;
  uint64_t bytes = 0;
  std::string error;
  bool retried = false;

  Json ToJson() const;
};

// Everything logged about one client request. Shared by the primary's and
// the shadow's coroutines (same thread); the line is written when the last
// of them lets go, so it holds both sides.
struct RequestTrace {
  RequestLog* log = nullptr;
  std::string id;
  bool id_generated = false;
  std::string method, path, client;
  std::chrono::system_clock::time_point arrival_wall;
  Clock::time_point arrival;
  uint64_t request_bytes = 0;
  int client_status = 0;
  bool client_disconnected = false;
  bool streamed = false;  // the primary's reply came chunked or of unknown length (SSE and the like)
  LegTrace primary, shadow;

  int64_t Now() const { return MicrosBetween(arrival, Clock::now()); }

  // Writes the request's end line to `log` (if open); never throws.
  ~RequestTrace();
};

// The request line of `t` (docs/mirror.md, "Request log"): what a replay sends again. `body_kept` false:
// the line has no body and says `why_not`. A body that is not UTF-8 is kept as body_base64.
std::string RequestLine(const RequestTrace& t, const std::vector<std::pair<std::string, std::string>>& headers,
                        std::string_view body, bool body_kept, std::string_view why_not);

bool IsUtf8(std::string_view s);
std::string Base64Encode(std::string_view in);
bool Base64Decode(std::string_view in, std::string* out);  // false on a character outside the alphabet

}  // namespace twinscope::mirror
