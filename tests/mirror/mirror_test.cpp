// End-to-end tests of the mirror on loopback: a real Mirror in front of two
// in-test Beast servers (upstream_server.h), driven by blocking clients.
#include "mirror/mirror.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <set>

#include "mirror_harness.h"
#include "upstream_server.h"

namespace twinscope::mirror {
namespace {

using testing::ChatBody;
using testing::ClientResponse;
using testing::StartMirror;
using testing::TempLogPath;
using testing::TestClient;
using testing::TestUpstream;
using testing::UpstreamBehavior;
using testing::WaitForShadows;
using Json = nlohmann::json;
using namespace std::chrono_literals;

TEST(Mirror, PlainRequestGetsPrimaryReplyAndShadowGetsTheSameRequest) {
  TestUpstream primary, shadow;
  auto m = StartMirror(primary.url(), shadow.url());
  TestClient c(m->port());
  std::string body = ChatBody();
  ClientResponse r = c.Request(http::verb::post, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  Json j = Json::parse(r.body);
  EXPECT_EQ(j["role"], "primary");
  EXPECT_EQ(j["target"], "/v1/chat/completions");
  EXPECT_EQ(j["body_bytes"], body.size());
  EXPECT_EQ(j["body_hash"], testing::Fnv1a(body));
  EXPECT_EQ(r.headers["X-Upstream-Port"], std::to_string(primary.port()));
  EXPECT_EQ(std::string(r.headers["X-Request-Id"]), j["id"].get<std::string>());

  auto seen = shadow.WaitForSeen(1);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].role, "shadow");
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].target, "/v1/chat/completions");
  EXPECT_EQ(seen[0].body_hash, testing::Fnv1a(body));
  EXPECT_EQ(seen[0].id, j["id"].get<std::string>());
  WaitForShadows(*m);
  EXPECT_EQ(m->counters().shadow_ok, 1u);
  EXPECT_EQ(m->counters().primary_ok, 1u);
}

TEST(Mirror, StreamingReplyReachesClientAsItArrives) {
  TestUpstream primary, shadow;
  auto m = StartMirror(primary.url(), shadow.url());
  TestClient c(m->port());
  ASSERT_TRUE(c.Connect());
  http::request<http::string_body> req{http::verb::post, "/stream?n=5&gap_ms=200", 11};
  req.set(http::field::host, "x");
  req.body() = ChatBody();
  req.prepare_payload();
  auto t0 = std::chrono::steady_clock::now();
  http::write(c.stream(), req);
  http::response_parser<http::buffer_body> p;
  http::read_header(c.stream(), c.buffer(), p);
  EXPECT_EQ(p.get().result_int(), 200);
  EXPECT_TRUE(p.chunked());
  EXPECT_EQ(p.get()[http::field::content_type], "text/event-stream");
  std::string all;
  std::vector<double> event_ms;  // when each "data:" event arrived
  char piece[4096];
  while (!p.is_done()) {
    p.get().body().data = piece;
    p.get().body().size = sizeof piece;
    beast::error_code ec;
    http::read_some(c.stream(), c.buffer(), p, ec);
    if (ec == http::error::need_buffer) ec = {};
    ASSERT_FALSE(ec) << ec.message();
    size_t n = sizeof piece - p.get().body().size;
    std::string got(piece, n);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    for (size_t pos = got.find("data:"); pos != std::string::npos; pos = got.find("data:", pos + 1)) {
      event_ms.push_back(ms);
    }
    all += got;
  }
  EXPECT_EQ(all, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\ndata: [DONE]\n\n");
  ASSERT_EQ(event_ms.size(), 6u);
  // Event i leaves the primary at 200*i ms, [DONE] at 1000 ms. Relayed as they
  // arrive, the first event reaches the client at once, the others spread out.
  // Held until the shadow's copy (the same 1 s stream) ends, the first event
  // comes after 1000 ms; buffered, all come together at the end. The bounds
  // leave a loaded machine 500 ms of delay, and the spread is measured by
  // differences, which a delay of every event alike does not change.
  EXPECT_LT(event_ms[0], 500.0) << "first event at " << event_ms[0] << " ms";
  EXPECT_LT(event_ms[0], event_ms[5] - 500.0) << "first event at " << event_ms[0] << " ms, last " << event_ms[5];
  EXPECT_LT(event_ms[2], event_ms[5] - 200.0) << "third event at " << event_ms[2] << " ms, last " << event_ms[5];
  WaitForShadows(*m);
  EXPECT_EQ(m->counters().shadow_ok, 1u);
}

TEST(Mirror, LargeBodiesBothWays) {
  TestUpstream primary, shadow;
  auto m = StartMirror(primary.url(), shadow.url(), [](MirrorOptions& o) { o.max_body_bytes = 16u << 20; });
  TestClient c(m->port());
  std::string up(8u << 20, '\0');
  for (size_t i = 0; i < up.size(); ++i) up[i] = testing::PatternByte(i * 3);
  ClientResponse r = c.Request(http::verb::post, "/upload", up);
  ASSERT_EQ(r.status, 200) << r.error;
  Json j = Json::parse(r.body);
  EXPECT_EQ(j["body_bytes"], up.size());
  EXPECT_EQ(j["body_hash"], testing::Fnv1a(up));

  const size_t kDown = 32u << 20;
  r = c.Request(http::verb::get, "/big?bytes=" + std::to_string(kDown));
  ASSERT_EQ(r.status, 200) << r.error;
  ASSERT_EQ(r.body.size(), kDown);
  size_t bad = 0;
  for (size_t i = 0; i < kDown; ++i) bad += r.body[i] != testing::PatternByte(i);
  EXPECT_EQ(bad, 0u);
  WaitForShadows(*m);
  EXPECT_EQ(m->counters().shadow_ok, 2u);
}

TEST(Mirror, ClientRequestIdIsKeptForBothUpstreams) {
  TestUpstream primary, shadow;
  auto m = StartMirror(primary.url(), shadow.url());
  TestClient c(m->port());
  ClientResponse r = c.Request(http::verb::post, "/v1/completions", ChatBody(), {{"X-Request-Id", "req-abc.123"}});
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(Json::parse(r.body)["id"], "req-abc.123");
  EXPECT_EQ(r.headers["X-Request-Id"], "req-abc.123");
  auto seen = shadow.WaitForSeen(1);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].id, "req-abc.123");

  // An id that is not visible ASCII is replaced.
  r = c.Request(http::verb::post, "/v1/completions", ChatBody(), {{"X-Request-Id", "bad id with spaces"}});
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_NE(Json::parse(r.body)["id"], "bad id with spaces");
  EXPECT_EQ(Json::parse(r.body)["id"].get<std::string>().size(), 36u);
}

TEST(Mirror, GeneratedRequestIdsAreSharedAndUnique) {
  TestUpstream primary, shadow;
  auto m = StartMirror(primary.url(), shadow.url());
  TestClient c(m->port());
  std::set<std::string> ids;
  for (int i = 0; i < 50; ++i) {
    ClientResponse r = c.Request(http::verb::post, "/v1/chat/completions", ChatBody(i));
    ASSERT_EQ(r.status, 200) << r.error;
    ids.insert(Json::parse(r.body)["id"].get<std::string>());
  }
  EXPECT_EQ(ids.size(), 50u);
  auto seen = shadow.WaitForSeen(50);
  ASSERT_EQ(seen.size(), 50u);
  std::set<std::string> shadow_ids;
  for (auto& s : seen) shadow_ids.insert(s.id);
  EXPECT_EQ(shadow_ids, ids);
}

TEST(Mirror, KeepAliveReusesUpstreamConnections) {
  TestUpstream primary, shadow;
  auto m = StartMirror(primary.url(), shadow.url(), [](MirrorOptions& o) { o.threads = 1; });
  TestClient c(m->port());
  for (int i = 0; i < 100; ++i) {
    ClientResponse r = c.Request(http::verb::post, "/v1/chat/completions", ChatBody(i));
    ASSERT_EQ(r.status, 200) << r.error;
    WaitForShadows(*m);  // so the shadow connection is back in the pool too
  }
  EXPECT_LE(primary.connections(), 2);
  EXPECT_LE(shadow.connections(), 2);
}

TEST(Mirror, UpstreamThatClosesIdleConnectionsIsHandled) {
  UpstreamBehavior closing;
  closing.close_after_reply = true;  // says keep-alive, then closes
  TestUpstream primary(closing), shadow(closing);
  auto m = StartMirror(primary.url(), shadow.url(), [](MirrorOptions& o) { o.threads = 1; });
  TestClient c(m->port());
  for (int i = 0; i < 30; ++i) {
    ClientResponse r = c.Request(http::verb::post, "/v1/chat/completions", ChatBody(i));
    ASSERT_EQ(r.status, 200) << r.error;
    std::this_thread::sleep_for(2ms);
  }
  WaitForShadows(*m);
  EXPECT_EQ(m->counters().primary_ok, 30u);
  EXPECT_EQ(m->counters().shadow_ok, 30u);
}

TEST(Mirror, ShadowDownDoesNotAffectClients) {
  TestUpstream primary;
  auto m = StartMirror(primary.url(), "http://127.0.0.1:" + std::to_string(testing::ClosedPort()));
  TestClient c(m->port());
  for (int i = 0; i < 20; ++i) {
    ClientResponse r = c.Request(http::verb::post, "/v1/chat/completions", ChatBody(i));
    ASSERT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(Json::parse(r.body)["role"], "primary");
  }
  WaitForShadows(*m);
  auto k = m->counters();
  EXPECT_EQ(k.primary_ok, 20u);
  EXPECT_EQ(k.shadow_failed, 20u);
  EXPECT_EQ(k.shadow_ok, 0u);
}

// Latency of `n` sequential requests on one keep-alive connection, in ms.
std::vector<double> Latencies(uint16_t port, int n, const std::string& target = "/v1/chat/completions") {
  TestClient c(port);
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    ClientResponse r = c.Request(http::verb::post, target, ChatBody(i));
    EXPECT_EQ(r.status, 200) << r.error;
    ms.push_back(r.ms);
  }
  return ms;
}

// Expects no mirrored request to be `margin_ms` or more slower than the
// slowest request sent straight to the primary, just before in the same test.
// The shadow delays used with it are at least twice the margin, so a mirror
// that waited for the shadow fails, while a loaded machine has the whole
// margin to spare.
void ExpectNoSlowerThanDirect(const std::vector<double>& direct, const std::vector<double>& mirrored,
                              double margin_ms) {
  const double direct_max = *std::max_element(direct.begin(), direct.end());
  const double mirrored_max = *std::max_element(mirrored.begin(), mirrored.end());
  EXPECT_LT(mirrored_max, direct_max + margin_ms)
      << "direct max " << direct_max << " ms, mirrored max " << mirrored_max << " ms";
}

TEST(Mirror, SlowShadowAddsNoLatency) {
  // A shadow that sleeps 2 s before each reply: waiting for it would make
  // every mirrored request take 2 s.
  constexpr int kShadowDelayMs = 2000;
  UpstreamBehavior slow;
  slow.delay_ms = kShadowDelayMs;
  TestUpstream primary, shadow(slow);
  auto m = StartMirror(primary.url(), shadow.url());
  auto direct = Latencies(primary.port(), 10);
  const auto t0 = std::chrono::steady_clock::now();
  auto mirrored = Latencies(m->port(), 10);
  const uint64_t shadow_ok = m->counters().shadow_ok;
  const double mirrored_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ExpectNoSlowerThanDirect(direct, mirrored, kShadowDelayMs / 2);
  // All 10 replies reached the client while the first shadow copy still slept.
  EXPECT_EQ(shadow_ok, 0u) << "the 10 mirrored requests took " << mirrored_ms << " ms";
  WaitForShadows(*m);
  EXPECT_EQ(m->counters().shadow_ok, 10u);
}

TEST(Mirror, ShadowThatNeverAnswersTimesOutAndPrimaryIsUnaffected) {
  UpstreamBehavior hang;
  hang.hang = true;
  TestUpstream primary, shadow(hang);
  auto m = StartMirror(primary.url(), shadow.url(), [](MirrorOptions& o) { o.shadow_timeout = 1500ms; });
  auto direct = Latencies(primary.port(), 5);
  auto mirrored = Latencies(m->port(), 5);
  ExpectNoSlowerThanDirect(direct, mirrored, 750.0);  // half the shadow's timeout
  WaitForShadows(*m);
  auto k = m->counters();
  EXPECT_EQ(k.primary_ok, 5u);
  EXPECT_EQ(k.shadow_timeouts, 5u);
}

TEST(Mirror, ShadowCapSkipsAndCountsCopies) {
  UpstreamBehavior hang;
  hang.hang = true;
  TestUpstream primary, shadow(hang);
  auto m = StartMirror(primary.url(), shadow.url(), [](MirrorOptions& o) {
    o.shadow_max_inflight = 2;
    o.shadow_timeout = 30s;
  });
  auto direct = Latencies(primary.port(), 5);
  auto mirrored = Latencies(m->port(), 5);
  ExpectNoSlowerThanDirect(direct, mirrored, 1000.0);  // the hung copies would hold a reply 30 s
  EXPECT_TRUE(TestUpstream::WaitFor([&] { return m->counters().primary_inflight == 0; }));
  auto k = m->counters();
  EXPECT_EQ(k.primary_ok, 5u);
  EXPECT_EQ(k.shadow_sent, 2u);
  EXPECT_EQ(k.shadow_skipped, 3u);
  EXPECT_EQ(k.shadow_inflight, 2u);
  m->ShutdownNow();  // the two hung copies are cut
  m->Wait();
}

TEST(Mirror, PrimaryDownGives502WithJsonBody) {
  TestUpstream shadow;
  auto m = StartMirror("http://127.0.0.1:" + std::to_string(testing::ClosedPort()), shadow.url());
  TestClient c(m->port());
  ClientResponse r = c.Request(http::verb::post, "/v1/chat/completions", ChatBody(), {{"X-Request-Id", "r1"}});
  ASSERT_EQ(r.status, 502) << r.error;
  EXPECT_EQ(r.headers[http::field::content_type], "application/json");
  EXPECT_EQ(r.headers["X-Request-Id"], "r1");
  Json j = Json::parse(r.body);
  EXPECT_EQ(j["error"]["type"], "mirror_error");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("unreachable"), std::string::npos) << r.body;
  // The connection stays usable.
  r = c.Request(http::verb::post, "/v1/chat/completions", ChatBody());
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(m->counters().primary_unreachable, 2u);
}

TEST(Mirror, ClientDisconnectMidStreamCancelsPrimary) {
  TestUpstream primary, shadow;
  auto m = StartMirror(primary.url(), shadow.url());
  {
    TestClient c(m->port());
    ASSERT_TRUE(c.Connect());
    http::request<http::string_body> req{http::verb::post, "/stream?n=200&gap_ms=50", 11};
    req.set(http::field::host, "x");
    req.body() = ChatBody();
    req.prepare_payload();
    http::write(c.stream(), req);
    http::response_parser<http::buffer_body> p;
    http::read_header(c.stream(), c.buffer(), p);
    ASSERT_EQ(p.get().result_int(), 200);
    char piece[256];
    p.get().body().data = piece;
    p.get().body().size = sizeof piece;
    beast::error_code ec;
    http::read_some(c.stream(), c.buffer(), p, ec);  // the first event
    c.Close();
  }
  // The primary's stream (10 s long) must be cut within a few of its gaps.
  EXPECT_TRUE(TestUpstream::WaitFor([&] { return primary.cancels() == 1; }, 2s));
  EXPECT_TRUE(TestUpstream::WaitFor([&] { return m->counters().primary_inflight == 0; }, 2s));
  EXPECT_EQ(m->counters().client_disconnects, 1u);
  EXPECT_EQ(primary.completed(), 0);
  // Nothing leaked: the connection is gone, and the mirror still serves.
  EXPECT_TRUE(TestUpstream::WaitFor([&] { return m->counters().connections_open == 0; }, 2s));
  TestClient c2(m->port());
  EXPECT_EQ(c2.Request(http::verb::post, "/v1/x", ChatBody()).status, 200);
}

TEST(Mirror, ClientDisconnectBeforeFirstByteCancelsPrimary) {
  UpstreamBehavior slow;
  slow.delay_ms = 300;  // then a 5 s stream
  TestUpstream primary(slow), shadow;
  auto m = StartMirror(primary.url(), shadow.url());
  {
    TestClient c(m->port());
    ASSERT_TRUE(c.Connect());
    http::request<http::string_body> req{http::verb::post, "/stream?n=100&gap_ms=50", 11};
    req.set(http::field::host, "x");
    req.prepare_payload();
    http::write(c.stream(), req);
    std::this_thread::sleep_for(100ms);
    c.Close();
  }
  EXPECT_TRUE(TestUpstream::WaitFor([&] { return m->counters().client_disconnects == 1; }, 2s));
  EXPECT_TRUE(TestUpstream::WaitFor([&] { return m->counters().primary_inflight == 0; }, 2s));
  // The primary finds its connection closed as soon as it starts answering.
  EXPECT_TRUE(TestUpstream::WaitFor([&] { return primary.cancels() == 1; }, 2s));
  EXPECT_EQ(primary.completed(), 0);
}

TEST(Mirror, MalformedRequestGets400) {
  TestUpstream primary, shadow;
  auto m = StartMirror(primary.url(), shadow.url());
  TestClient c(m->port());
  ClientResponse r = c.Raw("THIS IS NOT HTTP\r\n\r\n");
  EXPECT_EQ(r.status, 400) << r.error;
  TestClient c2(m->port());
  r = c2.Raw("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello");
  EXPECT_EQ(r.status, 400) << r.error;
  TestClient c3(m->port());
  r = c3.Raw("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(r.status, 400) << r.error;
  EXPECT_EQ(m->counters().rejected_bad_request, 3u);
  EXPECT_EQ(primary.requests(), 0);
  EXPECT_EQ(shadow.requests(), 0);
}

TEST(Mirror, OversizedRequestsGet413And431) {
  TestUpstream primary, shadow;
  auto m = StartMirror(primary.url(), shadow.url(), [](MirrorOptions& o) {
    o.max_body_bytes = 1u << 20;
    o.max_header_bytes = 8u << 10;
  });
  {  // Content-Length over the cap: refused before the body is read.
    TestClient c(m->port());
    ClientResponse r = c.Raw("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2097152\r\n\r\n" + std::string(1000, 'a'));
    EXPECT_EQ(r.status, 413) << r.error;
    EXPECT_NE(r.body.find("--max-body"), std::string::npos);
  }
  {  // Chunked body that grows past the cap.
    TestClient c(m->port());
    std::string chunk(64 * 1024, 'b');
    std::string raw = "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 20; ++i) raw += "10000\r\n" + chunk + "\r\n";
    raw += "0\r\n\r\n";
    ClientResponse r = c.Raw(raw);
    EXPECT_EQ(r.status, 413) << r.error;
  }
  {  // Expect: 100-continue with a too large body: 413 at once.
    TestClient c(m->port());
    ClientResponse r = c.Raw("POST /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000000\r\n\r\n");
    EXPECT_EQ(r.status, 413) << r.error;
  }
  {  // Header over the cap.
    TestClient c(m->port());
    ClientResponse r = c.Raw("GET /x HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(16 * 1024, 'c') + "\r\n\r\n");
    EXPECT_EQ(r.status, 431) << r.error;
  }
  {  // Just under the cap passes.
    TestClient c(m->port());
    ClientResponse r = c.Request(http::verb::post, "/x", std::string((1u << 20) - 1, 'd'));
    EXPECT_EQ(r.status, 200) << r.error;
  }
  auto k = m->counters();
  EXPECT_EQ(k.rejected_too_large, 3u);
  EXPECT_EQ(k.rejected_header_too_large, 1u);
  EXPECT_EQ(primary.requests(), 1);
}

TEST(Mirror, ExpectContinueIsAnswered) {
  TestUpstream primary, shadow;
  auto m = StartMirror(primary.url(), shadow.url());
  TestClient c(m->port());
  ASSERT_TRUE(c.Connect());
  std::string head = "POST /v1/x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";
  asio::write(c.stream(), asio::buffer(head));
  http::response_parser<http::empty_body> interim;
  http::read_header(c.stream(), c.buffer(), interim);
  EXPECT_EQ(interim.get().result_int(), 100);
  asio::write(c.stream(), asio::buffer(std::string("hello")));
  http::response_parser<http::string_body> p;
  http::read(c.stream(), c.buffer(), p);
  EXPECT_EQ(p.get().result_int(), 200);
  EXPECT_EQ(Json::parse(p.get().body())["body_bytes"], 5);
}

TEST(Mirror, HealthReportsUpstreamsAndCounters) {
  TestUpstream primary;
  auto m = StartMirror(primary.url(), "http://127.0.0.1:" + std::to_string(testing::ClosedPort()));
  TestClient c(m->port());
  ASSERT_EQ(c.Request(http::verb::post, "/v1/x", ChatBody()).status, 200);
  ClientResponse r = c.Request(http::verb::get, "/health");
  ASSERT_EQ(r.status, 200) << r.error;
  Json j = Json::parse(r.body);
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["primary"]["reachable"], true);
  EXPECT_EQ(j["shadow"]["reachable"], false);
  EXPECT_TRUE(j["shadow"].contains("error"));
  EXPECT_EQ(j["counters"]["requests"], 1);
  EXPECT_EQ(j["counters"]["primary_ok"], 1);
  EXPECT_EQ(primary.requests(), 1);  // /health was not forwarded

  auto m2 = StartMirror("http://127.0.0.1:" + std::to_string(testing::ClosedPort()), primary.url());
  TestClient c2(m2->port());
  r = c2.Request(http::verb::get, "/health");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(Json::parse(r.body)["status"], "primary_unreachable");
}

TEST(Mirror, RequestLogHasOneLinePerRequestWithBothSides) {
  UpstreamBehavior slow;
  slow.delay_ms = 50;
  TestUpstream primary, shadow(slow);
  std::string path = TempLogPath("mirror_log_test");
  std::remove(path.c_str());
  auto m = StartMirror(primary.url(), shadow.url(), [&](MirrorOptions& o) { o.log_path = path; });
  TestClient c(m->port());
  ASSERT_EQ(c.Request(http::verb::post, "/v1/chat/completions", ChatBody(), {{"X-Request-Id", "log-1"}}).status, 200);
  ASSERT_EQ(c.Request(http::verb::get, "/stream?n=3&gap_ms=10").status, 200);
  m->Shutdown();
  m->Wait();
  std::ifstream in(path);
  std::vector<Json> lines;
  for (std::string line; std::getline(in, line);) {
    Json j = Json::parse(line);
    if (j["type"] == "end") lines.push_back(j);  // the request lines: request_log_test.cpp
  }
  ASSERT_EQ(lines.size(), 2u);
  std::sort(lines.begin(), lines.end(), [](auto& a, auto& b) { return a["arrival_unix_us"] < b["arrival_unix_us"]; });
  const Json& a = lines[0];
  EXPECT_EQ(a["id"], "log-1");
  EXPECT_EQ(a["id_generated"], false);
  EXPECT_EQ(a["method"], "POST");
  EXPECT_EQ(a["path"], "/v1/chat/completions");
  EXPECT_EQ(a["status"], 200);
  EXPECT_TRUE(a["arrival"].get<std::string>().ends_with("Z"));
  EXPECT_EQ(a["primary"]["state"], "ok");
  EXPECT_EQ(a["primary"]["status"], 200);
  EXPECT_GT(a["primary"]["bytes"], 0);
  EXPECT_GE(a["primary"]["first_byte_us"], a["primary"]["sent_us"]);
  EXPECT_GE(a["primary"]["done_us"], a["primary"]["first_byte_us"]);
  EXPECT_EQ(a["shadow"]["state"], "ok");
  EXPECT_GE(a["shadow"]["first_byte_us"].get<int64_t>(), 50000);  // the shadow's 50 ms delay
  const Json& b = lines[1];
  EXPECT_EQ(b["id_generated"], true);
  EXPECT_EQ(b["primary"]["bytes"], std::string("data: 0\n\ndata: 1\n\ndata: 2\n\ndata: [DONE]\n\n").size());
  EXPECT_EQ(b["shadow"]["bytes"], b["primary"]["bytes"]);
  std::remove(path.c_str());
}

TEST(Mirror, RequestLogRecordsSkippedAndFailedShadows) {
  TestUpstream primary;
  std::string path = TempLogPath("mirror_log_test2");
  std::remove(path.c_str());
  auto m = StartMirror(primary.url(), "http://127.0.0.1:" + std::to_string(testing::ClosedPort()),
                       [&](MirrorOptions& o) { o.log_path = path; });
  TestClient c(m->port());
  ASSERT_EQ(c.Request(http::verb::post, "/a", ChatBody()).status, 200);
  m->Shutdown();
  m->Wait();
  std::ifstream in(path);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(Json::parse(line)["type"], "request");
  ASSERT_TRUE(std::getline(in, line));
  Json j = Json::parse(line);
  EXPECT_EQ(j["type"], "end");
  EXPECT_EQ(j["shadow"]["state"], "failed");
  EXPECT_NE(j["shadow"]["error"].get<std::string>().find("connect"), std::string::npos);
  std::remove(path.c_str());
}

TEST(Mirror, ShutdownLetsRequestsInFlightFinish) {
  UpstreamBehavior slow;
  slow.delay_ms = 500;
  TestUpstream primary(slow), shadow(slow);
  auto m = StartMirror(primary.url(), shadow.url());
  auto pending = std::async(std::launch::async, [port = m->port()] {
    TestClient c(port);
    return c.Request(http::verb::post, "/stream?n=3&gap_ms=100", ChatBody());
  });
  ASSERT_TRUE(TestUpstream::WaitFor([&] { return primary.requests() == 1; }));
  TestClient idle(m->port());  // an idle keep-alive connection must not hold the shutdown up
  ASSERT_TRUE(idle.Connect());
  auto t0 = std::chrono::steady_clock::now();
  m->Shutdown();
  m->Wait();
  double waited = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ClientResponse r = pending.get();
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.body, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: [DONE]\n\n");
  EXPECT_EQ(r.headers[http::field::connection], "close");
  EXPECT_GT(waited, 300.0);
  EXPECT_LT(waited, 3000.0);
  EXPECT_EQ(m->counters().shadow_ok, 1u);  // the shadow copy was let finish too
  EXPECT_EQ(m->counters().drain_cut, 0u);
  TestClient late(m->port());
  EXPECT_FALSE(late.Connect());
}

TEST(Mirror, SigtermDrainsAndRunMirrorReturnsZero) {
  UpstreamBehavior slow;
  slow.delay_ms = 300;
  TestUpstream primary(slow), shadow;
  MirrorOptions o;
  o.listen = "127.0.0.1:0";
  o.primary = primary.url();
  o.shadow = shadow.url();
  o.threads = 1;
  std::promise<uint16_t> port;
  auto run =
      std::async(std::launch::async, [&] { return RunMirror(o, [&](const Mirror& m) { port.set_value(m.port()); }); });
  uint16_t p = port.get_future().get();
  auto pending = std::async(std::launch::async, [p] {
    TestClient c(p);
    return c.Request(http::verb::post, "/v1/chat/completions", ChatBody());
  });
  ASSERT_TRUE(TestUpstream::WaitFor([&] { return primary.requests() == 1; }));
  ::kill(::getpid(), SIGTERM);
  EXPECT_EQ(pending.get().status, 200);
  EXPECT_EQ(run.get(), 0);
}

TEST(Mirror, ListenAddressAndUrlsAreValidated) {
  MirrorOptions o;
  o.listen = "127.0.0.1:0";
  o.primary = "https://example.com";
  o.shadow = "http://127.0.0.1:1";
  Mirror m(o);
  Status s = m.Start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("https"), std::string::npos) << s.message();

  MirrorOptions o2;
  o2.listen = "nonsense";
  o2.primary = "http://127.0.0.1:1";
  Mirror m2(o2);
  EXPECT_FALSE(m2.Start().ok());
}

TEST(Mirror, DefaultListenIsLoopback) {
  MirrorOptions o;
  EXPECT_EQ(o.listen, "127.0.0.1:8080");
  TestUpstream primary;
  auto m = StartMirror(primary.url(), "");
  EXPECT_TRUE(m->loopback_only());
  EXPECT_EQ(m->listen_address().rfind("127.0.0.1:", 0), 0u);
}

// 20,000 requests over 64 keep-alive connections: no primary errors.
TEST(Mirror, LoopbackLoadRun) {
  constexpr int kConnections = 64;
  constexpr int kRequests = 20000;
  TestUpstream primary({.threads = 1}), shadow({.threads = 1});
  auto m = StartMirror(primary.url(), shadow.url());
  std::atomic<int> next{0}, errors{0}, ok{0};
  std::vector<std::thread> clients;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kConnections; ++i) {
    clients.emplace_back([&] {
      TestClient c(m->port());
      while (next.fetch_add(1) < kRequests) {
        ClientResponse r = c.Request(http::verb::post, "/v1/chat/completions", ChatBody(1));
        (r.status == 200 ? ok : errors)++;
      }
    });
  }
  for (auto& t : clients) t.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("load run: %d requests over %d connections in %.2f s (%.0f req/s)\n", kRequests, kConnections, s,
              kRequests / s);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(ok.load(), kRequests);
  WaitForShadows(*m);
  auto k = m->counters();
  EXPECT_EQ(k.primary_ok, static_cast<uint64_t>(kRequests));
  EXPECT_EQ(k.shadow_ok + k.shadow_skipped + k.shadow_failed, static_cast<uint64_t>(kRequests));
  EXPECT_EQ(k.primary_inflight, 0u);
}

}  // namespace
}  // namespace twinscope::mirror
