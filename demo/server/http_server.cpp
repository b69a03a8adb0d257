// The demo server's HTTP API (http_server.h).
//
// How a request's handler learns of new tokens: the serving loop calls the
// Sequence's waker, which posts a cancel of the handler's timer to the I/O
// thread. A cancel that finds no wait pending is lost, so the handler reads
// the Sequence again after every suspension (a wake-up, a write) and waits
// only right after a read that found nothing new; with one I/O thread the
// posted cancel cannot run between that read and the wait.
//
// How a client that goes away is noticed while its reply waits for tokens: a
// read is kept pending on its socket (a client sends nothing while it waits
// for its reply, so the read completes only when it closes or pipelines the
// next request, whose bytes are kept). A primary then drops the request.
#include "server/http_server.h"

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "base/ascii.h"
#include "net/beast.h"
#include "server/protocol.h"
#include "server/text.h"

namespace twinscope::demo {
namespace {

using asio::awaitable;
using asio::use_awaitable;
using Clock = std::chrono::steady_clock;

constexpr auto kSchedulePoll = std::chrono::milliseconds(5);
constexpr size_t kScheduleMaxLines = 10000;

std::string_view PathOf(std::string_view target) { return target.substr(0, target.find('?')); }

// The value of `key` in the target's query ("" when absent; `*present` says which).
std::string QueryParam(std::string_view target, std::string_view key, bool* present) {
  *present = false;
  size_t q = target.find('?');
  if (q == std::string_view::npos) return "";
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view kv = rest.substr(0, amp);
    size_t eq = kv.find('=');
    if (kv.substr(0, eq) == key) {
      *present = true;
      return eq == std::string_view::npos ? "" : std::string(kv.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return "";
}

bool ParseU64(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

bool IsMalformedRequest(const beast::error_code& ec) {
  static const auto& http_category = http::make_error_code(http::error::bad_method).category();
  return ec.category() == http_category && ec != http::error::end_of_stream && ec != http::error::partial_message &&
         ec != http::error::need_buffer && ec != http::error::need_more;
}

const char* ErrorType(int status) {
  if (status == 404) return "not_found_error";
  if (status == 405) return "method_not_allowed";
  if (status == 409) return "conflict_error";
  if (status == 413 || status == 431) return "request_too_large";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

// What a chat handler waits on: its Sequence's wake-ups and the client watcher.
struct Waiter {
  explicit Waiter(asio::any_io_executor ex) : timer(ex) {}
  asio::steady_timer timer;
  bool watch_done = false;  // the watcher's read has completed
  bool gone = false;        // ... because the client closed or reset
  size_t early_bytes = 0;   // bytes of a pipelined request, kept in `early`
  std::array<char, 4096> early;

  awaitable<void> Wait() {
    timer.expires_at(asio::steady_timer::time_point::max());
    beast::error_code ec;
    co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
  }
};

// Lets the serving loop post wake-ups to the I/O thread only while the
// io_context exists: Stop() closes it before the io_context goes.
struct PostGate {
  std::mutex mu;
  asio::io_context* ioc = nullptr;
  template <typename Fn>
  void Post(Fn&& fn) {
    std::lock_guard<std::mutex> lock(mu);
    if (ioc) asio::post(*ioc, std::forward<Fn>(fn));
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu);
    ioc = nullptr;
  }
};

}  // namespace

class HttpServer::Impl {
 public:
  Impl(HttpOptions o, ServingCore& core) : opt_(std::move(o)), core_(core), acceptor_(ioc_) { gate_->ioc = &ioc_; }
  ~Impl() { Stop(); }

  Status Start();
  void Shutdown(bool now);
  void Wait();
  bool WaitFor(std::chrono::milliseconds timeout);
  void Stop();

  HttpOptions opt_;
  ServingCore& core_;
  asio::io_context ioc_{1};
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::string address_;
  bool loopback_ = true;
  int64_t created_ = 0;
  std::atomic<uint64_t> schedule_requests_{0};
  std::atomic<bool> schedule_end_served_{false};
  std::atomic<int> schedule_inflight_{0};
  std::atomic<int64_t> schedule_last_ns_{0};

 private:
  using Response = http::response<http::string_body>;

  awaitable<void> AcceptLoop();
  awaitable<void> Session(tcp::socket socket);
  awaitable<bool> Handle(beast::tcp_stream& s, beast::flat_buffer& buf, http::request<http::string_body>& req);
  awaitable<bool> Chat(beast::tcp_stream& s, beast::flat_buffer& buf, http::request<http::string_body>& req,
                       bool keep_alive);
  awaitable<bool> StreamReply(beast::tcp_stream& s, unsigned version, bool keep_alive, const std::string& id,
                              Sequence& seq, Waiter& w, const CompletionMeta& meta, bool include_usage);
  awaitable<bool> WholeReply(beast::tcp_stream& s, unsigned version, bool keep_alive, const std::string& id,
                             Sequence& seq, Waiter& w, const CompletionMeta& meta);
  awaitable<bool> Schedule(beast::tcp_stream& s, const http::request<http::string_body>& req, bool keep_alive);
  awaitable<bool> Send(beast::tcp_stream& s, Response res);
  awaitable<bool> SendError(beast::tcp_stream& s, int status, std::string_view message, unsigned version,
                            bool keep_alive, std::string_view id = "", std::string_view allow = "");
  awaitable<void> LingeringClose(beast::tcp_stream& s);
  Response MakeResponse(int status, std::string body, std::string_view content_type, unsigned version, bool keep_alive,
                        std::string_view id = "");

  bool shutting() const { return shutting_.load(std::memory_order_acquire); }

  std::shared_ptr<PostGate> gate_ = std::make_shared<PostGate>();
  std::thread thread_;
  std::atomic<bool> shutting_{false}, hard_{false}, stopped_{false};
  std::atomic<int> connections_{0};
  std::atomic<uint64_t> next_id_{0};
  std::unordered_set<beast::tcp_stream*> idle_;  // I/O thread only: waiting for their next request
  std::unordered_set<beast::tcp_stream*> all_;   // I/O thread only
  std::mutex mu_;
  std::condition_variable cv_;
};

// ---- Start / stop ---------------------------------------------------------------

Status HttpServer::Impl::Start() {
  beast::error_code ec;
  std::string host = opt_.host == "localhost" ? "127.0.0.1" : opt_.host;
  auto address = asio::ip::make_address(host, ec);
  if (ec) return Status::Error("--host " + opt_.host + ": not a numeric address (" + ec.message() + ")");
  tcp::endpoint ep(address, opt_.port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Error("cannot listen on " + host + ":" + std::to_string(opt_.port) + ": " + ec.message() +
                         (opt_.port ? " (is another server on that port? --port 0 picks a free one)" : ""));
  }
  port_ = acceptor_.local_endpoint().port();
  loopback_ = address.is_loopback();
  address_ = (address.is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(port_);
  created_ = UnixMicrosNow() / 1000000;
  asio::co_spawn(ioc_, AcceptLoop(), asio::detached);
  thread_ = std::thread([this] {
    for (;;) {
      try {
        ioc_.run();
        return;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "twinscope-demo-server: internal error on the HTTP thread: %s (continuing)\n", e.what());
      }
    }
  });
  return Status::Ok();
}

void HttpServer::Impl::Shutdown(bool now) {
  if (now) hard_ = true;
  shutting_.store(true, std::memory_order_release);
  asio::post(ioc_, [this, now] {
    beast::error_code ec;
    acceptor_.close(ec);
    for (auto* s : now ? all_ : idle_) s->socket().cancel(ec);
    if (now) {
      for (auto* s : all_) s->socket().close(ec);
    }
  });
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
}

void HttpServer::Impl::Wait() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return shutting() && (connections_.load() == 0 || hard_.load()); });
  }
  Stop();
}

bool HttpServer::Impl::WaitFor(std::chrono::milliseconds timeout) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [this] { return shutting() && (connections_.load() == 0 || hard_.load()); })) {
      return false;
    }
  }
  Stop();
  return true;
}

void HttpServer::Impl::Stop() {
  if (stopped_.exchange(true)) return;
  gate_->Close();
  ioc_.stop();
  if (thread_.joinable()) thread_.join();
}

// ---- Connections --------------------------------------------------------------------

awaitable<void> HttpServer::Impl::AcceptLoop() {
  for (;;) {
    beast::error_code ec;
    tcp::socket socket = co_await acceptor_.async_accept(asio::redirect_error(use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open() || shutting()) co_return;
      asio::steady_timer t(ioc_, std::chrono::milliseconds(20));  // out of descriptors or similar: back off
      co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
      continue;
    }
    connections_.fetch_add(1);
    asio::co_spawn(ioc_, Session(std::move(socket)), asio::detached);
  }
}

awaitable<void> HttpServer::Impl::Session(tcp::socket socket) {
  struct Hold {  // counts the connection until this frame goes, however it ends
    Impl& impl;
    beast::tcp_stream* stream;
    ~Hold() {
      impl.idle_.erase(stream);
      impl.all_.erase(stream);
      if (impl.connections_.fetch_sub(1) == 1) {
        std::lock_guard<std::mutex> lock(impl.mu_);
        impl.cv_.notify_all();
      }
    }
  };
  beast::tcp_stream stream(std::move(socket));
  Hold hold{*this, &stream};
  all_.insert(&stream);
  try {
    beast::error_code ec;
    stream.socket().set_option(tcp::no_delay(true), ec);
    beast::flat_buffer buf(opt_.max_header_bytes + 64 * 1024);
    bool first = true;
    bool linger = false;
    while (!shutting()) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<uint32_t>(std::min<size_t>(opt_.max_header_bytes, UINT32_MAX)));
      parser.body_limit(opt_.max_body_bytes);
      stream.expires_after(first ? opt_.client_timeout : opt_.keepalive_timeout);
      idle_.insert(&stream);
      co_await http::async_read_header(stream, buf, parser, asio::redirect_error(use_awaitable, ec));
      idle_.erase(&stream);
      if (!ec && !parser.is_done()) {
        if (AsciiIEquals(parser.get()[http::field::expect], "100-continue")) {
          static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
          stream.expires_after(opt_.client_timeout);
          co_await asio::async_write(stream, asio::buffer(kContinue.data(), kContinue.size()),
                                     asio::redirect_error(use_awaitable, ec));
        }
        if (!ec) {
          stream.expires_after(opt_.client_timeout);
          co_await http::async_read(stream, buf, parser, asio::redirect_error(use_awaitable, ec));
        }
      }
      if (ec) {
        // Answer what can be answered; a closed, timed-out or cancelled connection just ends.
        if (ec == http::error::header_limit) {
          co_await SendError(
              stream, 431, "request header larger than " + std::to_string(opt_.max_header_bytes) + " bytes", 11, false);
          linger = true;
        } else if (ec == http::error::body_limit) {
          co_await SendError(stream, 413, "request body larger than " + std::to_string(opt_.max_body_bytes) + " bytes",
                             11, false);
          linger = true;
        } else if (IsMalformedRequest(ec)) {
          co_await SendError(stream, 400, "malformed HTTP request: " + ec.message(), 11, false);
          linger = true;
        }
        break;
      }
      first = false;
      auto req = parser.release();
      if (!co_await Handle(stream, buf, req)) break;
    }
    if (linger) {
      co_await LingeringClose(stream);
    } else {
      stream.socket().shutdown(tcp::socket::shutdown_send, ec);
      stream.close();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twinscope-demo-server: internal error serving a connection: %s (closed)\n", e.what());
  }
}

// Half-closes and reads what the client still sends (up to 1 MiB or 1 s), so
// an error sent before its body was read is not lost to a TCP reset.
awaitable<void> HttpServer::Impl::LingeringClose(beast::tcp_stream& s) {
  beast::error_code ec;
  s.socket().shutdown(tcp::socket::shutdown_send, ec);
  std::array<char, 16384> sink;
  size_t total = 0;
  s.expires_after(std::chrono::seconds(1));
  while (!ec && total < (1u << 20)) {
    total += co_await s.async_read_some(asio::buffer(sink), asio::redirect_error(use_awaitable, ec));
  }
  s.close();
}

HttpServer::Impl::Response HttpServer::Impl::MakeResponse(int status, std::string body, std::string_view content_type,
                                                          unsigned version, bool keep_alive, std::string_view id) {
  Response res{static_cast<http::status>(status), version == 10 ? 10u : 11u};
  res.set(http::field::server, "twinscope-demo-server");
  res.set(http::field::content_type, content_type);
  res.set(http::field::cache_control, "no-store");
  if (!id.empty()) res.set("X-Request-Id", id);
  res.body() = std::move(body);
  res.keep_alive(keep_alive && !shutting());
  res.prepare_payload();
  return res;
}

awaitable<bool> HttpServer::Impl::Send(beast::tcp_stream& s, Response res) {
  beast::error_code ec;
  const bool keep = res.keep_alive();
  s.expires_after(opt_.client_timeout);
  co_await http::async_write(s, res, asio::redirect_error(use_awaitable, ec));
  co_return !ec && keep;
}

awaitable<bool> HttpServer::Impl::SendError(beast::tcp_stream& s, int status, std::string_view message,
                                            unsigned version, bool keep_alive, std::string_view id,
                                            std::string_view allow) {
  auto res =
      MakeResponse(status, ErrorBody(status, message, ErrorType(status)), "application/json", version, keep_alive, id);
  if (!allow.empty()) res.set(http::field::allow, allow);
  co_return co_await Send(s, std::move(res));
}

// ---- Routes ---------------------------------------------------------------------------

awaitable<bool> HttpServer::Impl::Handle(beast::tcp_stream& s, beast::flat_buffer& buf,
                                         http::request<http::string_body>& req) {
  const bool keep = req.keep_alive() && !shutting();
  const unsigned v = req.version();
  const std::string_view path = PathOf(req.target());
  const auto method = req.method();
  auto wrong_method = [&](std::string_view allow) -> awaitable<bool> {
    co_return co_await SendError(s, 405,
                                 std::string(req.method_string()) + " is not allowed on " + std::string(path) +
                                     " (use " + std::string(allow) + ")",
                                 v, keep, "", allow);
  };
  if (path == "/health") {
    if (method != http::verb::get) co_return co_await wrong_method("GET");
    nlohmann::json h = core_.Health();
    h["listen"] = address_;
    co_return co_await Send(s,
                            MakeResponse(core_.healthy() ? 200 : 503, h.dump(2) + "\n", "application/json", v, keep));
  }
  if (path == "/v1/models") {
    if (method != http::verb::get) co_return co_await wrong_method("GET");
    const EngineInfo& e = core_.engine_info();
    nlohmann::json extra = {{"max_model_len", e.max_model_len},
                            {"vocab_size", e.model.vocab},
                            {"seed", core_.options().seed},
                            {"engine", e.kind},
                            {"model_shape", e.model.ToJson()}};
    co_return co_await Send(
        s, MakeResponse(200, ModelsBody(core_.options().served_model, created_, extra), "application/json", v, keep));
  }
  if (path == "/v1/chat/completions") {
    if (method != http::verb::post) co_return co_await wrong_method("POST");
    co_return co_await Chat(s, buf, req, keep);
  }
  if (path == "/v1/schedule") {
    if (method != http::verb::get) co_return co_await wrong_method("GET");
    co_return co_await Schedule(s, req, keep);
  }
  co_return co_await SendError(s, 404,
                               "no such endpoint: " + std::string(path) +
                                   " (this server has /v1/chat/completions, /v1/models, /health, /v1/schedule)",
                               v, keep);
}

awaitable<bool> HttpServer::Impl::Chat(beast::tcp_stream& s, beast::flat_buffer& buf,
                                       http::request<http::string_body>& req, bool keep_alive) {
  const unsigned v = req.version();
  std::string id;
  bool id_generated = false;
  if (auto h = req.find("X-Request-Id"); h != req.end()) {
    id = std::string(h->value());
    if (!IsValidRequestId(id)) {
      co_return co_await SendError(s, 400, "X-Request-Id must be 1 to 128 visible ASCII characters", v, keep_alive);
    }
  } else {
    id = "req-" + std::to_string(next_id_.fetch_add(1) + 1);
    id_generated = true;
  }
  auto parsed = ParseChatRequest(req.body());
  if (!parsed.ok()) {
    core_.TraceRejected(id, id_generated, 400, parsed.status().message());
    co_return co_await SendError(s, 400, parsed.status().message(), v, keep_alive, id);
  }
  const EngineInfo& info = core_.engine_info();
  SubmitRequest sr;
  sr.id = id;
  sr.id_generated = id_generated;
  sr.prompt = TokenizeChat(parsed->messages, info.model.vocab);
  sr.max_tokens = core_.MaxTokens(parsed->max_tokens);
  sr.sample_seed = RequestSampleSeed(parsed->seed.value_or(core_.options().seed), sr.prompt);
  SubmitResult submitted = core_.Submit(std::move(sr));
  if (!submitted.seq) {
    if (submitted.status == 400) core_.TraceRejected(id, id_generated, 400, submitted.error);
    co_return co_await SendError(s, submitted.status, submitted.error, v, keep_alive, id);
  }
  std::shared_ptr<Sequence> seq = submitted.seq;

  auto w = std::make_shared<Waiter>(co_await asio::this_coro::executor);
  seq->SetWaker([gate = gate_, weak = std::weak_ptr<Waiter>(w)] {
    gate->Post([weak] {
      if (auto p = weak.lock()) p->timer.cancel();
    });
  });
  struct Detach {  // however this frame ends (also destroyed at a hard stop)
    Sequence& seq;
    ~Detach() { seq.SetWaker(nullptr); }
  } detach{*seq};
  s.expires_never();
  s.socket().async_read_some(asio::buffer(w->early), [w](beast::error_code ec, size_t n) {
    w->watch_done = true;
    if (!ec && n > 0) {
      w->early_bytes = n;
    } else if (ec != asio::error::operation_aborted) {
      w->gone = true;
    }
    w->timer.cancel();
  });

  CompletionMeta meta{"chatcmpl-" + id, core_.options().served_model, UnixMicrosNow() / 1000000};
  bool ok;
  if (parsed->stream) {
    ok = co_await StreamReply(s, v, keep_alive, id, *seq, *w, meta, parsed->include_usage);
  } else {
    ok = co_await WholeReply(s, v, keep_alive, id, *seq, *w, meta);
  }
  if (!ok && !seq->Read(SIZE_MAX).done) core_.Cancel(seq);
  if (!w->watch_done) {
    beast::error_code ec;
    s.socket().cancel(ec);
    while (!w->watch_done) co_await w->Wait();
  }
  if (w->gone || !ok) co_return false;
  if (w->early_bytes > 0) {
    auto space = buf.prepare(w->early_bytes);
    asio::buffer_copy(space, asio::buffer(w->early.data(), w->early_bytes));
    buf.commit(w->early_bytes);
  }
  co_return keep_alive && !shutting();
}

awaitable<bool> HttpServer::Impl::StreamReply(beast::tcp_stream& s, unsigned version, bool keep_alive,
                                              const std::string& id, Sequence& seq, Waiter& w,
                                              const CompletionMeta& meta, bool include_usage) {
  http::response<http::empty_body> res{http::status::ok, version == 10 ? 10u : 11u};
  res.set(http::field::server, "twinscope-demo-server");
  res.set(http::field::content_type, "text/event-stream");
  res.set(http::field::cache_control, "no-cache");
  res.set("X-Request-Id", id);
  res.keep_alive(keep_alive && version != 10);
  res.chunked(version != 10);
  http::response_serializer<http::empty_body> sr{res};
  beast::error_code ec;
  s.expires_after(opt_.client_timeout);
  co_await http::async_write_header(s, sr, asio::redirect_error(use_awaitable, ec));
  if (ec) co_return false;
  const bool chunked = version != 10;
  std::string out = ChunkEvent(meta, "", true, "");
  Detokenizer detok;
  size_t sent = 0;
  for (;;) {
    if (w.gone || hard_) co_return false;
    Sequence::View view = seq.Read(sent);
    for (int32_t t : view.tokens) out += ChunkEvent(meta, detok.Next(t), false, "");
    sent += view.tokens.size();
    if (view.done) {
      if (view.error_status) {
        std::string body = ErrorBody(view.error_status, view.error, ErrorType(view.error_status));
        while (!body.empty() && body.back() == '\n') body.pop_back();
        out += "data: " + body + "\n\n";
      } else {
        out += ChunkEvent(meta, "", false, view.finish_reason);
        if (include_usage) out += UsageEvent(meta, seq.prompt_tokens, static_cast<int>(sent));
      }
      out += kDoneEvent;
    }
    if (!out.empty()) {
      s.expires_after(opt_.client_timeout);
      if (chunked) {
        co_await asio::async_write(s, http::make_chunk(asio::buffer(out)), asio::redirect_error(use_awaitable, ec));
      } else {
        co_await asio::async_write(s, asio::buffer(out), asio::redirect_error(use_awaitable, ec));
      }
      if (ec) co_return false;
      out.clear();
      // The Sequence may have changed while we wrote (its wake-up found no wait to
      // cancel): read it again before waiting.
      if (!view.done) continue;
    }
    if (view.done) {
      if (!chunked) co_return false;  // HTTP/1.0: the end of the reply is the end of the connection
      co_await asio::async_write(s, http::make_chunk_last(), asio::redirect_error(use_awaitable, ec));
      co_return !ec;
    }
    co_await w.Wait();
  }
}

awaitable<bool> HttpServer::Impl::WholeReply(beast::tcp_stream& s, unsigned version, bool keep_alive,
                                             const std::string& id, Sequence& seq, Waiter& w,
                                             const CompletionMeta& meta) {
  Sequence::View view;
  for (;;) {
    if (w.gone || hard_) co_return false;
    view = seq.Read(0);
    if (view.done) break;
    co_await w.Wait();
  }
  if (view.error_status) co_return co_await SendError(s, view.error_status, view.error, version, keep_alive, id);
  Detokenizer detok;
  std::string content;
  for (int32_t t : view.tokens) content += detok.Next(t);
  co_return co_await Send(s, MakeResponse(200,
                                          CompletionBody(meta, content, view.finish_reason, seq.prompt_tokens,
                                                         static_cast<int>(view.tokens.size())),
                                          "application/json", version, keep_alive, id));
}

awaitable<bool> HttpServer::Impl::Schedule(beast::tcp_stream& s, const http::request<http::string_body>& req,
                                           bool keep_alive) {
  ++schedule_requests_;
  struct InFlight {  // for schedule_polled_recently()
    Impl& impl;
    explicit InFlight(Impl& i) : impl(i) { ++impl.schedule_inflight_; }
    ~InFlight() {
      impl.schedule_last_ns_ = Clock::now().time_since_epoch().count();
      --impl.schedule_inflight_;
    }
  } inflight(*this);
  const unsigned v = req.version();
  uint64_t from = 0, wait_ms = 0, max = kScheduleMaxLines;
  for (auto [key, out] : {std::pair{"from", &from}, {"wait_ms", &wait_ms}, {"max", &max}}) {
    bool present = false;
    std::string value = QueryParam(req.target(), key, &present);
    if (present && !ParseU64(value, out)) {
      co_return co_await SendError(s, 400, std::string("'") + key + "' must be a non-negative integer", v, keep_alive);
    }
  }
  max = std::clamp<uint64_t>(max, 1, kScheduleMaxLines);
  const auto deadline =
      Clock::now() + std::min(std::chrono::milliseconds(std::min<uint64_t>(wait_ms, 1u << 30)), opt_.schedule_max_wait);
  ScheduleLog::Slice slice;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    slice = core_.schedule().Read(from, static_cast<size_t>(max));
    if (slice.gone) {
      co_return co_await SendError(s, 410,
                                   "step " + std::to_string(from) + " is no longer held here (the oldest held is " +
                                       std::to_string(slice.oldest) + "); a follower must start with the primary",
                                   v, keep_alive);
    }
    if (!slice.steps.empty() || slice.ended || Clock::now() >= deadline || shutting()) break;
    timer.expires_after(kSchedulePoll);
    beast::error_code ec;
    co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
  }
  std::string body = slice.header + "\n";
  for (const auto& line : slice.steps) body += line + "\n";
  if (slice.ended) {
    body += slice.end_line + "\n";
    schedule_end_served_ = true;
  }
  auto res = MakeResponse(200, std::move(body), "application/x-ndjson", v, keep_alive);
  res.set("X-Schedule-Next", std::to_string(slice.next));
  res.set("X-Schedule-Ended", slice.ended ? "1" : "0");
  co_return co_await Send(s, std::move(res));
}

// ---- HttpServer -----------------------------------------------------------------------

HttpServer::HttpServer(HttpOptions options, ServingCore& core)
    : impl_(std::make_unique<Impl>(std::move(options), core)) {}
HttpServer::~HttpServer() {
  impl_->Shutdown(true);
  impl_->Stop();
}
Status HttpServer::Start() { return impl_->Start(); }
uint16_t HttpServer::port() const { return impl_->port_; }
std::string HttpServer::address() const { return impl_->address_; }
bool HttpServer::loopback_only() const { return impl_->loopback_; }
void HttpServer::Shutdown() { impl_->Shutdown(false); }
void HttpServer::ShutdownNow() { impl_->Shutdown(true); }
void HttpServer::Wait() { impl_->Wait(); }
bool HttpServer::WaitFor(std::chrono::milliseconds timeout) { return impl_->WaitFor(timeout); }
uint64_t HttpServer::schedule_requests() const { return impl_->schedule_requests_.load(); }
bool HttpServer::schedule_end_served() const { return impl_->schedule_end_served_.load(); }
bool HttpServer::schedule_polled_recently(std::chrono::milliseconds window) const {
  if (impl_->schedule_inflight_.load() > 0) return true;
  const int64_t last = impl_->schedule_last_ns_.load();
  return last != 0 &&
         Clock::now().time_since_epoch().count() - last < std::chrono::duration_cast<Clock::duration>(window).count();
}

}  // namespace twinscope::demo
