// Internal to the mirror server: Mirror::Impl and the per-thread state its coroutines share.
//
// One coroutine per client connection (Session), one per shadow copy
// (ShadowCopy), all on the io_context of one worker thread, so a
// connection's state, its upstream connections and the worker's pools are
// touched by one thread only. Only the counters are shared (atomics).
//
// Impl's parts are defined in: mirror.cpp (start, drain, stop, accepting),
// session.cpp (one client connection), upstreams.cpp (one request to the
// primary and the shadow), health.cpp (/health).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "mirror/address.h"
#include "mirror/beast.h"
#include "mirror/conn_pool.h"
#include "mirror/mirror.h"
#include "mirror/request_log.h"
#include "mirror/request_trace.h"

namespace twinscope::mirror {

using asio::awaitable;
using asio::use_awaitable;

inline constexpr size_t kRelayChunk = 64 * 1024;  // body bytes held per relayed reply
inline constexpr size_t kShadowSink = 16 * 1024;  // shadow bodies are read into this and dropped

inline std::string ErrorText(const beast::error_code& ec) {
  if (ec == beast::error::timeout) return "timeout";
  return ec.message();
}

// One I/O thread and everything only it touches.
struct Worker {
  explicit Worker(size_t pool_size) : primary_pool(pool_size), shadow_pool(pool_size) {}
  std::unique_ptr<asio::io_context> ioc = std::make_unique<asio::io_context>(1);
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::thread thread;
  ConnPool primary_pool, shadow_pool;
  std::unordered_set<beast::tcp_stream*> idle_clients;  // waiting for their next request
  // Shadow bodies are read into this and dropped; shared by the worker's
  // shadow copies (one thread, and nobody reads what lands here).
  std::unique_ptr<char[]> shadow_sink = std::make_unique<char[]>(kShadowSink);
};

// The client-side watcher of one request (see upstreams.cpp).
struct Watch {
  explicit Watch(asio::any_io_executor ex) : timer(ex) { timer.expires_at(asio::steady_timer::time_point::max()); }
  bool done = false;                      // the watcher's read has completed
  bool client_gone = false;               // ... because the client closed or reset
  beast::tcp_stream* upstream = nullptr;  // the primary connection in use, closed when the client goes
  size_t got = 0;                         // bytes the client sent early (a pipelined request), kept in `early`
  std::array<char, 4096> early;
  asio::steady_timer timer;  // cancelled when `done` becomes true
};

// What the /health probe found for one upstream (health.cpp).
struct ProbeResult {
  bool reachable = false;
  int64_t connect_us = -1;
  std::string error;
};

// The server behind Mirror (mirror.h), which forwards to it; same thread rules.
class Mirror::Impl {
 public:
  explicit Impl(MirrorOptions options) : opt_(std::move(options)) {}
  ~Impl() { StopWorkers(); }

  Status Start();
  void Shutdown(bool now);
  void Wait();
  MirrorCounters Snapshot() const;

  MirrorOptions opt_;
  ListenAddress listen_;
  UpstreamUrl primary_, shadow_;
  bool has_shadow_ = false;
  std::vector<tcp::endpoint> primary_eps_, shadow_eps_;
  uint16_t port_ = 0;
  Clock::time_point started_;

 private:
  // mirror.cpp
  awaitable<void> AcceptLoop(tcp::acceptor& acceptor);
  awaitable<void> SweepLoop(Worker& w);
  void StopWorkers();
  // session.cpp
  awaitable<void> Session(Worker& w, tcp::socket socket);
  awaitable<void> LingeringClose(beast::tcp_stream& client);
  // Answers a failed request read (header or body too large: 431/413;
  // malformed: 400) and returns true; false for errors that get no answer
  // (closed, timed out, cancelled).
  awaitable<bool> RejectBadRead(beast::tcp_stream& client, beast::error_code ec, std::string_view malformed_prefix);
  awaitable<bool> SendError(beast::tcp_stream& client, http::status status, std::string_view message,
                            std::string_view id, unsigned version, bool keep_alive);
  // upstreams.cpp
  awaitable<bool> Forward(Worker& w, beast::tcp_stream& client, beast::flat_buffer& client_buf, char* chunk,
                          http::request<http::string_body>& req, std::shared_ptr<RequestTrace> trace);
  awaitable<bool> RelayPrimary(Worker& w, beast::tcp_stream& client, char* chunk, http::request<http::string_body>& req,
                               http::request<http::string_body> upstream_req, std::shared_ptr<Watch> watch,
                               std::shared_ptr<RequestTrace> trace, bool keep_alive);
  awaitable<void> ShadowCopy(Worker& w, std::shared_ptr<http::request<http::string_body>> req,
                             std::shared_ptr<RequestTrace> trace);
  // health.cpp
  awaitable<bool> Health(beast::tcp_stream& client, const http::request<http::string_body>& req, bool keep_alive);
  awaitable<ProbeResult> Probe(const std::vector<tcp::endpoint>& eps);

  bool draining() const { return draining_.load(std::memory_order_acquire); }

  AtomicCounters c_;

 public:
  RequestLog log_;

 private:
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<tcp::acceptor> acceptor_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> stopped_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool shutdown_requested_ = false;
  bool hard_stop_ = false;
  bool started_ok_ = false;
};

}  // namespace twinscope::mirror
