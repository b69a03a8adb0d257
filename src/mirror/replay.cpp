// Replays a mirror request log to one server: a coroutine per request on one io_context.
#include "mirror/replay.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "mirror/beast.h"
#include "mirror/forward.h"
#include "mirror/request_trace.h"

namespace twinscope::mirror {

size_t RequestLogContents::replayable() const {
  return static_cast<size_t>(
      std::count_if(requests.begin(), requests.end(), [](const LoggedRequest& r) { return r.replayable; }));
}

StatusOr<RequestLogContents> ReadRequestLog(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error("cannot read the request log " + path + ": does the run folder hold requests.jsonl?");
  RequestLogContents out;
  std::map<std::string, std::vector<size_t>> open;  // id -> requests without their end line yet
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("id")) {
      ++out.bad_lines;
      continue;
    }
    try {
      const std::string id = j.value("id", "");
      const std::string type = j.value("type", "end");  // an older log has end lines only, without "type"
      if (type == "request") {
        LoggedRequest q;
        q.id = id;
        q.method = j.value("method", "GET");
        q.path = j.value("path", "/");
        q.arrival_unix_us = j.value("arrival_unix_us", int64_t{0});
        q.replayable = j.value("replayable", false);
        q.not_replayable = j.value("not_replayable", "");
        for (const auto& h : j.value("headers", Json::array()))
          if (h.is_array() && h.size() == 2) q.headers.emplace_back(h[0].get<std::string>(), h[1].get<std::string>());
        if (j.contains("body")) {
          q.body = j["body"].get<std::string>();
        } else if (j.contains("body_base64") && !Base64Decode(j["body_base64"].get<std::string>(), &q.body)) {
          q.replayable = false;
          q.not_replayable = "its body_base64 does not decode";
        }
        open[id].push_back(out.requests.size());
        out.requests.push_back(std::move(q));
        continue;
      }
      auto it = open.find(id);
      if (it == open.end() || it->second.empty()) {
        // An end line alone: an older log, or the request line was lost. Listed, not replayable.
        ++out.end_lines_without_request;
        LoggedRequest q;
        q.id = id;
        q.method = j.value("method", "");
        q.path = j.value("path", "");
        q.arrival_unix_us = j.value("arrival_unix_us", int64_t{0});
        q.not_replayable = "the log has no request line (body, headers) for it: an older log format";
        it = open.emplace(id, std::vector<size_t>{}).first;
        it->second.push_back(out.requests.size());
        out.requests.push_back(std::move(q));
      }
      LoggedRequest& q = out.requests[it->second.front()];
      it->second.erase(it->second.begin());
      q.ended = true;
      q.primary_status = j.value("status", 0);
      q.streamed = j.value("streamed", false);
      q.response_bytes = j.value("response_bytes", uint64_t{0});
      if (j.contains("cancelled_at")) {
        q.cancelled = true;
        q.cancel_bytes = j["cancelled_at"].value("bytes", uint64_t{0});
        q.cancel_us = j["cancelled_at"].value("us", int64_t{-1});
      }
    } catch (const Json::exception&) {
      ++out.bad_lines;
    }
  }
  std::stable_sort(out.requests.begin(), out.requests.end(), [](const LoggedRequest& a, const LoggedRequest& b) {
    return a.arrival_unix_us < b.arrival_unix_us;
  });
  return out;
}

Json ReplayOutcome::ToJson() const {
  Json per = Json::array();
  for (const auto& r : results) {
    Json j = {{"id", r.id}, {"state", r.state}};
    if (r.status) j["status"] = r.status;
    j["bytes"] = r.bytes;
    if (!r.error.empty()) j["error"] = r.error;
    if (r.done_us >= 0) j["done_us"] = r.done_us;
    per.push_back(std::move(j));
  }
  return Json{{"requests", results.size()},       {"ok", ok},
              {"cancelled", cancelled},           {"failed", failed},
              {"not_replayable", not_replayable}, {"not_sent", not_sent},
              {"status_differs", status_differs}, {"aborted", aborted},
              {"elapsed_s", elapsed_s},           {"results", std::move(per)}};
}

namespace {

using asio::awaitable;
using asio::use_awaitable;

struct ReplayState {
  const ReplayOptions& opt;
  tcp::endpoint ep;
  Clock::time_point t0;
  std::set<beast::tcp_stream*> live;
  bool aborted = false;
  size_t sent = 0, ended = 0, failed = 0, pending = 0;
  int64_t Now() const { return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count(); }
};

awaitable<void> ReplayOne(ReplayState& st, const LoggedRequest& q, ReplayResult& r) {
  auto ex = co_await asio::this_coro::executor;
  beast::error_code ec;
  struct Done {  // however this frame ends
    ReplayState& st;
    ReplayResult& r;
    ~Done() {
      --st.pending;
      ++st.ended;
      if (r.state != "ok" && r.state != "cancelled") ++st.failed;
      r.done_us = st.Now();
    }
  } done{st, r};
  if (st.opt.keep_arrival_offsets && q.arrival_unix_us > 0) {
    asio::steady_timer t(ex);
    t.expires_at(st.t0 + std::chrono::microseconds(q.arrival_unix_us));
    while (!st.aborted && Clock::now() < t.expiry()) {
      asio::steady_timer step(ex, std::min<Clock::duration>(t.expiry() - Clock::now(), std::chrono::milliseconds(100)));
      co_await step.async_wait(asio::redirect_error(use_awaitable, ec));
    }
  }
  if (st.aborted) {
    r.state = "not_sent";
    co_return;
  }
  ++st.sent;
  beast::tcp_stream s(ex);
  st.live.insert(&s);
  struct Forget {
    ReplayState& st;
    beast::tcp_stream* s;
    ~Forget() { st.live.erase(s); }
  } forget{st, &s};
  const auto sent_at = Clock::now();
  s.expires_after(st.opt.connect_timeout);
  co_await s.async_connect(st.ep, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    r.state = st.aborted ? "not_sent" : "failed";
    r.error = "connect: " + ec.message();
    co_return;
  }
  http::request<http::string_body> req;
  const http::verb verb = http::string_to_verb(q.method);
  if (verb == http::verb::unknown)
    req.method_string(q.method);
  else
    req.method(verb);
  req.target(q.path);
  req.version(11);
  for (const auto& [name, value] : q.headers) {
    if (value == kRedacted) continue;  // a credential the log does not hold
    req.insert(name, value);
  }
  req.set(http::field::host, st.opt.host + ":" + std::to_string(st.ep.port()));
  req.set(kRequestIdField, q.id);
  req.keep_alive(false);
  req.body() = q.body;
  req.prepare_payload();
  // Cut by time: a client that went away before any reply byte.
  const bool cut_by_time = q.cancelled && q.cancel_bytes == 0 && q.cancel_us >= 0;
  auto deadline = sent_at + st.opt.request_timeout;
  if (cut_by_time) deadline = std::min(deadline, sent_at + std::chrono::microseconds(q.cancel_us));
  s.expires_at(deadline);
  co_await http::async_write(s, req, asio::redirect_error(use_awaitable, ec));
  std::optional<http::response_parser<http::buffer_body>> p;
  beast::flat_buffer buf;
  if (!ec) {
    for (;;) {
      p.emplace();
      p->body_limit(std::numeric_limits<uint64_t>::max());
      if (verb == http::verb::head) p->skip(true);
      co_await http::async_read_header(s, buf, *p, asio::redirect_error(use_awaitable, ec));
      if (ec || p->get().result_int() / 100 != 1) break;
    }
  }
  char chunk[16384];
  bool cut = false;
  if (!ec) {
    r.status = p->get().result_int();
    while (!p->is_done()) {
      p->get().body().data = chunk;
      p->get().body().size = sizeof chunk;
      co_await http::async_read_some(s, buf, *p, asio::redirect_error(use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      r.bytes += sizeof chunk - p->get().body().size;
      if (ec) break;
      if (q.cancelled && q.cancel_bytes > 0 && r.bytes >= q.cancel_bytes && !p->is_done()) {
        cut = true;  // as the original client did
        break;
      }
    }
  }
  if (cut || (cut_by_time && ec == beast::error::timeout)) {
    r.state = "cancelled";
    s.socket().close(ec);
    co_return;
  }
  if (ec) {
    r.state = st.aborted ? "failed" : ec == beast::error::timeout ? "timeout" : "failed";
    r.error = (r.status ? "mid-reply: " : "before the response header: ") + ec.message();
    if (st.aborted) r.error = "the replay was stopped";
    co_return;
  }
  r.state = "ok";
}

awaitable<void> WatchReplay(ReplayState& st, double last_offset_s) {
  auto ex = co_await asio::this_coro::executor;
  auto next_progress = Clock::now() + std::chrono::seconds(1);
  while (st.pending > 0) {
    asio::steady_timer t(ex, std::chrono::milliseconds(50));
    beast::error_code ec;
    co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
    if (!st.aborted && st.opt.abort && st.opt.abort()) {
      st.aborted = true;
      for (auto* s : st.live) s->socket().close(ec);
    }
    if (st.opt.progress && Clock::now() >= next_progress) {
      next_progress += std::chrono::seconds(1);
      ReplayProgress pr;
      pr.total = st.ended + st.pending;
      pr.sent = st.sent;
      pr.ended = st.ended;
      pr.failed = st.failed;
      pr.elapsed_s = std::chrono::duration<double>(Clock::now() - st.t0).count();
      if (st.opt.keep_arrival_offsets && pr.elapsed_s < last_offset_s) {
        pr.eta_s = last_offset_s - pr.elapsed_s;
      } else if (st.ended > 0 && pr.total > 0) {
        pr.eta_s = pr.elapsed_s * static_cast<double>(pr.total - pr.ended) / static_cast<double>(pr.ended);
      }
      st.opt.progress(pr);
    }
  }
}

}  // namespace

ReplayOutcome Replay(const RequestLogContents& log, const ReplayOptions& options) {
  ReplayOutcome out;
  out.results.resize(log.requests.size());
  asio::io_context ioc(1);
  beast::error_code ec;
  ReplayState st{options,
                 tcp::endpoint(asio::ip::make_address(options.host, ec), static_cast<uint16_t>(options.port)),
                 Clock::now(),
                 {}};
  // Offsets from the first request's arrival.
  int64_t first = 0;
  for (const auto& q : log.requests)
    if (q.replayable && q.arrival_unix_us > 0) first = first ? std::min(first, q.arrival_unix_us) : q.arrival_unix_us;
  std::vector<LoggedRequest> shifted;
  shifted.reserve(log.requests.size());
  double last_offset_s = 0;
  for (size_t i = 0; i < log.requests.size(); ++i) {
    const LoggedRequest& q = log.requests[i];
    out.results[i].id = q.id;
    if (!q.replayable) {
      out.results[i].state = "not_replayable";
      out.results[i].error = q.not_replayable;
    }
    shifted.push_back(q);
    shifted.back().arrival_unix_us = q.arrival_unix_us > 0 && first ? q.arrival_unix_us - first : 0;
    last_offset_s = std::max(last_offset_s, static_cast<double>(shifted.back().arrival_unix_us) / 1e6);
  }
  if (ec) {
    for (auto& r : out.results)
      if (r.state.empty()) r.state = "failed", r.error = "bad host " + options.host;
  } else {
    for (size_t i = 0; i < shifted.size(); ++i) {
      if (!shifted[i].replayable) continue;
      ++st.pending;
      asio::co_spawn(ioc, ReplayOne(st, shifted[i], out.results[i]), asio::detached);
    }
    if (st.pending) asio::co_spawn(ioc, WatchReplay(st, last_offset_s), asio::detached);
    ioc.run();
  }
  out.aborted = st.aborted;
  out.elapsed_s = std::chrono::duration<double>(Clock::now() - st.t0).count();
  for (size_t i = 0; i < out.results.size(); ++i) {
    const auto& r = out.results[i];
    if (r.state == "ok")
      ++out.ok;
    else if (r.state == "cancelled")
      ++out.cancelled;
    else if (r.state == "not_replayable")
      ++out.not_replayable;
    else if (r.state == "not_sent")
      ++out.not_sent;
    else
      ++out.failed;
    const auto& q = log.requests[i];
    if (r.state == "ok" && q.ended && q.primary_status && r.status != q.primary_status) ++out.status_differs;
  }
  return out;
}

}  // namespace twinscope::mirror
