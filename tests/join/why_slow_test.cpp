// "Why slow" keeps every finding and lists only findings (src/join/why_slow.h, src/views/join_text.h).
#include "join/why_slow.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "join_fixture.h"
#include "join_test_util.h"
#include "views/join_doc.h"
#include "views/join_text.h"

namespace twinscope {
namespace {

using testing::Dir;
using testing::EvenBlocks;
using testing::FakeLaunch;
using testing::Join;
using testing::WriteTwin;

std::string Text(const join::JoinedModel& m) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  views::PrintJoin(f, m, 0);
  std::fclose(f);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// A CuPy kernel whose block 7 spins longer on every 10th launch: 200 launches, 20 of them slow, each a
// straggler. The database kept five per shape; it keeps all 20, and join.json too.
TEST(WhySlowRows, EveryStragglerOfTheCupyKernel) {
  std::vector<FakeLaunch> v = testing::EvenSteps(200, 32, 8);
  for (size_t i = 9; i < v.size(); i += 10) {
    v[i].dur_ns = 40'000;
    v[i].blocks[7].exit_ns += 60'000;
  }
  auto m = Join(WriteTwin(Dir(), v));
  ASSERT_EQ(m.groups.size(), 1u);
  const auto& g = m.groups[0];
  ASSERT_EQ(g.slow.size(), 20u);
  for (const auto& sl : g.slow) {
    EXPECT_EQ(sl.verdicts, join::kVerdictStraggler) << sl.text;
    EXPECT_NE(sl.text.find("block 7 on SM"), std::string::npos) << sl.text;
    EXPECT_EQ(m.shadow[m.matches[sl.match].shadow].path.back(), '9') << "every 10th launch";
  }
  auto j = views::JoinJson(m, {}, {});
  ASSERT_EQ(j["why_slow"].size(), 1u);
  EXPECT_EQ(j["why_slow"][0]["slow"].size(), 20u);
  // The text shows the first five and counts the rest; it ends with the shapes without a finding.
  const std::string t = Text(m);
  EXPECT_NE(t.find("200 launches, median "), std::string::npos) << t;
  EXPECT_NE(t.find("; 20 slow\n"), std::string::npos) << t;
  EXPECT_EQ(Count(t, "one block held it up"), 5u) << t;
  EXPECT_NE(t.find("... 15 more with another block structure than the median launch's: straggler 15 ("),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("0 of 1 shapes had no finding"), std::string::npos) << t;
}

// 10,000 qualifying launches of one shape (one block each, 5x the median with unchanged blocks): 10,000 rows,
// and one line in the text.
TEST(WhySlowRows, TenThousandQualifyingLaunchesAreTenThousandRows) {
  std::vector<FakeLaunch> v;
  for (int i = 0; i < 20'001; ++i) {
    FakeLaunch l;
    l.path = "step#" + std::to_string(i);
    l.grid = {1, 1, 1};
    l.cpu_ns = 100'000 * static_cast<uint64_t>(i + 1);
    l.dur_ns = i % 2 ? 50'000 : 10'000;
    l.blocks = EvenBlocks(1, 1, 2'000);
    v.push_back(l);
  }
  auto m = Join(WriteTwin(Dir(), v));
  ASSERT_EQ(m.groups.size(), 1u);
  EXPECT_EQ(m.groups[0].slow.size(), 10'000u);
  auto j = views::JoinJson(m, {}, {});
  EXPECT_EQ(j["why_slow"][0]["slow"].size(), 10'000u);
  const std::string t = Text(m);
  EXPECT_NE(t.find("    10000 launches at 5.00x the median (up to +40.0 us) with unchanged block structure: the time "
                   "went elsewhere"),
            std::string::npos)
      << t.substr(t.find("why slow"));
  EXPECT_EQ(Count(t, "    launch "), 0u) << "unchanged launches are one line per shape";
}

// On 1 us launches: +210 ns (1.21x) with unchanged blocks is no finding; a launch on fewer SMs at 1.3x is.
// The text lists the shape with the finding only and ends with the count of shapes without one.
TEST(WhySlowFindings, AbsoluteFloorBesideTheRatio) {
  std::vector<FakeLaunch> v;
  for (int i = 0; i < 40; ++i) {
    FakeLaunch l;
    const bool wide = i % 2 == 0;  // two shapes, interleaved
    l.path = "step#" + std::to_string(i);
    l.grid = {wide ? 64u : 32u, 1, 1};
    l.cpu_ns = 1'000'000 * static_cast<uint64_t>(i + 1);
    l.dur_ns = 1'000;
    l.blocks = EvenBlocks(wide ? 64 : 32, 8, 500);
    v.push_back(l);
  }
  v[10].dur_ns = 1'300;  // wide: 1.3x on 2 SMs
  v[10].blocks = EvenBlocks(64, 2, 500);
  v[11].dur_ns = v[13].dur_ns = 1'210;  // narrow: +210 ns, the same blocks
  auto m = Join(WriteTwin(Dir(), v));
  ASSERT_EQ(m.groups.size(), 2u);
  const join::ShapeGroup& wide = m.groups[0].grid.x == 64 ? m.groups[0] : m.groups[1];
  const join::ShapeGroup& narrow = m.groups[0].grid.x == 64 ? m.groups[1] : m.groups[0];
  ASSERT_EQ(wide.slow.size(), 1u);
  EXPECT_EQ(wide.slow[0].verdicts, join::kVerdictFewerSms) << wide.slow[0].text;
  EXPECT_TRUE(narrow.slow.empty()) << narrow.slow[0].text;
  EXPECT_NE(narrow.note.find("2 launches at up to 1.21x the median (+210 ns) with unchanged blocks"), std::string::npos)
      << narrow.note;
  const std::string t = Text(m);
  const std::string last = "  1 of 2 shapes had no finding";
  ASSERT_NE(t.rfind(last), std::string::npos) << t;
  EXPECT_EQ(t.find('\n', t.rfind(last)), t.size() - 1) << "the text ends with the count:\n" << t;
  EXPECT_NE(t.find("grid [64,1,1]"), std::string::npos) << t;
  EXPECT_EQ(t.find("grid [32,1,1]"), std::string::npos) << "a shape without a finding is not listed:\n" << t;
}

// A launch of 1,000 blocks keeps a sample of 64 block durations, not 1,000: the working blocks counted from it
// are within 1/64 of the launch's blocks (here 600 of 1,000 ran, 400 returned at once).
TEST(WhySlowFindings, LargeLaunchesCountWorkingBlocksFromTheirSample) {
  std::vector<FakeLaunch> v = testing::EvenSteps(7, 1'000, 8);
  v[4].dur_ns = 30'000;
  for (auto& b : v[4].blocks)
    if (b.block < 400) b.exit_ns = b.enter_ns + 50;
  auto m = Join(WriteTwin(Dir(), v));
  for (const auto& s : m.shadow) {
    EXPECT_EQ(s.block_durations.size(), 64u);
    EXPECT_EQ(s.block_durations_of, 1'000u);
  }
  ASSERT_EQ(m.groups.size(), 1u);
  ASSERT_EQ(m.groups[0].slow.size(), 1u);
  const auto& sl = m.groups[0].slow[0];
  EXPECT_EQ(sl.verdicts, join::kVerdictFewerBlocks) << sl.text;
  const auto& slow = m.shadow[m.matches[sl.match].shadow];
  EXPECT_NEAR(static_cast<double>(slow.blocks_working), 600.0, 1'000.0 / 64) << sl.text;
  EXPECT_EQ(m.shadow[m.matches[m.groups[0].reference].shadow].blocks_working, 1'000u);
}

}  // namespace
}  // namespace twinscope
