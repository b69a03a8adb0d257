// The replay of a mirror request log (mirror/replay.h): the same requests (method, path, body, headers,
// X-Request-Id) reach the server, cancelled ones are cut where their clients cut them, arrival offsets are
// kept unless the replay goes all at once, and what cannot be replayed is said.
#include "mirror/replay.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mirror/mirror.h"
#include "mirror_harness.h"
#include "upstream_server.h"

namespace twinscope::mirror {
namespace {

using testing::ChatBody;
using testing::StartMirror;
using testing::TempLogPath;
using testing::TestClient;
using testing::TestUpstream;
using Json = nlohmann::json;
using namespace std::chrono_literals;

std::string SeenHeader(const testing::SeenRequest& r, const std::string& name) {
  for (const auto& [n, v] : r.headers)
    if (n == name) return v;
  return "<absent>";
}

// A log made by the mirror itself: two plain requests, then one cut by its client after its first event.
std::string RecordedLog(const std::string& name) {
  TestUpstream primary;
  const std::string path = TempLogPath(name);
  std::remove(path.c_str());
  auto m = StartMirror(primary.url(), "", [&](MirrorOptions& o) { o.log_path = path; });
  {
    TestClient c(m->port());
    EXPECT_EQ(c.Request(http::verb::post, "/v1/chat/completions", ChatBody(1),
                        {{"X-Request-Id", "a"}, {"Authorization", "Bearer k"}, {"X-Engine-Hint", "h1"}})
                  .status,
              200);
    std::this_thread::sleep_for(300ms);  // an arrival gap the replay keeps
    EXPECT_EQ(c.Request(http::verb::post, "/v1/completions", ChatBody(2), {{"X-Request-Id", "b"}}).status, 200);
  }
  {
    TestClient c(m->port());
    EXPECT_TRUE(c.Connect());
    http::request<http::string_body> req{http::verb::post, "/stream?n=100&gap_ms=20", 11};
    req.set(http::field::host, "x");
    req.set("X-Request-Id", "cut");
    req.body() = ChatBody(3);
    req.prepare_payload();
    http::write(c.stream(), req);
    http::response_parser<http::buffer_body> p;
    http::read_header(c.stream(), c.buffer(), p);
    char piece[256];
    p.get().body().data = piece;
    p.get().body().size = sizeof piece;
    beast::error_code ec;
    http::read_some(c.stream(), c.buffer(), p, ec);
    c.Close();
  }
  EXPECT_TRUE(TestUpstream::WaitFor([&] { return m->counters().client_disconnects == 1; }, 3s));
  m->Shutdown();
  m->Wait();
  return path;
}

TEST(Replay, SendsTheSameRequestsAndCutsTheCancelledOneWhereItsClientDid) {
  const std::string path = RecordedLog("replay_same");
  auto log = ::twinscope::mirror::ReadRequestLog(path);
  ASSERT_TRUE(log.ok()) << log.status().message();
  ASSERT_EQ(log->requests.size(), 3u);
  EXPECT_EQ(log->replayable(), 3u);
  TestUpstream shadow;
  ReplayOptions o;
  o.port = shadow.port();
  o.keep_arrival_offsets = true;
  const auto t0 = std::chrono::steady_clock::now();
  ReplayOutcome out = Replay(*log, o);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(out.ok, 2u) << out.ToJson().dump(2);
  EXPECT_EQ(out.cancelled, 1u) << out.ToJson().dump(2);
  EXPECT_EQ(out.failed, 0u);
  EXPECT_GE(took, 250ms) << "the 300 ms arrival gap is kept";
  EXPECT_TRUE(TestUpstream::WaitFor([&] { return shadow.cancels() == 1; }, 3s)) << "the stream was cut";
  EXPECT_LT(out.results[2].bytes, 200u) << "cut after about the bytes the client read";
  const auto seen = shadow.WaitForSeen(3);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].id, "a");
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].target, "/v1/chat/completions");
  EXPECT_EQ(seen[0].body, ChatBody(1));
  EXPECT_EQ(SeenHeader(seen[0], "X-Engine-Hint"), "h1");
  EXPECT_EQ(SeenHeader(seen[0], "Authorization"), "<absent>") << "a redacted credential is not sent";
  EXPECT_EQ(seen[1].id, "b");
  EXPECT_EQ(seen[1].body, ChatBody(2));
  EXPECT_EQ(seen[2].id, "cut");
  EXPECT_EQ(shadow.completed(), 2);
  std::remove(path.c_str());
}

TEST(Replay, AllAtOnceDoesNotWaitForArrivalOffsets) {
  const std::string path = RecordedLog("replay_fast");
  auto log = ::twinscope::mirror::ReadRequestLog(path);
  ASSERT_TRUE(log.ok());
  // Spread the arrivals 5 s apart: kept, they would take 10 s.
  for (size_t i = 0; i < log->requests.size(); ++i) log->requests[i].arrival_unix_us = 1'000'000 + 5'000'000 * i;
  TestUpstream shadow;
  ReplayOptions o;
  o.port = shadow.port();
  o.keep_arrival_offsets = false;
  const auto t0 = std::chrono::steady_clock::now();
  ReplayOutcome out = Replay(*log, o);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);
  EXPECT_EQ(out.ok + out.cancelled, 3u) << out.ToJson().dump(2);
  std::remove(path.c_str());
}

TEST(Replay, AServerThatIsGoneFailsEachRequestAndSaysWhy) {
  const std::string path = RecordedLog("replay_gone");
  auto log = ::twinscope::mirror::ReadRequestLog(path);
  ASSERT_TRUE(log.ok());
  ReplayOptions o;
  o.port = testing::ClosedPort();
  o.keep_arrival_offsets = false;
  ReplayOutcome out = Replay(*log, o);
  EXPECT_EQ(out.failed, 3u);
  EXPECT_NE(out.results[0].error.find("connect"), std::string::npos) << out.results[0].error;
  std::remove(path.c_str());
}

TEST(Replay, AnOlderLogWithoutRequestLinesIsNotReplayableAndSaysSo) {
  const std::string path = TempLogPath("replay_old");
  std::ofstream(path) << R"({"id":"old-1","method":"POST","path":"/x","arrival_unix_us":1,"status":200})"
                      << "\n";
  auto log = ::twinscope::mirror::ReadRequestLog(path);
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(log->requests.size(), 1u);
  EXPECT_EQ(log->end_lines_without_request, 1u);
  EXPECT_FALSE(log->requests[0].replayable);
  ReplayOptions o;
  o.port = testing::ClosedPort();
  ReplayOutcome out = Replay(*log, o);
  EXPECT_EQ(out.not_replayable, 1u);
  EXPECT_NE(out.results[0].error.find("older log format"), std::string::npos);
  EXPECT_FALSE(::twinscope::mirror::ReadRequestLog(path + ".missing").ok());
  std::remove(path.c_str());
}

TEST(Replay, AnAbortStopsTheRequestsNotYetSent) {
  const std::string path = RecordedLog("replay_abort");
  auto log = ::twinscope::mirror::ReadRequestLog(path);
  ASSERT_TRUE(log.ok());
  for (size_t i = 0; i < log->requests.size(); ++i) log->requests[i].arrival_unix_us = 1'000'000 + 30'000'000 * i;
  TestUpstream shadow;
  ReplayOptions o;
  o.port = shadow.port();
  const auto t0 = std::chrono::steady_clock::now();
  o.abort = [&] { return std::chrono::steady_clock::now() - t0 > 500ms; };
  ReplayOutcome out = Replay(*log, o);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_TRUE(out.aborted);
  EXPECT_EQ(out.ok, 1u);
  EXPECT_EQ(out.not_sent, 2u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace twinscope::mirror
