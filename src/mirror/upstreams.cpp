// One forwarded request: the shadow's copy, and the primary's reply relayed to the client as it arrives.
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
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "mirror/forward.h"
#include "mirror/mirror_impl.h"

namespace twinscope::mirror {
namespace {

// Reads an upstream's response header into a fresh `p`. Interim 1xx replies
// are skipped (101 is relayed as a final reply). `*got_some` is set once any
// byte of a response has come back (a reused connection is retried only if
// none has). The body, if any, is left for the caller to read.
awaitable<beast::error_code> ReadFinalHeader(beast::tcp_stream& up, beast::flat_buffer& buf,
                                             std::optional<http::response_parser<http::buffer_body>>& p, bool head,
                                             size_t max_header_bytes, bool* got_some) {
  beast::error_code ec;
  for (;;) {
    p.emplace();
    p->header_limit(static_cast<uint32_t>(std::min<size_t>(max_header_bytes, UINT32_MAX)));
    p->body_limit(std::numeric_limits<std::uint64_t>::max());
    if (head) p->skip(true);
    co_await http::async_read_header(up, buf, *p, asio::redirect_error(use_awaitable, ec));
    *got_some = *got_some || p->got_some();
    if (ec || p->get().result_int() / 100 != 1 || p->get().result_int() == 101) co_return ec;
  }
}

// An upstream exchange that broke off after `ec`: the leg is "timeout" or
// "failed", and counted as such.
void MarkBroken(LegTrace& leg, const beast::error_code& ec, std::atomic<uint64_t>& timeouts,
                std::atomic<uint64_t>& failed) {
  if (ec == beast::error::timeout) {
    leg.state = "timeout";
    Bump(timeouts);
  } else {
    leg.state = "failed";
    Bump(failed);
  }
}

}  // namespace

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
    // A retry goes out on a new connection: another pooled one may have been
    // closed by the server at the same moment as the first.
    up = attempt == 0 ? w.primary_pool.Take(opt_.upstream_idle) : nullptr;
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
      ec = co_await ReadFinalHeader(*up, upbuf, p, req.method() == http::verb::head, opt_.max_header_bytes, &got_some);
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
  trace->streamed = !header_only && (p->chunked() || !p->content_length().has_value());
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
    MarkBroken(leg, upstream_ec, c_.primary_timeouts, c_.primary_failed);
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
    MarkBroken(leg, ec, c_.shadow_timeouts, c_.shadow_failed);
  };
  try {
    const auto deadline = Clock::now() + opt_.shadow_timeout;
    std::unique_ptr<beast::tcp_stream> up;
    beast::flat_buffer buf(opt_.max_header_bytes + 128 * 1024);
    std::optional<http::response_parser<http::buffer_body>> p;
    beast::error_code ec;
    for (int attempt = 0;; ++attempt) {
      up = attempt == 0 ? w.shadow_pool.Take(opt_.upstream_idle) : nullptr;  // a retry: a new connection
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
        ec = co_await ReadFinalHeader(*up, buf, p, req->method() == http::verb::head, opt_.max_header_bytes, &got_some);
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

}  // namespace twinscope::mirror
