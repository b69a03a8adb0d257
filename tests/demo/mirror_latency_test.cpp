// The mirror-latency client (client/mirror_latency.h) against fake-engine
// servers on loopback: the pairs' ids and their interleaved order, a slower
// "mirror" showing up as added latency, the copies sent to a shadow, failures
// counted; and the statistics on hand-made results.
#include "client/mirror_latency.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "demo_test_util.h"

namespace twinscope::demo {
namespace {

using namespace testing;  // NOLINT
using Json = nlohmann::json;

std::string TracePath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("twinscope_mirror_latency_" + std::to_string(getpid()) + "_" + name + ".jsonl"))
      .string();
}

std::vector<std::string> TracedIds(const std::string& path) {
  std::vector<std::string> ids;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) ids.push_back(Json::parse(line)["id"]);
  return ids;
}

MirrorLatencyOptions Options(const std::string& direct, const std::string& mirror, int pairs) {
  MirrorLatencyOptions o;
  o.request.max_tokens = 6;
  o.request.seed = 7;
  o.direct_url = direct;
  o.mirror_url = mirror;
  o.pairs = pairs;
  return o;
}

TEST(MirrorLatency, PairsAlternateTheirOrderAndCarryTheirIds) {
  ServingOptions so;
  so.trace_requests = TracePath("order");
  std::vector<std::string> ids;
  {
    FakeServer s(so);
    MirrorLatencyReport r = RunMirrorLatency(Options(s.url(), s.url(), 3));  // one server on both paths
    ASSERT_EQ(r.direct.size(), 3u);
    ASSERT_EQ(r.mirror.size(), 3u);
    EXPECT_EQ(r.failed(), 0);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(r.direct[i].request_id, "lat-direct-" + std::to_string(i));
      EXPECT_EQ(r.mirror[i].request_id, "lat-mirror-" + std::to_string(i));
      EXPECT_EQ(r.direct[i].content, r.mirror[i].content) << "the same request both ways";
      EXPECT_EQ(r.direct[i].tokens(), 6);
    }
    EXPECT_NE(r.direct[0].content, r.direct[1].content);
    s.Stop();
    ids = TracedIds(so.trace_requests);
  }
  // One at a time, direct first for even pairs and mirrored first for odd ones.
  EXPECT_EQ(ids, (std::vector<std::string>{"lat-direct-0", "lat-mirror-0", "lat-mirror-1", "lat-direct-1",
                                           "lat-direct-2", "lat-mirror-2"}));
  std::filesystem::remove(so.trace_requests);
}

TEST(MirrorLatency, ASlowerPathShowsAsAddedLatencyAndAShadowGetsTheDirectCopies) {
  FakeServer fast({}, TinyEngine(std::chrono::microseconds(300)));
  FakeServer slow({}, TinyEngine(std::chrono::microseconds(6000)));  // stands in for a slow mirror
  ServingOptions so;
  so.trace_requests = TracePath("shadow");
  std::vector<std::string> shadow_ids;
  {
    FakeServer shadow(so);
    MirrorLatencyOptions o = Options(fast.url(), slow.url(), 4);
    o.shadow_url = shadow.url();
    MirrorLatencyReport r = RunMirrorLatency(o);
    EXPECT_EQ(r.failed(), 0);
    EXPECT_EQ(r.direct_stats.ok, 4);
    EXPECT_EQ(r.mirror_stats.ok, 4);
    // The slow path sleeps 6 ms a step: at least one step to the first token, six to the last (lower
    // bounds, so no race with a busy machine); the additions are mirrored minus direct.
    EXPECT_GE(r.mirror_stats.ttft_ms_p50, 6.0);
    EXPECT_GE(r.mirror_stats.total_ms_p50, 36.0);
    EXPECT_GE(r.mirror_stats.total_ms_p99, r.mirror_stats.total_ms_p50);
    EXPECT_DOUBLE_EQ(r.added_ttft_ms_p50, r.mirror_stats.ttft_ms_p50 - r.direct_stats.ttft_ms_p50);
    EXPECT_DOUBLE_EQ(r.added_total_ms_p99, r.mirror_stats.total_ms_p99 - r.direct_stats.total_ms_p99);
    EXPECT_EQ(r.paired, 4);
    EXPECT_EQ(r.shadow_copies, 4);
    EXPECT_EQ(r.shadow_copies_failed, 0);
    Json j = r.ToJson();
    EXPECT_EQ(j["pairs"], 4);
    EXPECT_EQ(j["direct"]["ok"], 4);
    EXPECT_EQ(j["added_ms"]["total_p50"], r.added_total_ms_p50);
    EXPECT_EQ(j["mirror_results"].size(), 4u);
    EXPECT_NE(r.Describe().find("mirror added latency (4 pairs): TTFT p50 +"), std::string::npos) << r.Describe();
    shadow.Stop();
    shadow_ids = TracedIds(so.trace_requests);
  }
  EXPECT_EQ(shadow_ids, (std::vector<std::string>{"lat-direct-0", "lat-direct-1", "lat-direct-2", "lat-direct-3"}));
  std::filesystem::remove(so.trace_requests);
}

TEST(MirrorLatency, FailuresAreCountedAndSaid) {
  FakeServer s;
  MirrorLatencyOptions o = Options(s.url(), "http://127.0.0.1:1", 2);  // nothing listens on port 1
  o.request.timeout = std::chrono::milliseconds(2000);
  MirrorLatencyReport r = RunMirrorLatency(o);
  EXPECT_EQ(r.direct_stats.ok, 2);
  EXPECT_EQ(r.mirror_stats.ok, 0);
  EXPECT_EQ(r.failed(), 2);
  EXPECT_EQ(r.added_ttft_ms_p50, 0) << "no difference without both paths";
  EXPECT_EQ(r.paired, 0);
  EXPECT_NE(r.Describe().find("2 requests FAILED"), std::string::npos) << r.Describe();
  EXPECT_NE(r.ToJson()["mirror_results"][0]["error"].get<std::string>().find("connect"), std::string::npos);
}

TEST(MirrorLatency, StatisticsOfKnownResults) {
  MirrorLatencyReport r;
  for (int i = 0; i < 10; ++i) {
    ChatResult d, m;
    d.ttft_ms = 10 + i;  // 10..19
    d.total_ms = 100 + i;
    m.ttft_ms = 11 + i;  // 1 ms more
    m.total_ms = 103 + 2 * i;
    r.direct.push_back(d);
    r.mirror.push_back(m);
  }
  r.mirror[9].error = "timed out";
  ComputeMirrorLatency(&r);
  EXPECT_EQ(r.direct_stats.ok, 10);
  EXPECT_EQ(r.mirror_stats.ok, 9);
  EXPECT_EQ(r.direct_stats.ttft_ms_p50, 14);  // nearest rank: the 5th of 10
  EXPECT_EQ(r.direct_stats.ttft_ms_p99, 19);
  EXPECT_EQ(r.mirror_stats.ttft_ms_p50, 15);  // the 5th of 11..19
  EXPECT_EQ(r.mirror_stats.ttft_ms_p99, 19);
  EXPECT_EQ(r.added_ttft_ms_p50, 1);
  EXPECT_EQ(r.added_ttft_ms_p99, 0);
  EXPECT_EQ(r.paired, 9);
  EXPECT_EQ(r.paired_ttft_diff_ms_p50, 1);
  EXPECT_EQ(r.paired_total_diff_ms_p50, 7);  // 3 + i for i = 0..8: the 5th is 7
  EXPECT_EQ(r.failed(), 1);
}

}  // namespace
}  // namespace twinscope::demo
