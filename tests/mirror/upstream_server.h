// In-test HTTP servers and a blocking client for the mirror's tests and
// benchmark, built on Beast. TestUpstream runs its own io_context threads on
// 127.0.0.1:<ephemeral> and answers by path:
//   /stream?n=N&gap_ms=G   SSE, chunked: N events "data: i" G ms apart, then "data: [DONE]"
//   /big?bytes=N           N bytes of a fixed pattern (Content-Length)
//   /sleep?ms=M            like the default, after M ms
//   /gate?n=N              like the default, once N requests to /gate have arrived (each waits, up to 30 s):
//                          N requests in flight at once, however slowly the machine runs
//   /cut_header            the start of a response header, then a reset (RST)
//   /cut_body?bytes=N      a header announcing 2N bytes, N of them, then a close
//   anything else          JSON: {"role","id","method","target","body_bytes","body_hash"}
// Behaviour for every request: `delay_ms` before replying, `hang` (read the
// request, never answer), `close_after_reply` (close the connection right
// after each reply while claiming keep-alive), `interim` (1xx replies sent
// before each final one), `close_on_reuse` (read the second request of a
// connection, then close it unanswered). What it saw is recorded.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "mirror/beast.h"

namespace twinscope::mirror::testing {

inline uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

inline char PatternByte(size_t i) { return static_cast<char>('a' + (i * 7 + i / 13) % 26); }

inline std::string QueryParam(std::string_view target, std::string_view key) {
  size_t q = target.find('?');
  if (q == std::string_view::npos) return "";
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view kv = rest.substr(0, amp);
    size_t eq = kv.find('=');
    if (kv.substr(0, eq) == key) return eq == std::string_view::npos ? "" : std::string(kv.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return "";
}

inline std::string_view PathOf(std::string_view target) { return target.substr(0, target.find('?')); }

struct UpstreamBehavior {
  int delay_ms = 0;
  bool hang = false;
  bool close_after_reply = false;
  // A server whose keep-alive timer fired just as a request came: to the
  // mirror, a pooled connection that looked open and closes under its request.
  bool close_on_reuse = false;
  std::vector<int> interim{};  // e.g. {100, 103}: "HTTP/1.1 103 Early Hints" etc. before each final reply
  int threads = 1;
};

struct SeenRequest {
  std::string id, role, method, target;
  size_t body_bytes = 0;
  uint64_t body_hash = 0;
  std::vector<std::pair<std::string, std::string>> headers{};  // every field, in order
  std::string body{};
};

class TestUpstream {
 public:
  explicit TestUpstream(UpstreamBehavior b = {}) : behavior_(b), acceptor_(ioc_) {
    delay_ms_ = b.delay_ms;
    tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(ep.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(asio::socket_base::max_listen_connections);
    port_ = acceptor_.local_endpoint().port();
    asio::co_spawn(ioc_, Accept(), asio::detached);
    for (int i = 0; i < std::max(1, b.threads); ++i) threads_.emplace_back([this] { ioc_.run(); });
  }
  ~TestUpstream() {
    ioc_.stop();
    for (auto& t : threads_) t.join();
  }

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(seen_.size());
  }
  int connections() const { return connections_.load(); }
  int cancels() const { return cancels_.load(); }      // streams cut by the peer
  int completed() const { return completed_.load(); }  // replies written to the end
  void set_delay_ms(int ms) { delay_ms_ = ms; }
  std::vector<SeenRequest> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  // The requests seen so far, once there are at least `n` of them (fewer if
  // `timeout` passes first: callers check the size before indexing).
  std::vector<SeenRequest> WaitForSeen(size_t n, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    WaitFor([&] { return static_cast<size_t>(requests()) >= n; }, timeout);
    return seen();
  }
  // Waits until `pred()` holds or `timeout` passes; returns pred().
  template <typename Pred>
  static bool WaitFor(Pred pred, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > end) return pred();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }

 private:
  asio::awaitable<void> Accept() {
    for (;;) {
      beast::error_code ec;
      tcp::socket s = co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      ++connections_;
      asio::co_spawn(ioc_, Serve(std::move(s)), asio::detached);
    }
  }

  asio::awaitable<void> Sleep(int ms) {
    if (ms <= 0) co_return;
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(ms));
    beast::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }

  asio::awaitable<void> Serve(tcp::socket socket) {
    beast::tcp_stream s(std::move(socket));
    beast::flat_buffer buf;
    beast::error_code ec;
    s.socket().set_option(tcp::no_delay(true), ec);
    for (int on_connection = 1;; ++on_connection) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(256u << 20);
      co_await http::async_read(s, buf, parser, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      auto req = parser.release();
      SeenRequest seen{std::string(req[kRequestId]),
                       std::string(req["X-Twinscope-Mirror"]),
                       std::string(req.method_string()),
                       std::string(req.target()),
                       req.body().size(),
                       Fnv1a(req.body())};
      for (const auto& f : req) seen.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
      seen.body = req.body();
      {
        // Counted and recorded in one step: a test that has seen requests()
        // reach N always finds N entries in seen().
        std::lock_guard<std::mutex> lock(mu_);
        seen_.push_back(seen);
      }
      if (behavior_.close_on_reuse && on_connection > 1) {
        s.socket().shutdown(tcp::socket::shutdown_both, ec);
        co_return;
      }
      if (behavior_.hang) {
        // Never answer; hold the connection until the peer closes it.
        std::array<char, 256> sink;
        co_await s.async_read_some(asio::buffer(sink), asio::redirect_error(asio::use_awaitable, ec));
        co_return;
      }
      co_await Sleep(delay_ms_.load());
      for (int code : behavior_.interim) {
        std::string head = "HTTP/1.1 " + std::to_string(code) +
                           (code == 103 ? " Early Hints\r\nLink: </style.css>; rel=preload" : " Continue") + "\r\n\r\n";
        co_await asio::async_write(s, asio::buffer(head), asio::redirect_error(asio::use_awaitable, ec));
        if (ec) co_return;
      }
      std::string_view path = PathOf(req.target());
      bool ok = true;
      if (path == "/cut_header" || path == "/cut_body") {
        co_await Cut(s, req);
        ++cancels_;
        co_return;
      }
      if (path == "/stream") {
        ok = co_await Stream(s, req);
      } else if (path == "/big") {
        size_t n = std::stoull("0" + QueryParam(req.target(), "bytes"));
        http::response<http::string_body> res{http::status::ok, 11};
        res.set(http::field::content_type, "application/octet-stream");
        res.body().resize(n);
        for (size_t i = 0; i < n; ++i) res.body()[i] = PatternByte(i);
        res.keep_alive(req.keep_alive());
        res.prepare_payload();
        co_await http::async_write(s, res, asio::redirect_error(asio::use_awaitable, ec));
        ok = !ec;
      } else {
        if (path == "/sleep") co_await Sleep(std::stoi("0" + QueryParam(req.target(), "ms")));
        if (path == "/gate") {
          const int n = std::stoi("0" + QueryParam(req.target(), "n"));
          ++gate_arrivals_;
          for (int waited = 0; gate_arrivals_.load() < n && waited < 30000; waited += 2) co_await Sleep(2);
        }
        nlohmann::json j = {{"role", seen.role},
                            {"id", seen.id},
                            {"method", seen.method},
                            {"target", seen.target},
                            {"body_bytes", seen.body_bytes},
                            {"body_hash", seen.body_hash}};
        http::response<http::string_body> res{http::status::ok, 11};
        res.set(http::field::content_type, "application/json");
        res.set("X-Upstream-Port", std::to_string(port_));
        res.body() = j.dump();
        res.keep_alive(req.keep_alive());
        res.prepare_payload();
        co_await http::async_write(s, res, asio::redirect_error(asio::use_awaitable, ec));
        ok = !ec;
      }
      if (!ok) {
        ++cancels_;
        co_return;
      }
      ++completed_;
      if (behavior_.close_after_reply || !req.keep_alive()) {
        s.socket().shutdown(tcp::socket::shutdown_both, ec);
        co_return;
      }
    }
  }

  // A reply broken off: /cut_header sends part of a header, waits for the
  // peer to have read it, and resets the connection (an error the mirror
  // would take for a stale connection, were it not for the bytes before it);
  // /cut_body sends a whole header and half the body it announces, then closes.
  asio::awaitable<void> Cut(beast::tcp_stream& s, const http::request<http::string_body>& req) {
    beast::error_code ec;
    std::string out;
    if (PathOf(req.target()) == "/cut_header") {
      out = "HTTP/1.1 200 OK\r\nContent-Type: appl";
    } else {
      size_t n = std::stoull("0" + QueryParam(req.target(), "bytes"));
      out = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " + std::to_string(2 * n) +
            "\r\n\r\n";
      for (size_t i = 0; i < n; ++i) out += PatternByte(i);
    }
    co_await asio::async_write(s, asio::buffer(out), asio::redirect_error(asio::use_awaitable, ec));
    co_await Sleep(50);
    if (PathOf(req.target()) == "/cut_header") s.socket().set_option(asio::socket_base::linger(true, 0), ec);
    s.socket().close(ec);
  }

  // Returns false if the peer went away before the stream ended.
  asio::awaitable<bool> Stream(beast::tcp_stream& s, const http::request<http::string_body>& req) {
    int n = std::stoi("0" + QueryParam(req.target(), "n"));
    int gap = std::stoi("0" + QueryParam(req.target(), "gap_ms"));
    http::response<http::empty_body> res{http::status::ok, 11};
    res.set(http::field::content_type, "text/event-stream");
    res.set(http::field::cache_control, "no-cache");
    res.chunked(true);
    res.keep_alive(req.keep_alive());
    http::response_serializer<http::empty_body> sr{res};
    beast::error_code ec;
    co_await http::async_write_header(s, sr, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return false;
    for (int i = 0; i <= n; ++i) {
      if (i > 0) co_await Sleep(gap);
      std::string event = i < n ? "data: " + std::to_string(i) + "\n\n" : "data: [DONE]\n\n";
      co_await asio::async_write(s, http::make_chunk(asio::buffer(event)),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return false;
    }
    co_await asio::async_write(s, http::make_chunk_last(), asio::redirect_error(asio::use_awaitable, ec));
    co_return !ec;
  }

  static constexpr const char* kRequestId = "X-Request-Id";
  UpstreamBehavior behavior_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::vector<std::thread> threads_;
  std::atomic<int> delay_ms_{0}, connections_{0}, cancels_{0}, completed_{0};
  std::atomic<int> gate_arrivals_{0};  // requests to /gate so far
  mutable std::mutex mu_;
  std::vector<SeenRequest> seen_;  // every request read, in arrival order; its size is requests()
};

// A free port with nothing listening on it (bound, then closed).
inline uint16_t ClosedPort() {
  asio::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  uint16_t port = a.local_endpoint().port();
  a.close();
  return port;
}

struct ClientResponse {
  int status = 0;  // 0: no response (error set)
  std::string body;
  http::fields headers;
  std::string error;
  double ms = 0;  // from sending to the last byte
};

// A blocking keep-alive HTTP client on one connection.
class TestClient {
 public:
  explicit TestClient(uint16_t port) : stream_(ioc_), port_(port) {}
  bool Connect() {
    beast::error_code ec;
    stream_.expires_after(std::chrono::seconds(5));
    stream_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
    if (!ec) stream_.socket().set_option(tcp::no_delay(true), ec);
    return !ec;
  }
  ClientResponse Request(http::verb method, const std::string& target, const std::string& body = "",
                         const std::vector<std::pair<std::string, std::string>>& headers = {},
                         std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    ClientResponse out;
    if (!stream_.socket().is_open() && !Connect()) {
      out.error = "connect failed";
      return out;
    }
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    for (auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    if (!body.empty() || method == http::verb::post) req.prepare_payload();
    auto t0 = std::chrono::steady_clock::now();
    beast::error_code ec;
    stream_.expires_after(timeout);
    http::write(stream_, req, ec);
    if (ec) {
      out.error = "write: " + ec.message();
      Close();
      return out;
    }
    http::response_parser<http::string_body> p;
    p.body_limit(512u << 20);
    http::read(stream_, buf_, p, ec);
    out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (ec) {
      out.error = "read: " + ec.message();
      Close();
      return out;
    }
    out.status = p.get().result_int();
    out.body = p.get().body();
    out.headers = p.get().base();
    if (!p.get().keep_alive()) Close();
    return out;
  }
  // Writes raw bytes (for malformed requests) and reads one response.
  ClientResponse Raw(const std::string& bytes) {
    ClientResponse out;
    if (!stream_.socket().is_open() && !Connect()) {
      out.error = "connect failed";
      return out;
    }
    beast::error_code ec;
    stream_.expires_after(std::chrono::seconds(10));
    asio::write(stream_, asio::buffer(bytes), ec);
    http::response_parser<http::string_body> p;
    http::read(stream_, buf_, p, ec);
    if (ec) {
      out.error = "read: " + ec.message();
      return out;
    }
    out.status = p.get().result_int();
    out.body = p.get().body();
    out.headers = p.get().base();
    return out;
  }
  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    buf_.clear();
  }
  beast::tcp_stream& stream() { return stream_; }
  beast::flat_buffer& buffer() { return buf_; }

 private:
  asio::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buf_;
  uint16_t port_;
};

}  // namespace twinscope::mirror::testing
