// mirror_bench: what the mirror adds to a request, measured on loopback in one
// run. One process holds a primary and a shadow server (the in-test Beast
// servers of tests/mirror/upstream_server.h), a Mirror in front of them and
// a closed-loop load generator (C keep-alive connections, each sending its
// next request when the previous reply has fully arrived). For each upstream
// kind (plain JSON reply, SSE stream of 8 events) and each C, it loads the
// primary directly and then through the mirror, and prints p50/p99 latency
// (send to last byte) and throughput of both, and the difference.
//
// Closed loop by default (throughput, and latency at saturation); with
// --rate R requests are paced at R per second over all connections (latency
// below saturation, counted from when each request was due).
//
// Usage: mirror_bench [--seconds S] [--conns 1,64,256] [--mirror-threads N]
//                     [--upstream-threads N] [--client-threads N] [--no-shadow]
//                     [--rate REQ_PER_S]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mirror/mirror.h"
#include "upstream_server.h"

using namespace twinscope::mirror;
using Clock = std::chrono::steady_clock;

namespace {

struct Load {
  std::vector<double> lat_us;
  size_t requests = 0, errors = 0;
  double seconds = 0;
};

// One keep-alive connection. Closed loop (interval 0): the next request
// leaves when the last reply is in. Paced (interval > 0): requests are due
// every `interval`, and latency counts from when one was due, so a stall
// is not hidden by the requests it delayed.
asio::awaitable<void> Connection(uint16_t port, std::string target, Clock::time_point measure_from,
                                 Clock::time_point end, Clock::duration interval, Clock::duration phase, Load* out) {
  auto ex = co_await asio::this_coro::executor;
  const std::string body =
      R"({"model":"demo","messages":[{"role":"user","content":"How long is a piece of string?"}],"max_tokens":8})";
  http::request<http::string_body> req{http::verb::post, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  beast::error_code ec;
  asio::steady_timer pace(ex);
  Clock::time_point due = Clock::now() + phase;
  while (Clock::now() < end) {
    beast::tcp_stream s(ex);
    co_await s.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
                             asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      ++out->errors;
      continue;
    }
    s.socket().set_option(tcp::no_delay(true), ec);
    beast::flat_buffer buf;
    while (Clock::now() < end) {
      auto t0 = Clock::now();
      if (interval.count() > 0) {
        if (due > t0) {
          pace.expires_at(due);
          co_await pace.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        }
        t0 = due;
        due += interval;
      }
      co_await http::async_write(s, req, asio::redirect_error(asio::use_awaitable, ec));
      http::response<http::string_body> res;
      if (!ec) co_await http::async_read(s, buf, res, asio::redirect_error(asio::use_awaitable, ec));
      auto t1 = Clock::now();
      if (ec || res.result_int() != 200) {
        ++out->errors;
        break;
      }
      if (t0 >= measure_from) {
        out->lat_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        ++out->requests;
      }
    }
  }
}

Load RunLoad(uint16_t port, const std::string& target, int conns, double seconds, int client_threads, double rate) {
  asio::io_context ioc;
  std::vector<Load> per(conns);
  auto start = Clock::now();
  auto measure_from = start + std::chrono::milliseconds(500);  // warm-up: connections, pools
  auto end = measure_from + std::chrono::milliseconds(static_cast<long>(seconds * 1000));
  Clock::duration interval{0};
  if (rate > 0) interval = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(conns / rate));
  for (int i = 0; i < conns; ++i) {
    auto phase = interval * i / conns;
    asio::co_spawn(ioc, Connection(port, target, measure_from, end, interval, phase, &per[i]), asio::detached);
  }
  std::vector<std::thread> threads;
  for (int i = 1; i < client_threads; ++i) threads.emplace_back([&] { ioc.run(); });
  ioc.run();
  for (auto& t : threads) t.join();
  Load all;
  all.seconds = std::chrono::duration<double>(Clock::now() - measure_from).count();
  for (auto& l : per) {
    all.lat_us.insert(all.lat_us.end(), l.lat_us.begin(), l.lat_us.end());
    all.requests += l.requests;
    all.errors += l.errors;
  }
  std::sort(all.lat_us.begin(), all.lat_us.end());
  return all;
}

double Pct(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[i];
}

std::vector<int> ParseList(const char* s) {
  std::vector<int> out;
  for (const char* p = s; *p;) {
    out.push_back(std::atoi(p));
    const char* comma = std::strchr(p, ',');
    if (!comma) break;
    p = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3;
  std::vector<int> conns = {1, 64, 256};
  int mirror_threads = 0, upstream_threads = 1, client_threads = 1;
  bool shadow_on = true;
  double rate = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seconds")
      seconds = std::atof(next());
    else if (a == "--conns")
      conns = ParseList(next());
    else if (a == "--mirror-threads")
      mirror_threads = std::atoi(next());
    else if (a == "--upstream-threads")
      upstream_threads = std::atoi(next());
    else if (a == "--client-threads")
      client_threads = std::atoi(next());
    else if (a == "--no-shadow")
      shadow_on = false;
    else if (a == "--rate")
      rate = std::atof(next());
    else {
      std::fprintf(stderr,
                   "usage: %s [--seconds S] [--conns 1,64,256] [--mirror-threads N] [--upstream-threads N] "
                   "[--client-threads N] [--no-shadow] [--rate REQ_PER_S]\n",
                   argv[0]);
      return 2;
    }
  }

  testing::UpstreamBehavior b;
  b.threads = upstream_threads;
  testing::TestUpstream primary(b), shadow(b);
  MirrorOptions o;
  o.listen = "127.0.0.1:0";
  o.primary = primary.url();
  o.shadow = shadow_on ? shadow.url() : "";
  o.threads = mirror_threads;
  o.shadow_max_inflight = 1024;
  Mirror mirror(o);
  twinscope::Status s = mirror.Start();
  if (!s.ok()) {
    std::fprintf(stderr, "mirror_bench: %s\n", s.message().c_str());
    return 1;
  }
  std::printf(
      "mirror_bench: %u cores, mirror threads %d, upstream threads %d, client threads %d, shadow %s, "
      "%.1f s per measurement (after 0.5 s warm-up), %s\n",
      std::thread::hardware_concurrency(), mirror_threads, upstream_threads, client_threads, shadow_on ? "on" : "off",
      seconds,
      rate > 0 ? ("paced at " + std::to_string(static_cast<int>(rate)) + " req/s in all").c_str()
               : "closed loop (each connection sends its next request when the reply is in)");
  std::printf("%-7s %5s | %10s %10s %9s | %10s %10s %9s | %9s %9s %7s\n", "kind", "conns", "direct p50", "p99", "req/s",
              "mirror p50", "p99", "req/s", "added p50", "p99", "errors");
  struct Kind {
    const char* name;
    const char* target;
  };
  for (Kind k : {Kind{"plain", "/v1/chat/completions"}, Kind{"stream", "/stream?n=8&gap_ms=0"}}) {
    for (int c : conns) {
      Load d = RunLoad(primary.port(), k.target, c, seconds, client_threads, rate);
      Load m = RunLoad(mirror.port(), k.target, c, seconds, client_threads, rate);
      double dp50 = Pct(d.lat_us, 50), dp99 = Pct(d.lat_us, 99), mp50 = Pct(m.lat_us, 50), mp99 = Pct(m.lat_us, 99);
      std::printf("%-7s %5d | %8.0fus %8.0fus %9.0f | %8.0fus %8.0fus %9.0f | %7.0fus %7.0fus %7zu\n", k.name, c, dp50,
                  dp99, d.requests / d.seconds, mp50, mp99, m.requests / m.seconds, mp50 - dp50, mp99 - dp99,
                  d.errors + m.errors);
      std::fflush(stdout);
    }
  }
  // Let the last shadow copies finish, then report the mirror's counters.
  testing::TestUpstream::WaitFor([&] { return mirror.counters().shadow_inflight == 0; }, std::chrono::seconds(10));
  auto c = mirror.counters();
  std::printf(
      "mirror counters: requests %llu, primary ok %llu, shadow ok %llu, shadow skipped %llu, shadow failed %llu\n",
      (unsigned long long)c.requests, (unsigned long long)c.primary_ok, (unsigned long long)c.shadow_ok,
      (unsigned long long)c.shadow_skipped, (unsigned long long)(c.shadow_failed + c.shadow_timeouts));
  mirror.Shutdown();
  mirror.Wait();
  return 0;
}
