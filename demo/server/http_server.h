// The demo server's HTTP/1.1 API over a ServingCore (docs/demo-server.md):
//   POST /v1/chat/completions   OpenAI chat completions, streamed (SSE) or not
//   GET  /v1/models             the served model (+ vocab_size, seed, max_model_len)
//   GET  /health                the serving loop's state and counters (200, or 503 when failed/stopped)
//   GET  /v1/schedule?from=N&wait_ms=M   the step schedule from step N (JSON lines), long-polled
// Boost.Beast on C++20 coroutines, one I/O thread (so a request's handler and
// the wake-ups the serving loop posts to it never run at the same time).
// Every malformed request gets an answer with a JSON error body (400, 404,
// 405, 413, 431) and never takes the server down.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "server/serving.h"

namespace twinscope::demo {

struct HttpOptions {
  std::string host = "127.0.0.1";  // numeric address; 0.0.0.0 accepts other machines
  uint16_t port = 8000;            // 0 picks a free one
  size_t max_body_bytes = 4u << 20;
  size_t max_header_bytes = 64u << 10;
  std::chrono::milliseconds client_timeout{60000};     // reading one request, writing one piece
  std::chrono::milliseconds keepalive_timeout{60000};  // idle connection between requests
  std::chrono::milliseconds schedule_max_wait{10000};  // longest long-poll of GET /v1/schedule
};

class HttpServer {
 public:
  HttpServer(HttpOptions options, ServingCore& core);
  ~HttpServer();  // ShutdownNow() + Wait()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts the I/O thread.
  Status Start();
  uint16_t port() const;
  std::string address() const;  // "127.0.0.1:8000"
  bool loopback_only() const;

  // Stops accepting and closes idle connections; requests being answered
  // finish (their replies carry Connection: close). From any thread.
  void Shutdown();
  void ShutdownNow();  // also cuts requests being answered
  // Blocks until Shutdown* was called and every connection is closed, then
  // stops the I/O thread.
  void Wait();
  // Like Wait, but gives up after `timeout` (false; the server still runs).
  bool WaitFor(std::chrono::milliseconds timeout);

  // GET /v1/schedule requests answered; whether one of them carried the
  // schedule's end line; whether one is being answered now or ended within
  // `window` (a live follower polls again at once). main waits, while a
  // follower polls, for the end line to be served before closing.
  uint64_t schedule_requests() const;
  bool schedule_end_served() const;
  bool schedule_polled_recently(std::chrono::milliseconds window) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace twinscope::demo
