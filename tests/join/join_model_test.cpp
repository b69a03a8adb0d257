// How the join builds its model's launch arrays (src/join/join_model.cpp, docs/join.md "Reads"): the primary's
// launches in launch-time order whatever order their records came in, and a shadow launch's duration sample
// whole when its blocks came in two runs.
#include "join/join_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../testutil/trace_writer.h"
#include "join_fixture.h"
#include "join_test_util.h"
#include "launchkey/launch_key.h"

namespace twinscope {
namespace {

using testing::Dir;
using testing::FakeLaunch;
using testing::Join;
using testing::WriteTwin;

// The model's primary launches are in launch-time order, launches of equal time in the order of their records:
// records out of order (several threads launching) are put in order on indices, not with a copy of the launches.
TEST(JoinModel, PrimaryLaunchesInLaunchTimeOrderEqualTimesInRecordOrder) {
  // Record order: ordinals 0..7 with these launch times (ms): two cycles of the order and three ties.
  const uint64_t ms[] = {5, 1, 3, 1, 2, 5, 4, 1};
  std::vector<FakeLaunch> v;
  for (uint32_t i = 0; i < 8; ++i) {
    FakeLaunch l;
    l.path = "step#0";
    l.ordinal = i;
    l.cpu_ns = ms[i] * 1'000'000;
    v.push_back(l);
  }
  auto m = Join(WriteTwin(Dir(), v));
  ASSERT_EQ(m.primary.size(), 8u);
  std::vector<uint32_t> ordinals;
  for (const auto& p : m.primary) ordinals.push_back(p.ordinal);
  EXPECT_EQ(ordinals, (std::vector<uint32_t>{1, 3, 7, 4, 2, 6, 0, 5}));
  for (size_t i = 0; i < m.primary.size(); ++i) {
    const auto& p = m.primary[i];
    EXPECT_EQ(p.cpu_ns, ms[p.ordinal] * 1'000'000) << "launch " << i << " kept its own fields";
    EXPECT_TRUE(p.have_kernel) << "launch " << i << ": its kernel record stayed attached";
    EXPECT_EQ(p.start_ns, p.cpu_ns + 2'000) << "launch " << i;
  }
  EXPECT_EQ(m.summary.exact, 8u) << "every shadow launch found its primary launch after the reordering";
}

// A launch whose blocks come in two runs (another launch's blocks between them) keeps one sample of all its
// valid blocks, sorted; the other launch's sample is its own.
TEST(JoinModel, ShadowLaunchBlocksInTwoRunsMakeOneSample) {
  const std::string dir = Dir();
  std::vector<FakeLaunch> v(2);
  for (uint32_t i = 0; i < 2; ++i) {
    v[i].path = "step#" + std::to_string(i);
    v[i].grid = {6, 1, 1};
    v[i].cpu_ns = (i + 1) * 1'000'000;
  }
  const auto f = WriteTwin(dir, v);
  // The shadow again, its blocks interleaved: launch 0's blocks 0-2, launch 1's, then launch 0's blocks 3-5.
  {
    auto w = testing::OpenTestTrace(f.shadow, {{"role", "shadow"}, {"pid", 200}, {"config", {{"every", 1}}}});
    for (uint64_t s = 0; s < 2; ++s) {
      LaunchRecord r{};
      r.seq = s;
      r.cpu_ns = 5'000'000'000 + v[s].cpu_ns;
      r.key = {LaunchKeyHash(v[s].path, v[s].kernel, 0, v[s].grid, v[s].block), w->Intern(v[s].path), 0};
      r.stream = 7;
      r.kernel = w->Intern(v[s].kernel);
      r.grid = v[s].grid;
      r.block = v[s].block;
      r.blocks_recorded = 6;
      w->Append(r);
    }
    auto block = [&](uint64_t seq, uint32_t b, uint64_t dur) {
      BlockRecord br{};
      br.launch_seq = seq;
      br.enter_ns = 1'000'000'000 + seq * 100'000 + b * 10;
      br.exit_ns = br.enter_ns + dur;
      br.block_linear = b;
      br.x = b;
      br.order = b;
      br.sm = b % 4;
      w->Append(br);
    };
    const uint64_t dur0[] = {600, 100, 500, 200, 400, 300};
    for (uint32_t b = 0; b < 3; ++b) block(0, b, dur0[b]);
    for (uint32_t b = 0; b < 6; ++b) block(1, b, 1'000 + b);
    for (uint32_t b = 3; b < 6; ++b) block(0, b, dur0[b]);
    std::string error;
    ASSERT_TRUE(w->Close(&error)) << error;
  }
  auto m = Join(f);
  ASSERT_EQ(m.shadow.size(), 2u);
  EXPECT_EQ(m.shadow_side.launches, 2u);
  EXPECT_EQ(m.shadow[0].block_durations, (std::vector<uint64_t>{100, 200, 300, 400, 500, 600}));
  EXPECT_EQ(m.shadow[0].block_durations_of, 6u);
  EXPECT_EQ(m.shadow[0].blocks.blocks_seen, 6u);
  EXPECT_EQ(m.shadow[1].block_durations, (std::vector<uint64_t>{1'000, 1'001, 1'002, 1'003, 1'004, 1'005}));
  EXPECT_EQ(m.shadow[1].block_durations_of, 6u);
  EXPECT_EQ(m.shadow[1].cpu_ns, 5'002'000'000u);
  EXPECT_EQ(m.shadow[1].block.x, 256u);
  EXPECT_EQ(m.shadow[1].stream, 7u);
  EXPECT_EQ(m.summary.exact, 2u);
}

// Ten million of these are the join's largest array at issue 31's scale (docs/join.md, "Reads"): 112 bytes each
// before their fields were ordered to pack.
TEST(JoinModel, PrimaryLaunchIsAtMost96Bytes) { EXPECT_LE(sizeof(join::PrimaryLaunch), 96u); }

}  // namespace
}  // namespace twinscope
