// The chat load client (chat_client.h): one coroutine per request on one
// io_context, each with its own connection and deadline.
#include "client/chat_client.h"

#include <algorithm>
#include <cmath>

#include "client/sse.h"
#include "net/beast.h"
#include "net/url.h"

namespace twinscope::demo {
namespace {

using asio::awaitable;
using asio::use_awaitable;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

constexpr size_t kPiece = 16 * 1024;
constexpr size_t kMaxBody = 64u << 20;

double MsSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

std::string ErrorText(const beast::error_code& ec) { return ec == beast::error::timeout ? "timed out" : ec.message(); }

std::string ErrorMessageOf(const Json& j, const std::string& raw) {
  if (j.is_object() && j.contains("error")) {
    const Json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
    if (e.is_string()) return e.get<std::string>();
  }
  return raw.substr(0, 300);
}

// Applies one chat.completion(.chunk) object to the result.
void ApplyChoice(const Json& j, bool stream, ChatResult& r, Clock::time_point sent) {
  if (j.contains("usage") && j["usage"].is_object()) {
    const Json& u = j["usage"];
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
      r.completion_tokens = u["completion_tokens"].get<int>();
    }
  }
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
  const Json& c = j["choices"][0];
  if (!c.is_object()) return;
  if (c.contains("finish_reason") && c["finish_reason"].is_string())
    r.finish_reason = c["finish_reason"].get<std::string>();
  const char* key = stream ? "delta" : "message";
  if (!c.contains(key) || !c[key].is_object()) return;
  const Json& m = c[key];
  if (m.contains("content") && m["content"].is_string()) {
    const std::string piece = m["content"].get<std::string>();
    if (piece.empty()) return;
    r.content += piece;
    ++r.chunks;
    const double t = MsSince(sent);
    r.chunk_ms.push_back(t);
    if (r.ttft_ms < 0) r.ttft_ms = t;
  }
}

awaitable<void> OneRequest(const HttpUrl& url, const ChatLoadOptions& o, int i, ChatResult& r) {
  auto ex = co_await asio::this_coro::executor;
  const auto deadline = Clock::now() + o.timeout;
  const std::string where = url.ToString() + "/v1/chat/completions";
  beast::error_code ec;
  tcp::resolver resolver(ex);
  auto eps =
      co_await resolver.async_resolve(url.host, std::to_string(url.port), asio::redirect_error(use_awaitable, ec));
  if (ec) {
    r.error = "cannot resolve " + url.host + ": " + ec.message();
    co_return;
  }
  beast::tcp_stream s(ex);
  s.expires_at(deadline);
  co_await s.async_connect(eps, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    r.error = "connect to " + url.ToString() + ": " + ErrorText(ec);
    co_return;
  }
  s.socket().set_option(tcp::no_delay(true), ec);

  http::request<http::string_body> req{http::verb::post, url.path + "/v1/chat/completions", 11};
  req.set(http::field::host, url.HostHeader());
  req.set(http::field::user_agent, "twinscope-demo-client");
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, o.stream ? "text/event-stream" : "application/json");
  if (!r.request_id.empty()) req.set("X-Request-Id", r.request_id);
  req.body() = ChatRequestBody(o, i);
  req.keep_alive(false);
  req.prepare_payload();

  const auto sent = Clock::now();
  co_await http::async_write(s, req, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    r.error = "sending to " + where + ": " + ErrorText(ec);
    co_return;
  }
  beast::flat_buffer buf;
  http::response_parser<http::buffer_body> p;
  p.body_limit(std::numeric_limits<uint64_t>::max());
  co_await http::async_read_header(s, buf, p, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    r.error = "no reply header from " + where + ": " + ErrorText(ec);
    co_return;
  }
  r.status = p.get().result_int();
  if (auto h = p.get().find("X-Request-Id"); h != p.get().end() && r.request_id.empty()) {
    r.request_id = std::string(h->value());
  }
  const bool sse = r.status == 200 && o.stream;
  SseParser events;
  bool done_event = false;
  std::string whole;  // non-streamed and error bodies
  std::string stream_error;
  std::vector<char> piece(kPiece);
  while (!p.is_done()) {
    p.get().body().data = piece.data();
    p.get().body().size = piece.size();
    co_await http::async_read_some(s, buf, p, asio::redirect_error(use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      r.error = "reply from " + where + " broke off: " + ErrorText(ec);
      break;
    }
    const std::string_view got(piece.data(), piece.size() - p.get().body().size);
    if (sse) {
      events.Feed(got, [&](std::string_view data) {
        if (data == "[DONE]") {
          done_event = true;
          return;
        }
        Json j = Json::parse(data.begin(), data.end(), nullptr, false);
        if (j.is_discarded()) {
          if (stream_error.empty()) stream_error = "a stream event is not JSON: " + std::string(data.substr(0, 200));
          return;
        }
        if (j.contains("error")) {
          if (stream_error.empty())
            stream_error = "the server reported an error mid-stream: " + ErrorMessageOf(j, std::string(data));
          return;
        }
        ApplyChoice(j, true, r, sent);
      });
    } else if (whole.size() + got.size() <= kMaxBody) {
      whole.append(got);
    }
  }
  r.total_ms = MsSince(sent);
  if (!r.error.empty()) co_return;
  if (r.status != 200) {
    Json j = Json::parse(whole, nullptr, false);
    r.error = "HTTP " + std::to_string(r.status) + ": " + ErrorMessageOf(j, whole);
    co_return;
  }
  if (sse) {
    if (!stream_error.empty()) {
      r.error = stream_error;
    } else if (!done_event) {
      r.error = "the stream ended without 'data: [DONE]'";
    }
    co_return;
  }
  Json j = Json::parse(whole, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    r.error = "the reply is not a JSON object";
    co_return;
  }
  ApplyChoice(j, false, r, sent);
  r.ttft_ms = r.total_ms;
  if (r.content.empty() && r.finish_reason.empty()) r.error = "the reply has no choices[0].message";
}

}  // namespace

std::string ChatRequestPrompt(const ChatLoadOptions& o, int i) {
  return o.prompt + " (request " + std::to_string(i) + ")";
}

std::string ChatRequestBody(const ChatLoadOptions& o, int i) {
  Json j = {{"messages", Json::array({{{"role", "user"}, {"content", ChatRequestPrompt(o, i)}}})},
            {"max_tokens", o.max_tokens},
            {"stream", o.stream}};
  if (!o.model.empty()) j["model"] = o.model;
  if (o.seed) j["seed"] = *o.seed + static_cast<uint64_t>(i);
  if (o.stream && o.include_usage) j["stream_options"] = {{"include_usage", true}};
  return j.dump();
}

ChatLoadReport RunChatLoad(const ChatLoadOptions& o) {
  ChatLoadReport rep;
  rep.results.resize(static_cast<size_t>(std::max(o.requests, 0)));
  for (size_t i = 0; i < rep.results.size(); ++i) {
    rep.results[i].index = o.first_index + static_cast<int>(i);
    if (!o.id_prefix.empty()) rep.results[i].request_id = o.id_prefix + std::to_string(rep.results[i].index);
  }
  auto url = ParseHttpUrl(o.url);
  const auto t0 = Clock::now();
  if (!url.ok()) {
    for (auto& r : rep.results) r.error = url.status().message();
  } else {
    asio::io_context ioc(1);
    for (auto& r : rep.results) {
      asio::co_spawn(ioc, OneRequest(*url, o, r.index, r), [&r](std::exception_ptr e) {
        if (!e) return;
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          r.error = std::string("internal error: ") + ex.what();
        }
      });
    }
    ioc.run();
  }
  rep.wall_ms = MsSince(t0);
  for (const auto& r : rep.results) {
    if (r.ok()) {
      ++rep.ok;
      rep.tokens += r.tokens();
    } else {
      ++rep.failed;
    }
  }
  return rep;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size());
  return v[rank - 1];
}

nlohmann::json ChatLoadReport::ToJson() const {
  Json reqs = Json::array();
  std::vector<double> ttft, total;
  for (const auto& r : results) {
    Json j = {{"index", r.index},     {"request_id", r.request_id}, {"status", r.status},
              {"tokens", r.tokens()}, {"chunks", r.chunks},         {"finish_reason", r.finish_reason},
              {"ttft_ms", r.ttft_ms}, {"total_ms", r.total_ms},     {"content", r.content}};
    if (!r.ok()) j["error"] = r.error;
    reqs.push_back(std::move(j));
    if (r.ok()) {
      ttft.push_back(r.ttft_ms);
      total.push_back(r.total_ms);
    }
  }
  return {{"requests", results.size()},
          {"ok", ok},
          {"failed", failed},
          {"tokens", tokens},
          {"wall_ms", wall_ms},
          {"tokens_per_s", tokens_per_s()},
          {"ttft_ms_p50", Percentile(ttft, 50)},
          {"ttft_ms_p99", Percentile(ttft, 99)},
          {"latency_ms_p50", Percentile(total, 50)},
          {"latency_ms_p99", Percentile(total, 99)},
          {"results", std::move(reqs)}};
}

bool FetchModelInfo(const std::string& base, int* vocab, uint64_t* seed, std::string* error) {
  auto url = ParseHttpUrl(base);
  if (!url.ok()) {
    *error = url.status().message();
    return false;
  }
  try {
    asio::io_context ioc;
    tcp::resolver resolver(ioc);
    beast::tcp_stream s(ioc);
    s.expires_after(std::chrono::seconds(10));
    s.connect(resolver.resolve(url->host, std::to_string(url->port)));
    http::request<http::empty_body> req{http::verb::get, url->path + "/v1/models", 11};
    req.set(http::field::host, url->HostHeader());
    http::write(s, req);
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(s, buf, res);
    auto j = nlohmann::json::parse(res.body(), nullptr, false);
    if (res.result_int() != 200 || !j.is_object() || !j.contains("data") || j["data"].empty() ||
        !j["data"][0].contains("vocab_size")) {
      *error = "GET " + url->ToString() + "/v1/models gave no vocab_size (is it a twinscope-demo-server?)";
      return false;
    }
    *vocab = j["data"][0]["vocab_size"].get<int>();
    *seed = j["data"][0].value("seed", uint64_t{0});
    return true;
  } catch (const std::exception& e) {
    *error = "GET " + base + "/v1/models: " + e.what();
    return false;
  }
}

}  // namespace twinscope::demo
