// Long-polling a primary's schedule (schedule_fetcher.h).
#include "server/schedule_fetcher.h"

#include <nlohmann/json.hpp>

#include "net/beast.h"

namespace twinscope::demo {
namespace {

using asio::awaitable;
using asio::use_awaitable;
using Clock = std::chrono::steady_clock;

std::string ErrorMessageOf(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
      j["error"]["message"].is_string()) {
    return j["error"]["message"].get<std::string>();
  }
  return body.substr(0, 200);
}

}  // namespace

class ScheduleFetcher::Impl {
 public:
  Impl(HttpUrl url, StepFeed& feed, FetcherOptions o) : url_(std::move(url)), feed_(feed), opt_(o) {
    constexpr std::string_view kSuffix = "/v1/schedule";
    if (url_.path.size() >= kSuffix.size() &&
        url_.path.compare(url_.path.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0) {
      url_.path.resize(url_.path.size() - kSuffix.size());
    }
    feed_.source = url_.ToString();
  }

  void Start() {
    asio::co_spawn(ioc_, Run(), [this](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        feed_.Close(Status::Error(std::string("internal error following ") + url_.ToString() + ": " + ex.what()));
      }
    });
    thread_ = std::thread([this] { ioc_.run(); });
  }

  void Stop() {
    stop_ = true;
    ioc_.stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  awaitable<void> Pause(std::chrono::milliseconds d) {
    asio::steady_timer t(ioc_, d);
    beast::error_code ec;
    co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
  }

  awaitable<void> Run() {
    uint64_t from = 0;
    bool have_header = false;
    auto last_contact = Clock::now();
    std::unique_ptr<beast::tcp_stream> conn;
    beast::flat_buffer buf;
    tcp::resolver resolver(ioc_);
    const std::string where = url_.ToString() + "/v1/schedule";
    for (;;) {
      if (stop_) co_return;
      beast::error_code ec;
      std::string step_of_failure = "connect";
      if (!conn) {
        auto eps = co_await resolver.async_resolve(url_.host, std::to_string(url_.port),
                                                   asio::redirect_error(use_awaitable, ec));
        if (!ec) {
          conn = std::make_unique<beast::tcp_stream>(ioc_);
          conn->expires_after(std::chrono::seconds(5));
          co_await conn->async_connect(eps, asio::redirect_error(use_awaitable, ec));
        }
      }
      http::response_parser<http::string_body> parser;
      if (!ec) {
        step_of_failure = "request";
        parser.body_limit(std::numeric_limits<uint64_t>::max());
        http::request<http::empty_body> req{http::verb::get,
                                            url_.path + "/v1/schedule?from=" + std::to_string(from) +
                                                "&wait_ms=" + std::to_string(opt_.poll_wait.count()),
                                            11};
        req.set(http::field::host, url_.HostHeader());
        req.set(http::field::user_agent, "twinscope-demo-server (follower)");
        conn->expires_after(opt_.poll_wait + std::chrono::seconds(30));
        co_await http::async_write(*conn, req, asio::redirect_error(use_awaitable, ec));
        if (!ec) co_await http::async_read(*conn, buf, parser, asio::redirect_error(use_awaitable, ec));
      }
      if (ec) {
        conn.reset();
        buf.clear();
        if (Clock::now() - last_contact > opt_.contact_timeout) {
          feed_.Close(Status::Error(
              "no answer from " + where + " for " +
              std::to_string(std::chrono::duration_cast<std::chrono::seconds>(opt_.contact_timeout).count()) + " s (" +
              step_of_failure + ": " + ec.message() + ")"));
          co_return;
        }
        co_await Pause(opt_.retry);
        continue;
      }
      last_contact = Clock::now();
      auto& res = parser.get();
      if (res.result_int() != 200) {
        feed_.Close(Status::Error(where + "?from=" + std::to_string(from) + " answered " +
                                  std::to_string(res.result_int()) + ": " + ErrorMessageOf(res.body())));
        co_return;
      }
      const std::string& body = res.body();
      size_t pos = 0;
      uint64_t steps = 0;
      while (pos < body.size()) {
        size_t nl = body.find('\n', pos);
        if (nl == std::string::npos) nl = body.size();
        std::string_view text(body.data() + pos, nl - pos);
        pos = nl + 1;
        if (text.empty()) continue;
        auto line = ParseScheduleLine(text);
        if (!line.ok()) {
          feed_.Close(Status::Error(where + ": " + line.status().message()));
          co_return;
        }
        switch (line->type) {
          case ScheduleLine::Type::kHeader:
            if (!have_header) feed_.Push(std::move(*line));
            have_header = true;
            break;
          case ScheduleLine::Type::kStep:
            ++steps;
            feed_.Push(std::move(*line));
            break;
          case ScheduleLine::Type::kEnd:
            feed_.Push(std::move(*line));
            feed_.Close(Status::Ok());
            co_return;
        }
      }
      uint64_t next = from + steps;
      if (auto h = res.find("X-Schedule-Next"); h != res.end()) {
        try {
          next = std::stoull(std::string(h->value()));
        } catch (...) {
        }
      }
      from = next;
      if (!parser.keep_alive()) {
        conn.reset();
        buf.clear();
      }
    }
  }

  HttpUrl url_;
  StepFeed& feed_;
  FetcherOptions opt_;
  asio::io_context ioc_{1};
  std::thread thread_;
  std::atomic<bool> stop_{false};
};

ScheduleFetcher::ScheduleFetcher(HttpUrl primary, StepFeed& feed, FetcherOptions options)
    : impl_(std::make_unique<Impl>(std::move(primary), feed, options)) {}
ScheduleFetcher::~ScheduleFetcher() { Stop(); }
void ScheduleFetcher::Start() { impl_->Start(); }
void ScheduleFetcher::Stop() { impl_->Stop(); }

}  // namespace twinscope::demo
