// Ground truth for the join when the twins diverge (docs/join.md,
// "Alignment", "Divergence"): inserted, deleted and renumbered steps, a step
// repacked with another shape, repeated identical steps, kernels chosen by an
// autotuner, XLA's per-process ids, a sampling shadow, and why-slow when
// nothing is slow.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

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

using testing::FakeLaunch;
using testing::WriteTwin;

// One step of `per_step` launches, grid x = `content` (what the step did).
void AddStep(std::vector<FakeLaunch>& v, const std::string& primary_path, const std::string& shadow_path,
             uint32_t content, int per_step = 3) {
  for (int i = 0; i < per_step; ++i) {
    FakeLaunch l;
    l.path = primary_path;
    l.shadow_path = shadow_path;
    l.ordinal = static_cast<uint32_t>(i);
    l.grid = {content, 1, 1};
    l.cpu_ns = 1'000'000 * (v.size() + 1);
    v.push_back(l);
  }
}

std::string Decode(int k) { return "decode step " + std::to_string(k) + " [r0:1]#0"; }

bool HasReason(const join::JoinedModel& m, const std::string& code) {
  for (const auto& r : m.reasons)
    if (r.code == code) return true;
  return false;
}

// Every exact pair is of the same kernel, shape and normalized range.
void ExpectExactIsExact(const join::JoinedModel& m) {
  for (const auto& mt : m.matches) {
    if (mt.kind != join::MatchKind::kExact) continue;
    const auto& p = m.primary[mt.primary];
    const auto& s = m.shadow[mt.shadow];
    EXPECT_EQ(p.kernel, s.kernel);
    EXPECT_EQ(p.grid.x, s.grid.x) << s.path;
    EXPECT_FALSE(mt.shape_differs);
  }
}

// The demo server without lockstep: the shadow took one extra leading decode
// step, so its step numbers are one ahead. Today's key join paired every
// shadow step with the primary step of the same number ("exact 15" of 18,
// each one step off, all of another shape).
TEST(Divergence, ExtraLeadingDecodeStepNoLongerShiftsPairs) {
  std::vector<FakeLaunch> v;
  AddStep(v, "", Decode(0), 40);
  for (auto& l : v) l.in_primary = false;
  for (int k = 0; k < 5; ++k) AddStep(v, Decode(k), Decode(k + 1), 8 + static_cast<uint32_t>(k));
  auto m = Join(WriteTwin(Dir(), v));
  EXPECT_EQ(m.summary.shadow_launches, 18u);
  EXPECT_EQ(m.summary.exact, 15u);
  EXPECT_EQ(m.summary.diverged, 0u);
  EXPECT_EQ(m.summary.unmatched_shadow, 3u);
  ExpectExactIsExact(m);
  for (const auto& mt : m.matches) {
    if (mt.kind == join::MatchKind::kExact) {
      EXPECT_EQ(m.shadow[mt.shadow].seq, mt.primary + 3) << "one step off";
    }
  }
  ASSERT_EQ(m.divergences.size(), 1u);
  EXPECT_EQ(m.divergences[0].shadow_launches, 3u);
  EXPECT_EQ(m.divergences[0].inserted, 3u);
  EXPECT_EQ(m.divergences[0].first_seq, 0u);
  EXPECT_EQ(m.divergences[0].shadow_from, Decode(0));
  EXPECT_TRUE(HasReason(m, "step_count"));
  EXPECT_TRUE(HasReason(m, "extra_work"));
}

// Renumbered `step#k` instances: an extra step in the middle of the shadow.
TEST(Divergence, InsertedStepIsOneRegionAndTheRestStaysExact) {
  std::vector<FakeLaunch> v;
  for (int k = 0; k < 3; ++k) AddStep(v, "step#" + std::to_string(k), "step#" + std::to_string(k), 8 + k);
  AddStep(v, "", "step#3", 99);
  for (size_t i = 9; i < 12; ++i) v[i].in_primary = false;
  for (int k = 3; k < 6; ++k) AddStep(v, "step#" + std::to_string(k), "step#" + std::to_string(k + 1), 8 + k);
  auto m = Join(WriteTwin(Dir(), v));
  EXPECT_EQ(m.summary.exact, 18u);
  EXPECT_EQ(m.summary.primary_target_unmatched, 0u);
  ExpectExactIsExact(m);
  ASSERT_EQ(m.divergences.size(), 1u);
  EXPECT_EQ(m.divergences[0].shadow_from, "step#3");
  EXPECT_EQ(m.divergences[0].first_seq, 9u);
  EXPECT_EQ(m.divergences[0].last_seq, 11u);
  EXPECT_EQ(m.divergences[0].primary_launches, 0u);
  EXPECT_EQ(m.divergences[0].positions, 1u);
}

TEST(Divergence, DeletedStepIsMissingWorkNotAShift) {
  std::vector<FakeLaunch> v;
  for (int k = 0; k < 6; ++k) {
    AddStep(v, "step#" + std::to_string(k), "step#" + std::to_string(k > 2 ? k - 1 : k), 8 + k);
    if (k == 2)
      for (size_t i = v.size() - 3; i < v.size(); ++i) v[i].in_shadow = false;
  }
  auto m = Join(WriteTwin(Dir(), v));
  EXPECT_EQ(m.summary.shadow_launches, 15u);
  EXPECT_EQ(m.summary.exact, 15u);
  ExpectExactIsExact(m);
  ASSERT_EQ(m.divergences.size(), 1u);
  EXPECT_EQ(m.divergences[0].deleted, 3u);
  EXPECT_EQ(m.divergences[0].primary_from, "step#2");
  EXPECT_TRUE(HasReason(m, "missing_work"));
  EXPECT_TRUE(HasReason(m, "step_count"));
}

// A sampling shadow (--every 3) makes no divergence: the primary's other launches are expected.
TEST(Divergence, SamplingShadowIsNotDivergence) {
  std::vector<FakeLaunch> v;
  for (int k = 0; k < 6; ++k) AddStep(v, "step#" + std::to_string(k), "", 8, 3);
  for (size_t i = 0; i < v.size(); ++i) v[i].in_shadow = i % 3 == 0;
  testing::WriteOptions o;
  o.shadow_every = 3;
  auto m = Join(WriteTwin(Dir(), v, o));
  EXPECT_EQ(m.summary.exact, 6u);
  for (const auto& mt : m.matches) EXPECT_EQ(m.primary[mt.primary].ordinal, 0u);
  EXPECT_TRUE(m.divergences.empty());
  EXPECT_TRUE(m.summary.alignment.sampled);
}

// The server packed step 2 with another batch: another grid. Never exact
// (today: "exact" with shape differs).
TEST(Divergence, RepackedStepIsDivergedNeverExact) {
  std::vector<FakeLaunch> v;
  for (int k = 0; k < 5; ++k) AddStep(v, Decode(k), Decode(k), 8);
  for (size_t i = 6; i < 9; ++i) v[i].shadow_grid = {5, 1, 1};
  auto m = Join(WriteTwin(Dir(), v));
  EXPECT_EQ(m.summary.exact, 12u);
  EXPECT_EQ(m.summary.diverged, 3u);
  EXPECT_EQ(m.summary.diverged_shape, 3u);
  ExpectExactIsExact(m);
  for (const auto& mt : m.matches) {
    if (mt.kind != join::MatchKind::kDiverged) continue;
    EXPECT_EQ(m.shadow[mt.shadow].path, Decode(2));
    EXPECT_EQ(m.primary[mt.primary].path, Decode(2)) << "paired at the same place";
    EXPECT_TRUE(mt.shape_differs);
  }
  ASSERT_EQ(m.divergences.size(), 1u);
  EXPECT_EQ(m.divergences[0].other_shape, 3u);
  ASSERT_TRUE(HasReason(m, "batching"));
  bool lockstep = false;
  for (const auto& r : m.reasons) lockstep |= r.remedy.find("--follow") != std::string::npos;
  EXPECT_TRUE(lockstep) << "a serving run's remedy is lockstep";
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  views::PrintJoin(f, m, 0);
  std::fclose(f);
  std::string text(buf, len);
  std::free(buf);
  EXPECT_NE(text.find("exact 12 (80.0%), diverged 3 (other shape 3)"), std::string::npos) << text;
  EXPECT_NE(text.find("why they diverged:"), std::string::npos) << text;
  auto j = views::JoinJson(m, {}, {});
  EXPECT_EQ(j["summary"]["diverged"], 3);
  EXPECT_EQ(j["divergences"].size(), 1u);
  EXPECT_EQ(j["divergences"][0]["shadow"]["from"], Decode(2));
  EXPECT_FALSE(j["reasons"].empty());
}

// The same work under other range names at the same place (a serving step whose batch names its requests
// in another order): diverged, never exact, and the reason says it is the context, not the shape.
TEST(Divergence, SameShapeUnderAnotherRangeNameIsSaidAsContext) {
  std::vector<FakeLaunch> v;
  for (int k = 0; k < 5; ++k)
    AddStep(v, "decode step " + std::to_string(k) + " [r0:1,r1:1]#0",
            "decode step " + std::to_string(k) + (k == 2 ? " [r1:1,r0:1]#0" : " [r0:1,r1:1]#0"), 8);
  auto m = Join(WriteTwin(Dir(), v));
  EXPECT_EQ(m.summary.exact, 12u);
  EXPECT_EQ(m.summary.diverged, 3u);
  EXPECT_EQ(m.summary.diverged_shape, 0u);
  ExpectExactIsExact(m);
  ASSERT_TRUE(HasReason(m, "context"));
  EXPECT_FALSE(HasReason(m, "batching"));
  for (const auto& r : m.reasons)
    if (r.code == "context") {
      EXPECT_NE(r.text.find("3 launches ran the same kernel with the same shape"), std::string::npos) << r.text;
      EXPECT_NE(r.text.find("[r1:1,r0:1]"), std::string::npos) << r.text;
      EXPECT_NE(r.remedy.find("--follow"), std::string::npos) << r.remedy;
    }
}

// One launch repacked among identical ones: an LCS could put the shadow's
// launch and the primary's it replaced far apart; they are one region.
TEST(Divergence, RepackedLaunchAmongIdenticalOnesIsOneDivergedPair) {
  std::vector<FakeLaunch> v;
  for (int k = 0; k < 40; ++k) AddStep(v, "step#" + std::to_string(k), "step#" + std::to_string(k), 8, 1);
  v[17].shadow_grid = {7, 1, 1};
  for (auto& l : v) l.path = l.shadow_path = "step#0";  // no unique keys: no anchors, Myers over all
  for (auto& l : v) l.ordinal = 0;                      // equal keys
  auto m = Join(WriteTwin(Dir(), v));
  EXPECT_EQ(m.summary.exact, 39u);
  EXPECT_EQ(m.summary.diverged, 1u);
  EXPECT_EQ(m.summary.time_only, 0u);
  ASSERT_EQ(m.divergences.size(), 1u);
  for (const auto& mt : m.matches) {
    if (mt.kind != join::MatchKind::kDiverged) continue;
    EXPECT_EQ(m.shadow[mt.shadow].seq, 17u);
    EXPECT_EQ(mt.primary, 17u);
  }
}

// Identical steps and one more in the shadow: it could be any of them. Said.
TEST(Divergence, RepeatedIdenticalStepsMakeThePlacementAmbiguous) {
  std::vector<FakeLaunch> v;
  for (int k = 0; k < 5; ++k) AddStep(v, "step#" + std::to_string(k), "step#" + std::to_string(k), 8);
  AddStep(v, "", "step#5", 8);
  for (size_t i = 15; i < 18; ++i) v[i].in_primary = false;
  auto m = Join(WriteTwin(Dir(), v));
  EXPECT_EQ(m.summary.exact, 15u);
  ASSERT_EQ(m.divergences.size(), 1u);
  EXPECT_EQ(m.divergences[0].positions, 16u);  // by launch: all tokens are equal here
  EXPECT_EQ(m.summary.ambiguous_regions, 1u);
  bool said = false;
  for (const auto& w : m.warnings) said |= w.find("could sit at several places") != std::string::npos;
  EXPECT_TRUE(said);
}

std::string Thunk(const std::string& op, uint64_t id) {
  return "TSL::Thunk:#name=jit(step),hlo_op=" + op + ",unique_hlo_op_id=" + std::to_string(id) + "#0";
}

// XLA names its ranges with ids it assigns per process: the same program
// gives other ids in the shadow. Today: no key matched (all time only).
TEST(Divergence, XlaIdsDoNotBreakPairing) {
  std::vector<FakeLaunch> v;
  for (int i = 0; i < 12; ++i) {
    FakeLaunch l;
    l.kernel = i % 2 ? "loop_add_fusion" : "loop_multiply_fusion";
    l.path = Thunk(l.kernel, 8589934597ull + static_cast<uint64_t>(i));
    l.shadow_path = Thunk(l.kernel, 8589934596ull + static_cast<uint64_t>(i));
    l.cpu_ns = 1'000'000 * (i + 1);
    v.push_back(l);
  }
  auto m = Join(WriteTwin(Dir(), v));
  EXPECT_EQ(m.summary.exact, 12u);
  EXPECT_TRUE(m.divergences.empty());
  ExpectExactIsExact(m);
}

// XLA's autotuner chose another kernel for the first launches in the shadow.
TEST(Divergence, KernelsChosenByAnAutotunerAreSaidWithTheRemedy) {
  std::vector<FakeLaunch> v;
  for (int i = 0; i < 20; ++i) {
    FakeLaunch l;
    l.kernel = "gemm_fusion_a";
    l.path = Thunk("gemm_fusion", 100 + static_cast<uint64_t>(i));
    l.shadow_path = Thunk("gemm_fusion", 200 + static_cast<uint64_t>(i));
    if (i < 2) l.shadow_kernel = "gemm_fusion_b";
    l.cpu_ns = 1'000'000 * (i + 1);
    v.push_back(l);
  }
  auto m = Join(WriteTwin(Dir(), v));
  EXPECT_EQ(m.summary.exact, 18u);
  ASSERT_EQ(m.divergences.size(), 1u);
  EXPECT_EQ(m.divergences[0].other_kernels, 4u);  // 2 launches of b in the shadow, 2 of a in the primary
  ASSERT_TRUE(HasReason(m, "autotuning"));
  for (const auto& r : m.reasons) {
    if (r.code != "autotuning") continue;
    EXPECT_NE(r.text.find("early in the run"), std::string::npos) << r.text;
    EXPECT_NE(r.remedy.find("xla_gpu_per_fusion_autotune_cache_dir"), std::string::npos) << r.remedy;
  }
}

// Seven launches within 1% of each other: nothing stands out, and it says so.
TEST(WhySlowNoise, NothingSlowIsSaidInOneLine) {
  std::vector<FakeLaunch> v;
  for (int i = 0; i < 7; ++i) {
    FakeLaunch l;
    l.path = "step#" + std::to_string(i);
    l.grid = {4, 1, 1};
    l.cpu_ns = 1'000'000 * (i + 1);
    l.dur_ns = 10'000 + 100 * static_cast<uint64_t>(i);
    l.blocks = testing::EvenBlocks(4, 4, 1'000);
    if (i == 6) {
      l.dur_ns = 10'700;
      for (auto& b : l.blocks) b.order = 3 - b.block;  // reversed: a tau difference on 4 blocks is noise
    }
    v.push_back(l);
  }
  auto m = Join(WriteTwin(Dir(), v));
  ASSERT_EQ(m.groups.size(), 1u);
  EXPECT_TRUE(m.groups[0].slow.empty());
  EXPECT_EQ(m.groups[0].note, "no launch of this shape stands out: the slowest is 1.04x the median");
}

}  // namespace
}  // namespace twinscope
