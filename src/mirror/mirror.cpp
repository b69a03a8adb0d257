// The mirror's I/O: one coroutine per client connection (Session), one per
// shadow copy (ShadowCopy), all on the io_context of one worker thread, so a
// connection's state, its upstream connections and the worker's pools are
// touched by one thread only. Only the counters are shared (atomics).
//
// How the primary's reply is relayed: Beast parses the primary's response
// into a fixed buffer (buffer_body) and each piece read is written to the
// client before the next is read (Beast's documented relay pattern), so a
// streamed reply (SSE, chunked) reaches the client as it arrives and at most
// kRelayChunk bytes of body are held per request.
//
// How a client that goes away cancels the primary: while a request is being
// served, a "watcher" read is kept pending on the client socket. An HTTP/1.1
// client sends nothing while it waits for its reply, so that read completes
// only when the client closes (or pipelines the next request, whose bytes are
// kept). On close, the watcher closes the primary connection, which the
// primary sees at once.
#include "mirror/mirror.h"

#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

#include "mirror/address.h"
#include "mirror/beast.h"
#include "mirror/forward.h"
#include "mirror/request_log.h"

namespace twinscope::mirror {
namespace {

using Clock = std::chrono::steady_clock;
using asio::awaitable;
using asio::use_awaitable;
using Json = nlohmann::json;

constexpr size_t kRelayChunk = 64 * 1024;  // body bytes held per relayed reply
constexpr size_t kShadowSink = 16 * 1024;  // shadow bodies are read into this and dropped

int64_t MicrosBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::microseconds>(to - from).count();
}

std::string IsoTime(std::chrono::system_clock::time_point t) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  time_t secs = static_cast<time_t>(us / 1000000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(us % 1000000));
  return buf;
}

std::string ErrorText(const beast::error_code& ec) {
  if (ec == beast::error::timeout) return "timeout";
  return ec.message();
}

// Errors on a reused keep-alive connection that mean "the server had already
// closed it": the request is sent again once on a fresh connection, but only
// if no byte of a response had come back.
// A request Beast could not parse (answered 400), as opposed to a connection
// that closed or timed out before a whole request arrived (closed silently).
bool IsMalformedRequest(const beast::error_code& ec) {
  static const auto& http_category = http::make_error_code(http::error::bad_method).category();
  return ec.category() == http_category && ec != http::error::end_of_stream && ec != http::error::partial_message &&
         ec != http::error::need_buffer && ec != http::error::need_more;
}

bool IsStaleConnectionError(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::connection_aborted;
}

struct AtomicCounters {
  std::atomic<uint64_t> connections_accepted{0}, connections_open{0}, connections_refused{0};
  std::atomic<uint64_t> requests{0}, health_requests{0};
  std::atomic<uint64_t> rejected_bad_request{0}, rejected_too_large{0}, rejected_header_too_large{0};
  std::atomic<uint64_t> primary_inflight{0}, primary_ok{0}, primary_unreachable{0}, primary_bad_gateway{0};
  std::atomic<uint64_t> primary_timeouts{0}, primary_failed{0}, primary_retries{0}, client_disconnects{0};
  std::atomic<uint64_t> shadow_sent{0}, shadow_ok{0}, shadow_failed{0}, shadow_timeouts{0}, shadow_skipped{0};
  std::atomic<uint64_t> shadow_inflight{0}, drain_cut{0};
};

void Bump(std::atomic<uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); }

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

  Json ToJson() const {
    Json j = {{"state", state}};
    if (status) j["status"] = status;
    if (sent_us >= 0) j["sent_us"] = sent_us;
    if (first_byte_us >= 0) j["first_byte_us"] = first_byte_us;
    if (done_us >= 0) j["done_us"] = done_us;
    j["bytes"] = bytes;
    if (!error.empty()) j["error"] = error;
    if (retried) j["retried"] = true;
    return j;
  }
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
  LegTrace primary, shadow;

  int64_t Now() const { return MicrosBetween(arrival, Clock::now()); }

  ~RequestTrace() {
    if (!log || !log->is_open()) return;
    try {
      auto wall_us = std::chrono::duration_cast<std::chrono::microseconds>(arrival_wall.time_since_epoch()).count();
      Json j = {{"id", id},
                {"id_generated", id_generated},
                {"method", method},
                {"path", path},
                {"client", client},
                {"arrival", IsoTime(arrival_wall)},
                {"arrival_unix_us", wall_us},
                {"request_bytes", request_bytes},
                {"status", client_status},
                {"client_disconnected", client_disconnected},
                {"primary", primary.ToJson()},
                {"shadow", shadow.ToJson()}};
      log->Write(j.dump(-1, ' ', false, Json::error_handler_t::replace));
    } catch (...) {
      // Logging must never take a request down.
    }
  }
};

bool StillOpen(beast::tcp_stream& s) {
  auto& sock = s.socket();
  if (!sock.is_open()) return false;
  char c;
  ssize_t r = ::recv(sock.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r >= 0) return false;  // 0: closed by the server; >0: bytes nobody asked for
  return errno == EAGAIN || errno == EWOULDBLOCK;
}

// Idle keep-alive connections to one upstream, owned by one worker thread.
// Most recently used first; entries idle longer than `max_idle` or closed by
// the server are dropped on the way out.
class ConnPool {
 public:
  explicit ConnPool(size_t capacity) : capacity_(capacity) {}

  std::unique_ptr<beast::tcp_stream> Take(std::chrono::milliseconds max_idle) {
    auto now = Clock::now();
    while (!idle_.empty()) {
      Entry e = std::move(idle_.back());
      idle_.pop_back();
      if (now - e.since > max_idle || !StillOpen(*e.stream)) continue;
      return std::move(e.stream);
    }
    return nullptr;
  }
  void Put(std::unique_ptr<beast::tcp_stream> s) {
    if (idle_.size() >= capacity_) return;  // closed by its destructor
    s->expires_never();
    idle_.push_back({std::move(s), Clock::now()});
  }
  void Sweep(std::chrono::milliseconds max_idle) {
    auto now = Clock::now();
    std::erase_if(idle_, [&](Entry& e) { return now - e.since > max_idle || !StillOpen(*e.stream); });
  }
  void Clear() { idle_.clear(); }

 private:
  struct Entry {
    std::unique_ptr<beast::tcp_stream> stream;
    Clock::time_point since;
  };
  size_t capacity_;
  std::vector<Entry> idle_;
};

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

// The client-side watcher of one request (see the file comment).
struct Watch {
  explicit Watch(asio::any_io_executor ex) : timer(ex) { timer.expires_at(asio::steady_timer::time_point::max()); }
  bool done = false;                      // the watcher's read has completed
  bool client_gone = false;               // ... because the client closed or reset
  beast::tcp_stream* upstream = nullptr;  // the primary connection in use, closed when the client goes
  size_t got = 0;                         // bytes the client sent early (a pipelined request), kept in `early`
  std::array<char, 4096> early;
  asio::steady_timer timer;  // cancelled when `done` becomes true
};

struct ProbeResult {
  bool reachable = false;
  int64_t connect_us = -1;
  std::string error;
};

}  // namespace

Json MirrorCounters::ToJson() const {
  return Json{{"connections_accepted", connections_accepted},
              {"connections_open", connections_open},
              {"connections_refused", connections_refused},
              {"requests", requests},
              {"health_requests", health_requests},
              {"rejected_bad_request", rejected_bad_request},
              {"rejected_too_large", rejected_too_large},
              {"rejected_header_too_large", rejected_header_too_large},
              {"primary_inflight", primary_inflight},
              {"primary_ok", primary_ok},
              {"primary_unreachable", primary_unreachable},
              {"primary_bad_gateway", primary_bad_gateway},
              {"primary_timeouts", primary_timeouts},
              {"primary_failed", primary_failed},
              {"primary_retries", primary_retries},
              {"client_disconnects", client_disconnects},
              {"shadow_sent", shadow_sent},
              {"shadow_ok", shadow_ok},
              {"shadow_failed", shadow_failed},
              {"shadow_timeouts", shadow_timeouts},
              {"shadow_skipped", shadow_skipped},
              {"shadow_inflight", shadow_inflight},
              {"log_written", log_written},
              {"log_dropped", log_dropped},
              {"drain_cut", drain_cut}};
}

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
  awaitable<void> AcceptLoop(tcp::acceptor& acceptor);
  awaitable<void> SweepLoop(Worker& w);
  awaitable<void> Session(Worker& w, tcp::socket socket);
  awaitable<bool> Forward(Worker& w, beast::tcp_stream& client, beast::flat_buffer& client_buf, char* chunk,
                          http::request<http::string_body>& req, std::shared_ptr<RequestTrace> trace);
  awaitable<bool> RelayPrimary(Worker& w, beast::tcp_stream& client, char* chunk, http::request<http::string_body>& req,
                               http::request<http::string_body> upstream_req, std::shared_ptr<Watch> watch,
                               std::shared_ptr<RequestTrace> trace, bool keep_alive);
  awaitable<void> ShadowCopy(Worker& w, std::shared_ptr<http::request<http::string_body>> req,
                             std::shared_ptr<RequestTrace> trace);
  awaitable<bool> Health(beast::tcp_stream& client, const http::request<http::string_body>& req, bool keep_alive);
  awaitable<ProbeResult> Probe(const std::vector<tcp::endpoint>& eps);
  awaitable<void> LingeringClose(beast::tcp_stream& client);
  // Answers a failed request read (header or body too large: 431/413;
  // malformed: 400) and returns true; false for errors that get no answer
  // (closed, timed out, cancelled).
  awaitable<bool> RejectBadRead(beast::tcp_stream& client, beast::error_code ec, std::string_view malformed_prefix);
  awaitable<bool> SendError(beast::tcp_stream& client, http::status status, std::string_view message,
                            std::string_view id, unsigned version, bool keep_alive);
  void StopWorkers();

  bool draining() const { return draining_.load(std::memory_order_acquire); }

  AtomicCounters c_;
  RequestLog log_;
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

// ---- Start / stop ------------------------------------------------------------

namespace {

StatusOr<std::vector<tcp::endpoint>> Resolve(const UpstreamUrl& url, const char* role) {
  asio::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::error_code ec;
  auto results = resolver.resolve(url.host, std::to_string(url.port), ec);
  if (ec || results.empty()) {
    return Status::Error(std::string(role) + " " + url.ToString() + ": cannot resolve host '" + url.host +
                         "': " + (ec ? ec.message() : "no addresses"));
  }
  std::vector<tcp::endpoint> eps;
  for (const auto& r : results) eps.push_back(r.endpoint());
  return eps;
}

}  // namespace

Status Mirror::Impl::Start() {
  auto listen = ParseListenAddress(opt_.listen);
  if (!listen.ok()) return listen.status();
  listen_ = *listen;
  if (opt_.primary.empty()) return Status::Error("--primary is required (e.g. --primary http://127.0.0.1:8000)");
  auto primary = ParseUpstreamUrl(opt_.primary);
  if (!primary.ok()) return Status::Error("--primary " + primary.status().message());
  primary_ = *primary;
  auto peps = Resolve(primary_, "--primary");
  if (!peps.ok()) return peps.status();
  primary_eps_ = *peps;
  if (!opt_.shadow.empty()) {
    auto shadow = ParseUpstreamUrl(opt_.shadow);
    if (!shadow.ok()) return Status::Error("--shadow " + shadow.status().message());
    shadow_ = *shadow;
    has_shadow_ = true;
    auto seps = Resolve(shadow_, "--shadow");
    if (!seps.ok()) return seps.status();
    shadow_eps_ = *seps;
  }
  if (opt_.max_body_bytes == 0 || opt_.max_header_bytes < 1024) {
    return Status::Error("--max-body must be > 0 and --max-header at least 1024 bytes");
  }
  if (!opt_.log_path.empty()) {
    Status s = log_.Open(opt_.log_path);
    if (!s.ok()) return s;
  }

  int threads = opt_.threads;
  if (threads <= 0) threads = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 4);
  for (int i = 0; i < threads; ++i) workers_.push_back(std::make_unique<Worker>(opt_.pool_size));

  beast::error_code ec;
  auto address = asio::ip::make_address(listen_.host, ec);
  if (ec) return Status::Error("--listen " + listen_.ToString() + ": " + ec.message());
  tcp::endpoint ep(address, listen_.port);
  acceptor_ = std::make_unique<tcp::acceptor>(*workers_[0]->ioc);
  acceptor_->open(ep.protocol(), ec);
  if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(ep, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::Error("cannot listen on " + listen_.ToString() + ": " + ec.message());
  port_ = acceptor_->local_endpoint().port();
  listen_.port = port_;
  started_ = Clock::now();

  asio::co_spawn(*workers_[0]->ioc, AcceptLoop(*acceptor_), asio::detached);
  for (auto& w : workers_) {
    w->guard.emplace(w->ioc->get_executor());
    asio::co_spawn(*w->ioc, SweepLoop(*w), asio::detached);
    w->thread = std::thread([io = w->ioc.get()] {
      for (;;) {
        try {
          io->run();
          return;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "twinscope mirror: internal error on an I/O thread: %s (continuing)\n", e.what());
        }
      }
    });
  }
  started_ok_ = true;
  return Status::Ok();
}

void Mirror::Impl::Shutdown(bool now) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (now) hard_stop_ = true;
    if (shutdown_requested_) {
      cv_.notify_all();
      return;
    }
    shutdown_requested_ = true;
  }
  draining_.store(true, std::memory_order_release);
  if (started_ok_) {
    asio::post(*workers_[0]->ioc, [this] {
      beast::error_code ec;
      acceptor_->close(ec);
    });
    for (auto& w : workers_) {
      asio::post(*w->ioc, [wp = w.get()] {
        for (auto* c : wp->idle_clients) c->cancel();
        wp->primary_pool.Clear();
        wp->shadow_pool.Clear();
      });
    }
  }
  cv_.notify_all();
}

void Mirror::Impl::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return shutdown_requested_; });
  auto deadline = Clock::now() + opt_.drain_timeout;
  while (!hard_stop_ && Clock::now() < deadline) {
    if (c_.connections_open.load() == 0 && c_.shadow_inflight.load() == 0) break;
    cv_.wait_for(lock, std::chrono::milliseconds(5));
  }
  uint64_t left = c_.connections_open.load() + c_.shadow_inflight.load();
  lock.unlock();
  if (left) c_.drain_cut.fetch_add(left);
  StopWorkers();
}

void Mirror::Impl::StopWorkers() {
  if (stopped_.exchange(true)) return;
  for (auto& w : workers_) {
    w->guard.reset();
    w->ioc->stop();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
  acceptor_.reset();
  // Pooled sockets first, then the io_contexts (which destroys any coroutine
  // still suspended, with its sockets), then the log: the traces of cut
  // requests are written as their frames go.
  for (auto& w : workers_) {
    w->primary_pool.Clear();
    w->shadow_pool.Clear();
  }
  for (auto& w : workers_) w->ioc.reset();
  log_.Close();
}

MirrorCounters Mirror::Impl::Snapshot() const {
  MirrorCounters s;
  auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  s.connections_accepted = ld(c_.connections_accepted);
  s.connections_open = ld(c_.connections_open);
  s.connections_refused = ld(c_.connections_refused);
  s.requests = ld(c_.requests);
  s.health_requests = ld(c_.health_requests);
  s.rejected_bad_request = ld(c_.rejected_bad_request);
  s.rejected_too_large = ld(c_.rejected_too_large);
  s.rejected_header_too_large = ld(c_.rejected_header_too_large);
  s.primary_inflight = ld(c_.primary_inflight);
  s.primary_ok = ld(c_.primary_ok);
  s.primary_unreachable = ld(c_.primary_unreachable);
  s.primary_bad_gateway = ld(c_.primary_bad_gateway);
  s.primary_timeouts = ld(c_.primary_timeouts);
  s.primary_failed = ld(c_.primary_failed);
  s.primary_retries = ld(c_.primary_retries);
  s.client_disconnects = ld(c_.client_disconnects);
  s.shadow_sent = ld(c_.shadow_sent);
  s.shadow_ok = ld(c_.shadow_ok);
  s.shadow_failed = ld(c_.shadow_failed);
  s.shadow_timeouts = ld(c_.shadow_timeouts);
  s.shadow_skipped = ld(c_.shadow_skipped);
  s.shadow_inflight = ld(c_.shadow_inflight);
  s.log_written = log_.written();
  s.log_dropped = log_.dropped();
  s.drain_cut = ld(c_.drain_cut);
  return s;
}

// ---- Accepting -----------------------------------------------------------------

awaitable<void> Mirror::Impl::AcceptLoop(tcp::acceptor& acceptor) {
  size_t next = 0;
  for (;;) {
    Worker& w = *workers_[next++ % workers_.size()];
    beast::error_code ec;
    auto socket = co_await acceptor.async_accept(*w.ioc, asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open() || draining()) co_return;
      // Out of descriptors or similar: back off briefly instead of spinning.
      asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(20));
      co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
      continue;
    }
    Bump(c_.connections_accepted);
    if (c_.connections_open.load(std::memory_order_relaxed) >= opt_.max_connections) {
      Bump(c_.connections_refused);
      socket.close(ec);
      continue;
    }
    c_.connections_open.fetch_add(1, std::memory_order_relaxed);
    asio::co_spawn(*w.ioc, Session(w, tcp::socket(std::move(socket))), asio::detached);
  }
}

awaitable<void> Mirror::Impl::SweepLoop(Worker& w) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  for (;;) {
    t.expires_after(std::chrono::seconds(1));
    beast::error_code ec;
    co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec || stopped_) co_return;
    w.primary_pool.Sweep(opt_.upstream_idle);
    w.shadow_pool.Sweep(opt_.upstream_idle);
  }
}

// ---- One client connection --------------------------------------------------------

awaitable<bool> Mirror::Impl::RejectBadRead(beast::tcp_stream& client, beast::error_code ec,
                                            std::string_view malformed_prefix) {
  if (ec == http::error::header_limit) {
    Bump(c_.rejected_header_too_large);
    co_await SendError(client, http::status::request_header_fields_too_large,
                       "request header larger than --max-header (" + std::to_string(opt_.max_header_bytes) + " bytes)",
                       "", 11, false);
    co_return true;
  }
  if (ec == http::error::body_limit) {
    Bump(c_.rejected_too_large);
    co_await SendError(client, http::status::payload_too_large,
                       "request body larger than --max-body (" + std::to_string(opt_.max_body_bytes) + " bytes)", "",
                       11, false);
    co_return true;
  }
  if (IsMalformedRequest(ec)) {
    Bump(c_.rejected_bad_request);
    co_await SendError(client, http::status::bad_request, std::string(malformed_prefix) + ec.message(), "", 11, false);
    co_return true;
  }
  co_return false;
}

awaitable<bool> Mirror::Impl::SendError(beast::tcp_stream& client, http::status status, std::string_view message,
                                        std::string_view id, unsigned version, bool keep_alive) {
  auto res = MakeErrorResponse(status, message, id, version, keep_alive);
  beast::error_code ec;
  client.expires_after(opt_.client_timeout);
  co_await http::async_write(client, res, asio::redirect_error(use_awaitable, ec));
  co_return !ec && keep_alive;
}

// Half-closes and reads what the client still sends (up to 1 MiB or 1 s),
// so that an error reply sent before the request body was read is not lost
// to a TCP reset.
awaitable<void> Mirror::Impl::LingeringClose(beast::tcp_stream& client) {
  beast::error_code ec;
  client.socket().shutdown(tcp::socket::shutdown_send, ec);
  std::array<char, 16384> sink;
  size_t total = 0;
  client.expires_after(std::chrono::seconds(1));
  while (!ec && total < (1u << 20)) {
    total += co_await client.async_read_some(asio::buffer(sink), asio::redirect_error(use_awaitable, ec));
  }
  client.close();
}

awaitable<void> Mirror::Impl::Session(Worker& w, tcp::socket socket) {
  GaugeHold open(c_.connections_open, /*already_counted=*/true);
  beast::tcp_stream client(std::move(socket));
  std::string client_ip;
  try {
    beast::error_code ec;
    client.socket().set_option(tcp::no_delay(true), ec);
    auto remote = client.socket().remote_endpoint(ec);
    if (!ec) client_ip = remote.address().to_string();

    beast::flat_buffer buf(opt_.max_header_bytes + 64 * 1024);
    std::unique_ptr<char[]> relay_chunk;  // the primary's body passes through here, kRelayChunk at a time
    bool first = true;
    bool linger = false;
    for (;;) {
      if (draining()) break;
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<uint32_t>(std::min<size_t>(opt_.max_header_bytes, UINT32_MAX)));
      parser.body_limit(opt_.max_body_bytes);
      client.expires_after(first ? opt_.client_timeout : opt_.keepalive_timeout);
      w.idle_clients.insert(&client);
      co_await http::async_read_header(client, buf, parser, asio::redirect_error(use_awaitable, ec));
      w.idle_clients.erase(&client);
      if (ec) {
        linger = co_await RejectBadRead(client, ec, "malformed HTTP request: ");
        break;  // closed, timed out, cancelled by a shutdown, or answered above
      }
      auto arrival_wall = std::chrono::system_clock::now();
      auto arrival = Clock::now();

      if (!parser.is_done()) {
        if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
          static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
          client.expires_after(opt_.client_timeout);
          co_await asio::async_write(client, asio::buffer(kContinue.data(), kContinue.size()),
                                     asio::redirect_error(use_awaitable, ec));
          if (ec) break;
        }
        client.expires_after(opt_.client_timeout);
        co_await http::async_read(client, buf, parser, asio::redirect_error(use_awaitable, ec));
        if (ec) {
          linger = co_await RejectBadRead(client, ec, "malformed HTTP request body: ");
          break;
        }
      }
      auto req = parser.release();
      bool keep_alive = req.keep_alive() && !draining();
      first = false;

      if (req.method() == http::verb::get && req.target() == opt_.health_path) {
        Bump(c_.health_requests);
        if (!co_await Health(client, req, keep_alive)) break;
        continue;
      }

      auto trace = std::make_shared<RequestTrace>();
      trace->log = &log_;
      trace->id = ResolveRequestId(req, &trace->id_generated);
      trace->method = std::string(req.method_string());
      trace->path = std::string(req.target());
      trace->client = client_ip;
      trace->arrival_wall = arrival_wall;
      trace->arrival = arrival;
      trace->request_bytes = req.body().size();
      Bump(c_.requests);
      if (!relay_chunk) relay_chunk = std::make_unique<char[]>(kRelayChunk);
      if (!co_await Forward(w, client, buf, relay_chunk.get(), req, std::move(trace))) break;
      if (draining()) break;
    }
    if (linger) {
      co_await LingeringClose(client);
    } else {
      client.socket().shutdown(tcp::socket::shutdown_send, ec);
      client.close();
    }
  } catch (const std::exception& e) {
    w.idle_clients.erase(&client);
    std::fprintf(stderr, "twinscope mirror: internal error serving %s: %s (connection closed)\n", client_ip.c_str(),
                 e.what());
  }
}

// ---- One request -------------------------------------------------------------------

awaitable<bool> Mirror::Impl::Forward(Worker& w, beast::tcp_stream& client, beast::flat_buffer& client_buf, char* chunk,
                                      http::request<http::string_body>& req, std::shared_ptr<RequestTrace> trace) {
  bool keep_alive = req.keep_alive() && !draining();

  // The shadow's copy is started first so that both leave together; it runs
  // on its own coroutine and the primary never waits for it.
  if (!has_shadow_) {
    trace->shadow.state = "disabled";
  } else if (c_.shadow_inflight.fetch_add(1, std::memory_order_relaxed) < opt_.shadow_max_inflight) {
    Bump(c_.shadow_sent);
    trace->shadow.state = "pending";
    auto sreq = std::make_shared<http::request<http::string_body>>(
        MakeUpstreamRequest(req, shadow_, trace->id, "shadow", trace->client));
    asio::co_spawn(*w.ioc, ShadowCopy(w, std::move(sreq), trace), asio::detached);
  } else {
    c_.shadow_inflight.fetch_sub(1, std::memory_order_relaxed);
    Bump(c_.shadow_skipped);
    trace->shadow.state = "skipped";
  }

  auto preq = MakeUpstreamRequest(req, primary_, trace->id, "primary", trace->client);

  // Watch the client while the primary works (see the file comment).
  auto watch = std::make_shared<Watch>(client.get_executor());
  client.expires_never();
  client.async_read_some(asio::buffer(watch->early), [watch](beast::error_code ec, size_t n) {
    watch->done = true;
    if (!ec) {
      watch->got = n;
    } else if (ec != asio::error::operation_aborted) {
      watch->client_gone = true;
      if (watch->upstream) watch->upstream->close();
    }
    watch->timer.cancel();
  });

  bool keep = false;
  {
    GaugeHold inflight(c_.primary_inflight);
    keep = co_await RelayPrimary(w, client, chunk, req, std::move(preq), watch, trace, keep_alive);
  }
  watch->upstream = nullptr;

  if (!watch->done) {
    beast::error_code ec;
    client.socket().cancel(ec);
    co_await watch->timer.async_wait(asio::redirect_error(use_awaitable, ec));
  }
  if (watch->client_gone) {
    if (!trace->client_disconnected) {
      trace->client_disconnected = true;
      Bump(c_.client_disconnects);
    }
    co_return false;
  }
  if (watch->got > 0) {
    auto space = client_buf.prepare(watch->got);
    asio::buffer_copy(space, asio::buffer(watch->early.data(), watch->got));
    client_buf.commit(watch->got);
  }
  co_return keep;
}

// Sends `upstream_req` to the primary and relays its reply to the client.
// Returns whether the client connection may carry another request.
awaitable<bool> Mirror::Impl::RelayPrimary(Worker& w, beast::tcp_stream& client, char* chunk,
                                           http::request<http::string_body>& req,
                                           http::request<http::string_body> upstream_req, std::shared_ptr<Watch> watch,
                                           std::shared_ptr<RequestTrace> trace, bool keep_alive) {
  LegTrace& leg = trace->primary;
  const std::string& id = trace->id;
  auto client_gone = [&]() -> bool {
    if (!watch->client_gone) return false;
    leg.state = "client_disconnected";
    leg.done_us = trace->Now();
    return true;
  };

  std::unique_ptr<beast::tcp_stream> up;
  struct ForgetUpstream {  // runs before `up` goes, however this frame ends
    Watch& w;
    ~ForgetUpstream() { w.upstream = nullptr; }
  } forget{*watch};
  beast::flat_buffer upbuf(opt_.max_header_bytes + 128 * 1024);
  std::optional<http::response_parser<http::buffer_body>> p;
  beast::error_code ec;
  for (int attempt = 0;; ++attempt) {
    watch->upstream = nullptr;
    up = w.primary_pool.Take(opt_.upstream_idle);
    const bool reused = up != nullptr;
    if (!up) {
      up = std::make_unique<beast::tcp_stream>(*w.ioc);
      watch->upstream = up.get();
      up->expires_after(opt_.connect_timeout);
      co_await up->async_connect(primary_eps_, asio::redirect_error(use_awaitable, ec));
      if (client_gone()) co_return false;
      if (ec) {
        watch->upstream = nullptr;
        Bump(c_.primary_unreachable);
        leg.state = "unreachable";
        leg.error = "connect: " + ErrorText(ec);
        leg.done_us = trace->Now();
        trace->client_status = 502;
        co_return co_await SendError(client, http::status::bad_gateway,
                                     "primary upstream " + primary_.ToString() + " is unreachable: " + ErrorText(ec),
                                     id, req.version(), keep_alive);
      }
      beast::error_code ignored;
      up->socket().set_option(tcp::no_delay(true), ignored);
    }
    watch->upstream = up.get();
    upbuf.clear();
    leg.sent_us = trace->Now();
    up->expires_after(opt_.primary_timeout);
    co_await http::async_write(*up, upstream_req, asio::redirect_error(use_awaitable, ec));
    bool got_some = false;
    if (!ec) {
      // Interim 1xx replies are skipped (101 is relayed as a final reply).
      for (;;) {
        p.emplace();
        p->header_limit(static_cast<uint32_t>(std::min<size_t>(opt_.max_header_bytes, UINT32_MAX)));
        p->body_limit(std::numeric_limits<std::uint64_t>::max());
        if (req.method() == http::verb::head) p->skip(true);
        co_await http::async_read_header(*up, upbuf, *p, asio::redirect_error(use_awaitable, ec));
        got_some = got_some || p->got_some();
        if (ec || p->get().result_int() / 100 != 1 || p->get().result_int() == 101) break;
      }
    }
    if (client_gone()) co_return false;
    if (!ec) break;
    if (reused && attempt == 0 && !got_some && IsStaleConnectionError(ec)) {
      Bump(c_.primary_retries);
      leg.retried = true;
      continue;
    }
    watch->upstream = nullptr;
    leg.error = "before the response header: " + ErrorText(ec);
    leg.done_us = trace->Now();
    if (ec == beast::error::timeout) {
      Bump(c_.primary_timeouts);
      leg.state = "timeout";
      trace->client_status = 504;
      co_return co_await SendError(client, http::status::gateway_timeout,
                                   "primary upstream " + primary_.ToString() + " sent no response header within " +
                                       std::to_string(opt_.primary_timeout.count()) + " ms",
                                   id, req.version(), keep_alive);
    }
    Bump(c_.primary_bad_gateway);
    leg.state = "bad_gateway";
    trace->client_status = 502;
    co_return co_await SendError(client, http::status::bad_gateway,
                                 "primary upstream " + primary_.ToString() + " failed: " + ErrorText(ec), id,
                                 req.version(), keep_alive);
  }

  // The primary's response header is here: relay it, then its body piece by piece.
  auto& res = p->get();
  leg.first_byte_us = trace->Now();
  leg.status = res.result_int();
  trace->client_status = leg.status;
  const bool upstream_keep_alive = p->keep_alive();
  const bool header_only = p->is_done();  // HEAD, 204, 304
  const bool length_known = header_only || p->chunked() || p->content_length().has_value();
  keep_alive = keep_alive && !draining();  // a shutdown may have begun while the primary worked
  PrepareClientResponse(res, id, req.version(), length_known, &keep_alive);

  http::response_serializer<http::buffer_body> sr{res};
  client.expires_after(opt_.client_timeout);  // the watcher's read is pending: this times writes only
  co_await http::async_write_header(client, sr, asio::redirect_error(use_awaitable, ec));
  bool client_failed = static_cast<bool>(ec);
  bool upstream_failed = false;
  beast::error_code upstream_ec;
  if (!client_failed && !header_only) {
    for (;;) {
      if (!p->is_done()) {
        res.body().data = chunk;
        res.body().size = kRelayChunk;
        up->expires_after(opt_.primary_timeout);
        co_await http::async_read_some(*up, upbuf, *p, asio::redirect_error(use_awaitable, ec));
        if (ec == http::error::need_buffer) ec = {};
        if (ec) {
          upstream_failed = true;
          upstream_ec = ec;
          break;
        }
        size_t n = kRelayChunk - res.body().size;
        res.body().data = n ? chunk : nullptr;
        res.body().size = n;
        res.body().more = !p->is_done();
        leg.bytes += n;
      } else {
        res.body().data = nullptr;
        res.body().size = 0;
        res.body().more = false;
      }
      client.expires_after(opt_.client_timeout);
      co_await http::async_write(client, sr, asio::redirect_error(use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec) {
        client_failed = true;
        break;
      }
      if (sr.is_done()) break;
    }
  }
  leg.done_us = trace->Now();
  watch->upstream = nullptr;
  if (watch->client_gone || client_failed) {
    leg.state = "client_disconnected";
    if (!trace->client_disconnected) {
      trace->client_disconnected = true;
      Bump(c_.client_disconnects);
    }
    co_return false;  // `up` closes here: the primary sees the cancel
  }
  if (upstream_failed) {
    leg.error = "mid-reply: " + ErrorText(upstream_ec);
    if (upstream_ec == beast::error::timeout) {
      leg.state = "timeout";
      Bump(c_.primary_timeouts);
    } else {
      leg.state = "failed";
      Bump(c_.primary_failed);
    }
    co_return false;  // the client sees a cut reply
  }
  leg.state = "ok";
  Bump(c_.primary_ok);
  if (p->is_done() && upstream_keep_alive && upbuf.size() == 0 && !draining()) {
    w.primary_pool.Put(std::move(up));
  }
  co_return keep_alive;
}

// ---- The shadow's copy --------------------------------------------------------------

awaitable<void> Mirror::Impl::ShadowCopy(Worker& w, std::shared_ptr<http::request<http::string_body>> req,
                                         std::shared_ptr<RequestTrace> trace) {
  GaugeHold inflight(c_.shadow_inflight, /*already_counted=*/true);
  LegTrace& leg = trace->shadow;
  auto fail = [&](const char* where, const beast::error_code& ec) {
    leg.done_us = trace->Now();
    leg.error = std::string(where) + ": " + ErrorText(ec);
    if (ec == beast::error::timeout) {
      leg.state = "timeout";
      Bump(c_.shadow_timeouts);
    } else {
      leg.state = "failed";
      Bump(c_.shadow_failed);
    }
  };
  try {
    const auto deadline = Clock::now() + opt_.shadow_timeout;
    std::unique_ptr<beast::tcp_stream> up;
    beast::flat_buffer buf(opt_.max_header_bytes + 128 * 1024);
    std::optional<http::response_parser<http::buffer_body>> p;
    beast::error_code ec;
    for (int attempt = 0;; ++attempt) {
      up = w.shadow_pool.Take(opt_.upstream_idle);
      const bool reused = up != nullptr;
      if (!up) {
        up = std::make_unique<beast::tcp_stream>(*w.ioc);
        up->expires_at(std::min(deadline, Clock::now() + opt_.connect_timeout));
        co_await up->async_connect(shadow_eps_, asio::redirect_error(use_awaitable, ec));
        if (ec) {
          fail("connect", ec);
          co_return;
        }
        beast::error_code ignored;
        up->socket().set_option(tcp::no_delay(true), ignored);
      }
      up->expires_at(deadline);
      buf.clear();
      leg.sent_us = trace->Now();
      co_await http::async_write(*up, *req, asio::redirect_error(use_awaitable, ec));
      bool got_some = false;
      if (!ec) {
        for (;;) {
          p.emplace();
          p->header_limit(static_cast<uint32_t>(std::min<size_t>(opt_.max_header_bytes, UINT32_MAX)));
          p->body_limit(std::numeric_limits<std::uint64_t>::max());
          if (req->method() == http::verb::head) p->skip(true);
          co_await http::async_read_header(*up, buf, *p, asio::redirect_error(use_awaitable, ec));
          got_some = got_some || p->got_some();
          if (ec || p->get().result_int() / 100 != 1 || p->get().result_int() == 101) break;
        }
      }
      if (!ec) break;
      if (reused && attempt == 0 && !got_some && IsStaleConnectionError(ec)) {
        leg.retried = true;
        continue;
      }
      fail("before the response header", ec);
      co_return;
    }
    leg.first_byte_us = trace->Now();
    leg.status = p->get().result_int();
    while (!p->is_done()) {
      p->get().body().data = w.shadow_sink.get();
      p->get().body().size = kShadowSink;
      co_await http::async_read(*up, buf, *p, asio::redirect_error(use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      leg.bytes += kShadowSink - p->get().body().size;
      if (ec) {
        fail("mid-reply", ec);
        co_return;
      }
    }
    leg.done_us = trace->Now();
    leg.state = "ok";
    Bump(c_.shadow_ok);
    if (p->keep_alive() && buf.size() == 0 && !draining()) w.shadow_pool.Put(std::move(up));
  } catch (const std::exception& e) {
    leg.state = "failed";
    leg.error = std::string("internal: ") + e.what();
    Bump(c_.shadow_failed);
  }
}

// ---- /health --------------------------------------------------------------------------

awaitable<ProbeResult> Mirror::Impl::Probe(const std::vector<tcp::endpoint>& eps) {
  ProbeResult r;
  beast::tcp_stream s(co_await asio::this_coro::executor);
  s.expires_after(opt_.health_timeout);
  auto t0 = Clock::now();
  beast::error_code ec;
  co_await s.async_connect(eps, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    r.error = ErrorText(ec);
  } else {
    r.reachable = true;
    r.connect_us = MicrosBetween(t0, Clock::now());
    s.socket().shutdown(tcp::socket::shutdown_both, ec);
  }
  co_return r;
}

awaitable<bool> Mirror::Impl::Health(beast::tcp_stream& client, const http::request<http::string_body>& req,
                                     bool keep_alive) {
  auto ex = co_await asio::this_coro::executor;
  struct Join {
    explicit Join(asio::any_io_executor ex) : timer(ex) { timer.expires_at(asio::steady_timer::time_point::max()); }
    asio::steady_timer timer;
    int pending = 0;
    ProbeResult primary, shadow;
  };
  auto join = std::make_shared<Join>(ex);
  auto start = [&](const std::vector<tcp::endpoint>& eps, ProbeResult Join::*slot) {
    ++join->pending;
    asio::co_spawn(ex, Probe(eps), [join, slot](std::exception_ptr e, ProbeResult r) {
      if (!e) (*join).*slot = r;
      if (--join->pending == 0) join->timer.cancel();
    });
  };
  start(primary_eps_, &Join::primary);
  if (has_shadow_) start(shadow_eps_, &Join::shadow);
  beast::error_code ec;
  if (join->pending > 0) co_await join->timer.async_wait(asio::redirect_error(use_awaitable, ec));

  auto side = [](const std::string& url, const ProbeResult& r) {
    Json j = {{"url", url}, {"reachable", r.reachable}};
    if (r.reachable) j["connect_us"] = r.connect_us;
    if (!r.error.empty()) j["error"] = r.error;
    return j;
  };
  Json body = {{"status", join->primary.reachable ? "ok" : "primary_unreachable"},
               {"listen", listen_.ToString()},
               {"uptime_s", std::chrono::duration<double>(Clock::now() - started_).count()},
               {"draining", draining()},
               {"primary", side(primary_.ToString(), join->primary)},
               {"shadow", has_shadow_ ? side(shadow_.ToString(), join->shadow) : Json(nullptr)},
               {"counters", Snapshot().ToJson()}};
  http::response<http::string_body> res{join->primary.reachable ? http::status::ok : http::status::service_unavailable,
                                        req.version() == 10 ? 10u : 11u};
  res.set(http::field::server, "twinscope-mirror");
  res.set(http::field::content_type, "application/json");
  res.set(http::field::cache_control, "no-store");
  res.body() = body.dump(2) + "\n";
  res.keep_alive(keep_alive);
  res.prepare_payload();
  client.expires_after(opt_.client_timeout);
  co_await http::async_write(client, res, asio::redirect_error(use_awaitable, ec));
  co_return !ec && keep_alive;
}

// ---- Mirror ---------------------------------------------------------------------------

Mirror::Mirror(MirrorOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Mirror::~Mirror() {
  impl_->Shutdown(false);
  impl_->Wait();
}
Status Mirror::Start() { return impl_->Start(); }
std::string Mirror::listen_address() const { return impl_->listen_.ToString(); }
uint16_t Mirror::port() const { return impl_->port_; }
bool Mirror::loopback_only() const { return impl_->listen_.loopback; }
std::string Mirror::primary_url() const { return impl_->primary_.ToString(); }
std::string Mirror::shadow_url() const { return impl_->has_shadow_ ? impl_->shadow_.ToString() : ""; }
void Mirror::Shutdown() { impl_->Shutdown(false); }
void Mirror::ShutdownNow() { impl_->Shutdown(true); }
void Mirror::Wait() { impl_->Wait(); }
MirrorCounters Mirror::counters() const { return impl_->Snapshot(); }

int RunMirror(const MirrorOptions& options, const std::function<void(const Mirror&)>& on_listening) {
  // Asio catches SIGINT/SIGTERM on whichever thread they land and hands them
  // to this thread's io_context.
  asio::io_context sig_ioc(1);
  asio::signal_set signals(sig_ioc, SIGINT, SIGTERM);

  Mirror mirror(options);
  Status s = mirror.Start();
  if (!s.ok()) {
    std::fprintf(stderr, "twinscope mirror: %s\n", s.message().c_str());
    mirror.ShutdownNow();
    return 1;
  }
  std::fprintf(stderr, "twinscope mirror: listening on http://%s%s\n", mirror.listen_address().c_str(),
               mirror.loopback_only() ? " (loopback only; pass --listen 0.0.0.0:PORT to accept other machines)"
                                      : " (NOT loopback: reachable from other machines)");
  std::fprintf(stderr, "twinscope mirror: primary %s (its replies go to clients), shadow %s\n",
               mirror.primary_url().c_str(),
               options.shadow.empty() ? "none" : (mirror.shadow_url() + " (replies dropped)").c_str());
  if (!options.log_path.empty()) std::fprintf(stderr, "twinscope mirror: request log %s\n", options.log_path.c_str());
  std::fflush(stderr);
  if (on_listening) on_listening(mirror);

  int signals_seen = 0;
  std::function<void(const beast::error_code&, int)> on_signal = [&](const beast::error_code& ec, int signo) {
    if (ec) return;
    if (++signals_seen == 1) {
      std::fprintf(stderr, "twinscope mirror: %s: finishing requests in flight (again to stop at once)\n",
                   signo == SIGINT ? "SIGINT" : "SIGTERM");
      mirror.Shutdown();
      signals.async_wait(on_signal);
    } else {
      std::fprintf(stderr, "twinscope mirror: stopping now\n");
      mirror.ShutdownNow();
    }
  };
  signals.async_wait(on_signal);
  std::thread waiter([&] {
    mirror.Wait();
    asio::post(sig_ioc, [&] { sig_ioc.stop(); });
  });
  sig_ioc.run();
  waiter.join();
  auto c = mirror.counters();
  std::fprintf(stderr,
               "twinscope mirror: stopped; %llu requests, %llu primary ok, %llu shadow ok, %llu shadow skipped, "
               "%llu shadow failed or timed out\n",
               static_cast<unsigned long long>(c.requests), static_cast<unsigned long long>(c.primary_ok),
               static_cast<unsigned long long>(c.shadow_ok), static_cast<unsigned long long>(c.shadow_skipped),
               static_cast<unsigned long long>(c.shadow_failed + c.shadow_timeouts));
  return 0;
}

}  // namespace twinscope::mirror
