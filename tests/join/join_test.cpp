// The joined model on synthetic twin traces with known answers: matching
// (exact, shape differs, time only, unmatched), drift, damaged inputs, and one
// why-slow case per verdict.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "join/join_model.h"
#include "join/join_views.h"
#include "join_fixture.h"
#include "join_test_util.h"
#include "views/join_doc.h"
#include "views/join_text.h"

namespace twinscope {
namespace {

using testing::Dir;
using testing::Join;

using testing::EvenBlocks;
using testing::FakeBlock;
using testing::FakeLaunch;
using testing::WriteTwin;

// `steps` decode steps, each with `per_step` target launches, 1 ms apart.
std::vector<FakeLaunch> Steps(int steps, int per_step) {
  std::vector<FakeLaunch> v;
  uint64_t t = 1'000'000;
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < per_step; ++i) {
      FakeLaunch l;
      l.path = "step#" + std::to_string(s);
      l.ordinal = static_cast<uint32_t>(i);
      l.cpu_ns = t;
      t += 1'000'000;
      v.push_back(l);
    }
  }
  return v;
}

TEST(Join, IdenticalRunsMatchExactly) {
  auto m = Join(WriteTwin(Dir(), Steps(4, 3)));
  EXPECT_EQ(m.summary.shadow_launches, 12u);
  EXPECT_EQ(m.summary.exact, 12u);
  EXPECT_EQ(m.summary.time_only, 0u);
  EXPECT_EQ(m.summary.unmatched_shadow, 0u);
  EXPECT_EQ(m.summary.primary_target_unmatched, 0u);
  EXPECT_EQ(m.summary.diverged, 0u);
  EXPECT_TRUE(m.summary.alignment.identical);
  EXPECT_TRUE(m.divergences.empty());
  ASSERT_EQ(m.matches.size(), 12u);
  // Each shadow launch is paired with the primary launch of the same key.
  for (const auto& mt : m.matches) {
    EXPECT_EQ(m.shadow[mt.shadow].path, m.primary[mt.primary].path);
    EXPECT_EQ(m.shadow[mt.shadow].ordinal, m.primary[mt.primary].ordinal);
  }
  ASSERT_EQ(m.drift.size(), 4u);
  for (const auto& d : m.drift) EXPECT_EQ(d.exact, 3u) << d.range;
  // Same clocks up to an offset: a time-only join agrees everywhere here.
  EXPECT_EQ(m.summary.time_only_evaluated, 12u);
  EXPECT_EQ(m.summary.time_only_agree, 12u);
  EXPECT_TRUE(m.warnings.empty());
}

// Names are interned (docs/join.md, "Reads"): equal values are one string, each launch holds a reference to it,
// not a copy (before, each launch copied its kernel and path: ~500 bytes a launch at issue 31's scale).
TEST(Join, LaunchNamesAreOneStringPerDistinctName) {
  const join::Name a(std::string("a_kernel_name_longer_than_the_small_string_buffer"));
  const size_t table = join::Name::TableSize();
  const join::Name b(std::string("a_kernel_name_longer_than_the_small_string_buffer"));
  EXPECT_EQ(join::Name::TableSize(), table);
  EXPECT_EQ(a.c_str(), b.c_str());
  EXPECT_TRUE(a == b);
  EXPECT_TRUE(a == std::string("a_kernel_name_longer_than_the_small_string_buffer"));
  EXPECT_FALSE(a == join::Name("another"));
  EXPECT_EQ(join::Name::TableSize(), table + 1);
  EXPECT_TRUE(join::Name("abc") < join::Name("abd"));
  EXPECT_TRUE(join::Name().empty());
  EXPECT_EQ(nlohmann::json(a).get<join::Name>(), a);
  EXPECT_EQ(a + "!", "a_kernel_name_longer_than_the_small_string_buffer!");

  auto m = Join(WriteTwin(Dir(), Steps(4, 3)));
  ASSERT_EQ(m.primary.size(), 12u);
  for (const auto& p : m.primary) {
    EXPECT_EQ(p.kernel.c_str(), m.primary[0].kernel.c_str());
    EXPECT_EQ(p.demangled.c_str(), m.primary[0].demangled.c_str());
  }
  for (const auto& s : m.shadow) EXPECT_EQ(s.kernel.c_str(), m.primary[0].kernel.c_str());
  EXPECT_EQ(m.primary[3].path.c_str(), m.shadow[3].path.c_str());  // the same step's path: one string
}

TEST(Join, StretchedShadowFoolsTheTimeOnlyJoinButNotTheKeys) {
  testing::WriteOptions o;
  o.shadow_stretch = 1.6;  // instrumentation slows the shadow down
  auto m = Join(WriteTwin(Dir(), Steps(10, 3), o));
  EXPECT_EQ(m.summary.exact, 30u);
  EXPECT_EQ(m.summary.time_only_evaluated, 30u);
  EXPECT_LT(m.summary.time_only_agree, 20u) << "a 1.6x stretch must mislead nearest-in-time matching";
}

TEST(Join, ExtraShadowLaunchIsMatchedByTimeOnlyAndLabelled) {
  auto launches = Steps(3, 2);
  FakeLaunch extra = launches[3];
  extra.ordinal = 9;  // a key the primary never had, of a shape no primary launch has there
  extra.grid = {3, 1, 1};
  extra.cpu_ns += 10'000;
  extra.in_primary = false;
  launches.insert(launches.begin() + 4, extra);
  // And a primary launch the shadow never made, in the next step.
  FakeLaunch missing = launches[5];
  missing.ordinal = 8;
  missing.grid = {4, 1, 1};
  missing.cpu_ns += 10'000;
  missing.in_shadow = false;
  launches.insert(launches.begin() + 6, missing);
  auto m = Join(WriteTwin(Dir(), launches));
  EXPECT_EQ(m.summary.shadow_launches, 7u);
  EXPECT_EQ(m.summary.exact, 6u);
  EXPECT_EQ(m.summary.time_only, 1u);
  EXPECT_EQ(m.summary.unmatched_shadow, 0u);
  EXPECT_EQ(m.summary.primary_target_unmatched, 0u);
  bool found = false;
  for (const auto& mt : m.matches) {
    if (mt.kind != join::MatchKind::kTime) continue;
    found = true;
    EXPECT_EQ(m.shadow[mt.shadow].ordinal, 9u);
    EXPECT_EQ(m.primary[mt.primary].ordinal, 8u);
    EXPECT_GE(mt.region, 0) << "inside a divergence region";
  }
  EXPECT_TRUE(found);
  for (const auto& d : m.drift) EXPECT_EQ(d.time_only, d.range == "step#1" ? 1u : 0u) << d.range;
  EXPECT_EQ(m.divergences.size(), 2u);  // the extra launch in step#1, the missing one in step#2
}

TEST(Join, ShadowLaunchOfAnUnknownKernelIsUnmatched) {
  auto launches = Steps(2, 2);
  FakeLaunch other = launches[0];
  other.kernel = "_Z9only_herev";
  other.in_primary = false;
  launches.push_back(other);
  auto m = Join(WriteTwin(Dir(), launches));
  EXPECT_EQ(m.summary.exact, 4u);
  EXPECT_EQ(m.summary.unmatched_shadow, 1u);
  EXPECT_EQ(m.summary.target_kernels.size(), 2u);
}

TEST(Join, RangeWithAnotherBatchShapeIsDivergedNotExact) {
  auto launches = Steps(3, 2);
  launches[2].shadow_grid = {5, 1, 1};  // step#1: the shadow batched 5 tokens, the primary 8
  launches[3].shadow_grid = {5, 1, 1};
  auto m = Join(WriteTwin(Dir(), launches));
  EXPECT_EQ(m.summary.exact, 4u);
  EXPECT_EQ(m.summary.diverged, 2u);
  EXPECT_EQ(m.summary.diverged_shape, 2u);
  for (const auto& d : m.drift) {
    EXPECT_EQ(d.shape_differs, d.range == "step#1" ? 2u : 0u) << d.range;
    EXPECT_EQ(d.diverged, d.range == "step#1" ? 2u : 0u) << d.range;
  }
}

TEST(Join, GraphNodesSharingACorrelationIdMatchByKey) {
  std::vector<FakeLaunch> launches;
  for (int replay = 0; replay < 3; ++replay) {
    for (int node = 0; node < 4; ++node) {
      FakeLaunch l;
      l.path = "decode#" + std::to_string(replay);
      l.ordinal = static_cast<uint32_t>(node);
      l.graph = true;
      l.correlation = 500 + static_cast<uint32_t>(replay);  // one graph launch: one correlation id
      l.cpu_ns = 1'000'000 * (replay + 1) + static_cast<uint64_t>(node);
      l.dur_ns = 1000 + 100 * static_cast<uint64_t>(node);
      launches.push_back(l);
    }
  }
  auto m = Join(WriteTwin(Dir(), launches));
  EXPECT_EQ(m.summary.exact, 12u);
  EXPECT_EQ(m.summary.primary_target_without_kernel, 0u);
  for (const auto& mt : m.matches) {
    const auto& p = m.primary[mt.primary];
    EXPECT_TRUE(p.graph);
    ASSERT_TRUE(p.have_kernel);
    // The kernel record tied to each node is its own (duration 1000 + 100 * node).
    EXPECT_EQ(p.end_ns - p.start_ns, 1000u + 100u * p.ordinal);
  }
}

TEST(Join, KilledShadowJoinsWhatItLeftAndSaysSo) {
  testing::WriteOptions o;
  o.shadow_keep_fraction = 0.5;
  auto launches = Steps(20, 5);
  auto m = Join(WriteTwin(Dir(), launches, o));
  EXPECT_GT(m.summary.exact, 0u);
  EXPECT_LT(m.summary.shadow_launches, 100u);
  EXPECT_EQ(m.summary.exact, m.summary.shadow_launches);
  EXPECT_EQ(m.summary.primary_target_unmatched, 100u - m.summary.exact);
  ASSERT_FALSE(m.warnings.empty());
  EXPECT_NE(m.warnings[0].find("shadow trace is damaged"), std::string::npos) << m.warnings[0];
}

TEST(Join, DamagedPrimaryJoinsWhatCanBeRead) {
  auto f = WriteTwin(Dir(), Steps(20, 5));
  {
    std::fstream fs(f.primary, std::ios::in | std::ios::out | std::ios::binary);
    fs.seekp(static_cast<std::streamoff>(std::filesystem::file_size(f.primary) / 2));
    fs.put('\x5a').put('\xa5').put('\x5a');
  }
  auto m = Join(f);
  ASSERT_FALSE(m.warnings.empty());
  EXPECT_NE(m.warnings[0].find("primary trace is damaged"), std::string::npos) << m.warnings[0];
  EXPECT_GT(m.summary.exact, 0u);
  EXPECT_LT(m.summary.exact, 100u);
  EXPECT_EQ(m.summary.exact + m.summary.time_only + m.summary.unmatched_shadow, 100u);
}

TEST(Join, WrongRolesAndMissingFilesAreClearErrors) {
  auto f = WriteTwin(Dir(), Steps(1, 1));
  auto swapped = join::JoinTraces(f.shadow, f.primary);
  ASSERT_FALSE(swapped.ok());
  EXPECT_NE(swapped.status().message().find("give the primary (twinscope record) first"), std::string::npos);
  auto missing = join::JoinTraces(f.primary, f.shadow + ".nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("shadow"), std::string::npos);
}

TEST(Join, ConcurrentRunFlagsPrimaryKernelsInsideTheShadowsWindow) {
  testing::WriteOptions o;
  o.primary_clock_realtime_ns = 1'700'000'000'000'000'000ull;  // CUPTI time 0 is this realtime
  auto f = WriteTwin(Dir(), Steps(1, 10), o);                  // kernels start at 1, 2, ... 10 ms (+2 us)
  join::JoinOptions jo;
  jo.concurrent = true;
  jo.shadow_window_start_realtime_ns = o.primary_clock_realtime_ns + 3'500'000;
  jo.shadow_window_end_realtime_ns = o.primary_clock_realtime_ns + 6'500'000;
  auto m = Join(f, jo);
  EXPECT_EQ(m.summary.overlapped_primary_kernels, 3u);  // the kernels at 4, 5 and 6 ms
  for (const auto& p : m.primary) EXPECT_EQ(p.overlapped, p.ordinal >= 3 && p.ordinal <= 5) << p.ordinal;
  EXPECT_EQ(m.summary.overlap.primary_first_kernel, static_cast<int64_t>(o.primary_clock_realtime_ns) + 1'002'000);
  // Within the primary's lifetime: flagged as before.
  jo.primary_start_realtime_ns = o.primary_clock_realtime_ns;
  jo.primary_end_realtime_ns = o.primary_clock_realtime_ns + 20'000'000;
  EXPECT_EQ(Join(f, jo).summary.overlapped_primary_kernels, 3u);
  // A clock pair that puts the primary's kernels an hour after its own end: nothing flagged, and said.
  jo.primary_start_realtime_ns -= 3'600'000'000'000ull;
  jo.primary_end_realtime_ns -= 3'600'000'000'000ull;
  auto wrong = Join(f, jo);
  EXPECT_EQ(wrong.summary.overlapped_primary_kernels, 0u);
  ASSERT_FALSE(wrong.warnings.empty());
  EXPECT_NE(wrong.warnings.back().find("outside the primary process's lifetime"), std::string::npos);
  jo.concurrent = false;
  EXPECT_EQ(Join(f, jo).summary.overlapped_primary_kernels, 0u);
}

// ---- why slow: one synthetic case per verdict -------------------------------

// Seven launches of one shape (64 blocks on 8 SMs, tau 1, short tail); the
// fifth is 3x slower and gets `slow_blocks` for its blocks.
join::JoinedModel WhySlow(const std::vector<FakeBlock>& slow_blocks) {
  std::vector<FakeLaunch> v = testing::EvenSteps(7, 64, 8);
  v[4].dur_ns = 30'000;
  v[4].blocks = slow_blocks;
  auto m = Join(WriteTwin(Dir(), v));
  EXPECT_EQ(m.groups.size(), 1u);
  return m;
}

uint32_t SlowestVerdicts(const join::JoinedModel& m) {
  if (m.groups.empty() || m.groups[0].slow.empty()) return ~0u;
  const auto& sl = m.groups[0].slow[0];
  EXPECT_EQ(m.shadow[m.matches[sl.match].shadow].path, "step#4");
  EXPECT_NEAR(sl.ratio, 3.0, 0.01);
  return sl.verdicts;
}

TEST(WhySlow, FewerBlocksDidTheWork) {
  auto b = EvenBlocks(64, 8, 2'000);
  for (auto& x : b)
    if (x.block >= 16) x.exit_ns = x.enter_ns + 50;  // 48 blocks return at once
  auto m = WhySlow(b);
  EXPECT_EQ(SlowestVerdicts(m), join::kVerdictFewerBlocks) << m.groups[0].slow[0].text;
  EXPECT_NE(m.groups[0].slow[0].text.find("16 of 64 blocks worked vs 64"), std::string::npos)
      << m.groups[0].slow[0].text;
}

TEST(WhySlow, FewerSms) {
  auto m = WhySlow(EvenBlocks(64, 2, 2'000));
  EXPECT_EQ(SlowestVerdicts(m), join::kVerdictFewerSms) << m.groups[0].slow[0].text;
  EXPECT_NE(m.groups[0].slow[0].text.find("2 SMs vs 8"), std::string::npos) << m.groups[0].slow[0].text;
}

TEST(WhySlow, BlocksInAnotherOrder) {
  auto b = EvenBlocks(64, 8, 2'000);
  for (auto& x : b) x.order = 63 - x.block;  // arrived in reverse
  auto m = WhySlow(b);
  EXPECT_EQ(SlowestVerdicts(m), join::kVerdictReordered) << m.groups[0].slow[0].text;
}

TEST(WhySlow, OneStragglerHeldItUp) {
  auto b = EvenBlocks(64, 8, 2'000);
  b[37].exit_ns = b[37].enter_ns + 60'000;  // block 37 on SM 5 runs 30x longer
  auto m = WhySlow(b);
  EXPECT_EQ(SlowestVerdicts(m), join::kVerdictStraggler) << m.groups[0].slow[0].text;
  EXPECT_NE(m.groups[0].slow[0].text.find("block 37 on SM 5"), std::string::npos) << m.groups[0].slow[0].text;
}

TEST(WhySlow, SameStructureSaysTheTimeWentElsewhere) {
  auto m = WhySlow(EvenBlocks(64, 8, 2'000));
  EXPECT_EQ(SlowestVerdicts(m), 0u);
  EXPECT_NE(m.groups[0].slow[0].text.find("the time went elsewhere"), std::string::npos);
}

TEST(JoinViews, JsonIsBoundedButKeepsEveryLaunchWhySlowNames) {
  auto b = EvenBlocks(64, 8, 2'000);
  b[37].exit_ns = b[37].enter_ns + 60'000;
  auto m = WhySlow(b);
  join::JsonBounds bounds;
  bounds.max_launches = 1;
  auto blocks = join::ReadShadowBlocks(m.shadow_path, join::DetailSeqs(m, 4));
  ASSERT_TRUE(blocks.ok());
  auto j = views::JoinJson(m, bounds, *blocks);
  EXPECT_EQ(j["format"], "twinscope-join");
  EXPECT_EQ(j["launches_total"], 7);
  // The slowest, plus what why_slow names: the reference (the two others slower than the median are
  // within 1% of it: noise, not listed).
  ASSERT_EQ(j["why_slow"][0]["slow"].size(), 1u);
  ASSERT_EQ(j["launches"].size(), 2u);
  EXPECT_EQ(j["launches"][0]["id"], j["why_slow"][0]["slow"][0]["launch"]);
  EXPECT_EQ(j["why_slow"][0]["slow"][0]["verdicts"][0], "straggler");
  // Block detail: the reference and the slow launches, 64 blocks each, relative times.
  ASSERT_EQ(j["block_detail"].size(), 4u);
  for (const auto& d : j["block_detail"]) {
    ASSERT_EQ(d["blocks"].size(), 64u);
    EXPECT_EQ(d["blocks"][0][2], 0) << "enter times are relative to the launch's first block";
  }
}

}  // namespace
}  // namespace twinscope

namespace twinscope {
namespace {

// The text view of a join (what `stats DIR`, `join` and `twin` print), against
// a golden file; TWINSCOPE_UPDATE_GOLDEN=1 rewrites it.
TEST(JoinViews, TextMatchesGolden) {
  auto launches = Steps(3, 3);
  launches[4].shadow_grid = {5, 1, 1};  // step#1 #1: another batch shape
  launches[7].in_shadow = false;        // step#2 #1: not traced
  launches[8].dur_ns = 50'000;          // step#2 #2: slow, one straggler block
  launches[8].blocks = EvenBlocks(8, 4, 1'000);
  launches[8].blocks[5].exit_ns += 40'000;
  const std::string dir = Dir();
  auto m = Join(WriteTwin(dir, launches));
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  views::PrintJoin(f, m, 5);
  std::fclose(f);
  std::string text(buf, len);
  std::free(buf);
  for (size_t p; (p = text.find(dir)) != std::string::npos;) text.replace(p, dir.size(), "DIR");
  const std::string golden = std::string(TWINSCOPE_JOIN_GOLDEN_DIR) + "/stats.txt";
  if (std::getenv("TWINSCOPE_UPDATE_GOLDEN")) std::ofstream(golden) << text;
  std::ifstream g(golden);
  std::string want((std::istreambuf_iterator<char>(g)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, want) << "rewrite with TWINSCOPE_UPDATE_GOLDEN=1 if the change is intended";
}

}  // namespace
}  // namespace twinscope
