// The mirror against upstreams that do legal but unusual things: 1xx interim replies before the final
// one, keep-alive connections closed under a request, replies broken off in the header or the body.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "mirror_harness.h"
#include "upstream_server.h"

namespace twinscope::mirror {
namespace {

using testing::ChatBody;
using testing::ClientResponse;
using testing::ReadRequestLog;
using testing::StartMirror;
using testing::TempLogPath;
using testing::TestClient;
using testing::TestUpstream;
using testing::UpstreamBehavior;
using testing::WaitForShadows;
using Json = nlohmann::json;

constexpr size_t kBigBytes = 200000;  // more than the mirror's 64 KiB relay chunk

// `r` is /big's reply of kBigBytes pattern bytes, whole.
void ExpectBigReply(const ClientResponse& r) {
  ASSERT_EQ(r.status, 200) << r.error;
  ASSERT_EQ(r.body.size(), kBigBytes);
  size_t bad = 0;
  for (size_t i = 0; i < kBigBytes; ++i) bad += r.body[i] != testing::PatternByte(i);
  EXPECT_EQ(bad, 0u);
}

// A log side that ended well with the upstream's final 200 and `bytes` of body.
void ExpectOkLeg(const Json& leg, uint64_t bytes) {
  EXPECT_EQ(leg["state"], "ok") << leg.dump();
  EXPECT_EQ(leg["status"], 200) << leg.dump();
  EXPECT_EQ(leg["bytes"], bytes) << leg.dump();
  EXPECT_FALSE(leg.contains("error")) << leg.dump();
  EXPECT_FALSE(leg.contains("retried")) << leg.dump();
}

// A mirror with one I/O thread (so a request's upstream connection is the one
// the request before it left in the pool) and a request log of its own.
class LoggedMirror {
 public:
  LoggedMirror(const TestUpstream& primary, const TestUpstream& shadow, const std::string& name,
               const std::function<void(MirrorOptions&)>& tweak = {})
      : path_(TempLogPath(name)) {
    std::remove(path_.c_str());
    mirror_ = StartMirror(primary.url(), shadow.url(), [&](MirrorOptions& o) {
      o.threads = 1;
      o.log_path = path_;
      if (tweak) tweak(o);
    });
  }
  ~LoggedMirror() {
    mirror_.reset();
    std::remove(path_.c_str());
  }
  Mirror& operator*() { return *mirror_; }
  Mirror* operator->() { return mirror_.get(); }
  // Stops the mirror, which flushes the log, and returns the log's lines.
  std::vector<Json> StopAndReadLog() {
    mirror_->Shutdown();
    mirror_->Wait();
    return ReadRequestLog(path_);
  }

 private:
  std::string path_;
  std::unique_ptr<Mirror> mirror_;
};

TEST(MirrorUpstreamQuirks, PrimaryInterimRepliesAreSkipped) {
  UpstreamBehavior early;
  early.interim = {100, 103};
  TestUpstream primary(early), shadow;
  LoggedMirror m(primary, shadow, "mirror_interim_primary");
  TestClient c(m->port());
  std::string body = ChatBody();
  ClientResponse r = c.Request(http::verb::post, "/v1/chat/completions", body, {{"X-Request-Id", "early-1"}});
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  Json j = Json::parse(r.body);
  EXPECT_EQ(j["role"], "primary");
  EXPECT_EQ(j["id"], "early-1");
  EXPECT_EQ(j["body_hash"], testing::Fnv1a(body));
  EXPECT_EQ(r.headers["X-Upstream-Port"], std::to_string(primary.port()));  // the final reply's header
  EXPECT_EQ(r.headers.count("Link"), 0u);                                   // not the 103's
  const size_t json_bytes = r.body.size();
  ExpectBigReply(c.Request(http::verb::get, "/big?bytes=" + std::to_string(kBigBytes)));
  // The interim replies left the connection clean: it went back to the pool.
  EXPECT_EQ(primary.connections(), 1);
  WaitForShadows(*m);
  auto k = m->counters();
  EXPECT_EQ(k.primary_ok, 2u);
  EXPECT_EQ(k.primary_bad_gateway, 0u);
  EXPECT_EQ(k.shadow_ok, 2u);
  auto lines = m.StopAndReadLog();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["id"], "early-1");
  EXPECT_EQ(lines[0]["status"], 200);
  ExpectOkLeg(lines[0]["primary"], json_bytes);
  ExpectOkLeg(lines[1]["primary"], kBigBytes);
  ExpectOkLeg(lines[1]["shadow"], kBigBytes);
}

TEST(MirrorUpstreamQuirks, ShadowInterimRepliesAreSkipped) {
  UpstreamBehavior early;
  early.interim = {103};
  TestUpstream primary, shadow(early);
  LoggedMirror m(primary, shadow, "mirror_interim_shadow");
  TestClient c(m->port());
  for (int i = 0; i < 2; ++i) {
    ExpectBigReply(c.Request(http::verb::get, "/big?bytes=" + std::to_string(kBigBytes)));
    WaitForShadows(*m);  // so the shadow's connection is back in the pool
  }
  auto k = m->counters();
  EXPECT_EQ(k.shadow_ok, 2u);
  EXPECT_EQ(k.shadow_failed, 0u);
  EXPECT_EQ(shadow.connections(), 1);  // the shadow's connection was reused after its interim replies
  auto lines = m.StopAndReadLog();
  ASSERT_EQ(lines.size(), 2u);
  for (const Json& line : lines) {
    ExpectOkLeg(line["shadow"], kBigBytes);  // the final reply's status and whole body, not the 103
    ExpectOkLeg(line["primary"], kBigBytes);
  }
}

TEST(MirrorUpstreamQuirks, StaleKeepAliveConnectionIsRetriedOnAFreshOne) {
  UpstreamBehavior closing;
  closing.close_on_reuse = true;
  TestUpstream primary(closing), shadow(closing);
  LoggedMirror m(primary, shadow, "mirror_stale_retry");
  TestClient c(m->port());
  ASSERT_EQ(c.Request(http::verb::post, "/v1/x", ChatBody(1), {{"X-Request-Id", "k-1"}}).status, 200);
  WaitForShadows(*m);  // both connections are pooled, open, and will close under the next request
  ClientResponse r = c.Request(http::verb::post, "/v1/x", ChatBody(2), {{"X-Request-Id", "k-2"}});
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(Json::parse(r.body)["id"], "k-2");
  WaitForShadows(*m);
  auto k = m->counters();
  EXPECT_EQ(k.primary_ok, 2u);
  EXPECT_EQ(k.primary_retries, 1u);
  EXPECT_EQ(k.primary_bad_gateway, 0u);
  EXPECT_EQ(k.shadow_ok, 2u);
  EXPECT_EQ(k.shadow_failed, 0u);
  for (TestUpstream* up : {&primary, &shadow}) {
    // k-2 went to the pooled connection, which closed, then to a new one.
    auto seen = up->seen();
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen[1].id, "k-2");
    EXPECT_EQ(seen[2].id, "k-2");
    EXPECT_EQ(up->connections(), 2);
  }
  auto lines = m.StopAndReadLog();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_FALSE(lines[0]["primary"].contains("retried"));
  for (const char* side : {"primary", "shadow"}) {
    const Json& leg = lines[1][side];
    EXPECT_EQ(leg["state"], "ok") << side << ": " << leg.dump();
    EXPECT_EQ(leg["status"], 200) << side << ": " << leg.dump();
    EXPECT_EQ(leg["retried"], true) << side << ": " << leg.dump();
  }
}

// The retry promised above is on a fresh connection: a second pooled
// connection, closed by the same server at the same time, must not be used.
TEST(MirrorUpstreamQuirks, RetryDoesNotTakeAnotherStaleConnectionFromThePool) {
  UpstreamBehavior closing;
  closing.close_on_reuse = true;
  TestUpstream primary(closing), shadow(closing);
  auto m = StartMirror(primary.url(), shadow.url(), [](MirrorOptions& o) { o.threads = 1; });
  {  // Two requests at once leave two connections to each upstream in the pool. Each upstream answers
     // them only once both have arrived, so they overlap however slowly the machine runs.
    auto slow = [port = m->port()] { return TestClient(port).Request(http::verb::get, "/gate?n=2").status; };
    auto a = std::async(std::launch::async, slow), b = std::async(std::launch::async, slow);
    ASSERT_EQ(a.get(), 200);
    ASSERT_EQ(b.get(), 200);
  }
  WaitForShadows(*m);
  ASSERT_EQ(primary.connections(), 2);
  ASSERT_EQ(shadow.connections(), 2);
  TestClient c(m->port());
  ClientResponse r = c.Request(http::verb::post, "/v1/x", ChatBody());
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  WaitForShadows(*m);
  auto k = m->counters();
  EXPECT_EQ(k.primary_retries, 1u);
  EXPECT_EQ(k.primary_bad_gateway, 0u);
  EXPECT_EQ(k.shadow_ok, 3u);
  EXPECT_EQ(primary.connections(), 3);  // one new connection, for the retry
  EXPECT_EQ(shadow.connections(), 3);
}

// After one good request and one whose reply broke off: each upstream saw
// both on one connection, so the broken one was not sent again.
void ExpectSentOnceOnTheReusedConnection(const TestUpstream& primary, const TestUpstream& shadow) {
  for (const TestUpstream* up : {&primary, &shadow}) {
    EXPECT_EQ(up->requests(), 2) << (up == &primary ? "primary" : "shadow");
    EXPECT_EQ(up->connections(), 1) << (up == &primary ? "primary" : "shadow");
  }
}

TEST(MirrorUpstreamQuirks, ReplyCutInItsHeaderIsNotRetried) {
  TestUpstream primary, shadow;
  LoggedMirror m(primary, shadow, "mirror_cut_header");
  TestClient c(m->port());
  ASSERT_EQ(c.Request(http::verb::post, "/v1/x", ChatBody()).status, 200);
  WaitForShadows(*m);  // the next request goes out on the pooled connections
  ClientResponse r = c.Request(http::verb::get, "/cut_header", "", {{"X-Request-Id", "cut-h"}});
  ASSERT_EQ(r.status, 502) << r.error << r.body;
  EXPECT_EQ(Json::parse(r.body)["error"]["type"], "mirror_error");
  WaitForShadows(*m);
  auto k = m->counters();
  EXPECT_EQ(k.primary_bad_gateway, 1u);
  EXPECT_EQ(k.primary_retries, 0u);
  EXPECT_EQ(k.shadow_failed, 1u);
  ExpectSentOnceOnTheReusedConnection(primary, shadow);
  auto lines = m.StopAndReadLog();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["id"], "cut-h");
  EXPECT_EQ(lines[1]["status"], 502);
  EXPECT_EQ(lines[1]["primary"]["state"], "bad_gateway");
  EXPECT_EQ(lines[1]["shadow"]["state"], "failed");
  for (const char* side : {"primary", "shadow"}) {
    const Json& leg = lines[1][side];
    EXPECT_TRUE(leg["error"].get<std::string>().starts_with("before the response header")) << leg.dump();
    EXPECT_FALSE(leg.contains("retried")) << side << ": " << leg.dump();
  }
}

TEST(MirrorUpstreamQuirks, ReplyCutInItsBodyIsReportedFailedNotRetried) {
  constexpr size_t kSent = 1000;  // of the 2000 announced
  TestUpstream primary, shadow;
  LoggedMirror m(primary, shadow, "mirror_cut_body", [](MirrorOptions& o) {
    o.keepalive_timeout = std::chrono::seconds(10);  // a mirror that kept the cut connection open ends it here
  });
  TestClient c(m->port());
  ASSERT_EQ(c.Request(http::verb::post, "/v1/x", ChatBody()).status, 200);
  WaitForShadows(*m);
  ClientResponse r = c.Request(http::verb::get, "/cut_body?bytes=" + std::to_string(kSent));
  EXPECT_EQ(r.status, 0) << "the client must see a cut reply, got " << r.status;
  EXPECT_NE(r.error.find("partial message"), std::string::npos) << r.error;
  // The mirror closed the client's connection when the primary broke off (50 ms
  // after its first bytes), not at the keep-alive time-out.
  EXPECT_LT(r.ms, 5000.0);
  WaitForShadows(*m);
  auto k = m->counters();
  EXPECT_EQ(k.primary_failed, 1u);
  EXPECT_EQ(k.primary_retries, 0u);
  EXPECT_EQ(k.shadow_failed, 1u);
  ExpectSentOnceOnTheReusedConnection(primary, shadow);
  auto lines = m.StopAndReadLog();
  ASSERT_EQ(lines.size(), 2u);
  for (const char* side : {"primary", "shadow"}) {
    const Json& leg = lines[1][side];
    EXPECT_EQ(leg["state"], "failed") << side << ": " << leg.dump();
    EXPECT_EQ(leg["status"], 200) << side << ": " << leg.dump();
    EXPECT_EQ(leg["bytes"], kSent) << side << ": " << leg.dump();
    EXPECT_TRUE(leg["error"].get<std::string>().starts_with("mid-reply")) << leg.dump();
    EXPECT_FALSE(leg.contains("retried")) << side << ": " << leg.dump();
  }
}

}  // namespace
}  // namespace twinscope::mirror
