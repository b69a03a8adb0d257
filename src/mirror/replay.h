// The replay of a mirror request log (docs/mirror.md, "Replay"): each logged request is sent again to one
// server with the same method, path, body, logged headers and X-Request-Id; its reply is read to the end,
// or cut where the original client cut it (after as many reply bytes, or as long). Either all at once in
// arrival order (a forcing engine adapter holds each step until its requests arrived) or at the logged
// arrival offsets. Runs on the calling thread (one io_context, a coroutine per request).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace twinscope::mirror {

// One logged request: its request line joined with its end line (if any).
struct LoggedRequest {
  std::string id, method, path;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  int64_t arrival_unix_us = 0;
  bool replayable = false;
  std::string not_replayable;  // why not, when !replayable
  bool ended = false;          // the end line was found
  int primary_status = 0;
  bool streamed = false;
  uint64_t response_bytes = 0;
  bool cancelled = false;  // the client went away: cut the replay at cancel_bytes (or cancel_us before a byte)
  uint64_t cancel_bytes = 0;
  int64_t cancel_us = -1;
};

struct RequestLogContents {
  std::vector<LoggedRequest> requests;     // in arrival order
  uint64_t end_lines_without_request = 0;  // an older log (end lines only) or a request line lost
  uint64_t bad_lines = 0;
  size_t replayable() const;
};

// Reads a request log (both line kinds; an older log's end-only lines count as requests without a body).
StatusOr<RequestLogContents> ReadRequestLog(const std::string& path);

struct ReplayProgress {
  size_t total = 0, sent = 0, ended = 0, failed = 0;
  double elapsed_s = 0, eta_s = -1;  // -1: not known yet
};

struct ReplayOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  bool keep_arrival_offsets = true;                                     // false: all at once, in arrival order
  std::chrono::milliseconds request_timeout{std::chrono::minutes(10)};  // one request, connect to last byte
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(5)};
  std::function<void(const ReplayProgress&)> progress;  // about once a second
  std::function<bool()> abort;                          // polled; true stops the replay (requests cut)
};

struct ReplayResult {
  std::string id;
  // ok, cancelled (cut as the client cut it), failed, timeout, not_replayable, not_sent (aborted before)
  std::string state;
  int status = 0;
  uint64_t bytes = 0;
  std::string error;
  int64_t done_us = -1;  // after the replay's start
};

struct ReplayOutcome {
  std::vector<ReplayResult> results;  // one per logged request, in the log's order
  size_t ok = 0, cancelled = 0, failed = 0, not_replayable = 0, not_sent = 0, status_differs = 0;
  bool aborted = false;
  double elapsed_s = 0;
  nlohmann::json ToJson() const;
};

ReplayOutcome Replay(const RequestLogContents& log, const ReplayOptions& options);

}  // namespace twinscope::mirror
