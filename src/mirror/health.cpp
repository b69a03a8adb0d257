// GET /health, answered by the mirror itself: a connect probe of each upstream, and the counters.
#include <memory>
#include <string>
#include <vector>

#include "mirror/mirror_impl.h"

namespace twinscope::mirror {

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

}  // namespace twinscope::mirror
