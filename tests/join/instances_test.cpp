// The join's two-level alignment and autotuning, named (docs/join.md, "Alignment", "Autotuning"): range
// instances first, no pair across instances, benchmark stretches, another final choice, one-sided tuning,
// missing and repacked steps, an empty primary, '#' in range names, one range around everything, and a
// byte-identical join.json for the same input.
#include "join/instances.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "join/join_model.h"
#include "join/join_views.h"
#include "join/range_names.h"
#include "join_fixture.h"
#include "join_test_util.h"
#include "launchkey/launch_key.h"
#include "views/join_doc.h"

namespace twinscope::instances_test {
namespace {

using testing::Dir;
using testing::FakeLaunch;
using testing::Join;
using testing::WriteTwin;

constexpr char kTuned[] = "_Z11tuned_kernelPf";

// Config c of an autotuned kernel: another BLOCK size, so another grid and block.
Dim3 Grid(uint32_t c) { return {64u >> c, 1, 1}; }
Dim3 Block(uint32_t c) { return {32u << c, 1, 1}; }

struct Twins {
  std::vector<FakeLaunch> v;
  // One launch at `path` of config c (the shadow sees config shadow_c unless it is the same).
  FakeLaunch& Add(const std::string& path, uint32_t c, const char* kernel = kTuned) {
    FakeLaunch l;
    l.kernel = kernel;
    l.path = path;
    l.grid = Grid(c);
    l.block = Block(c);
    l.cpu_ns = 1'000'000 * (v.size() + 1);
    v.push_back(l);
    return v.back();
  }
};

std::string Step(int k) { return "step " + std::to_string(k) + "#0"; }

bool HasReason(const join::JoinedModel& m, const std::string& code) {
  for (const auto& r : m.reasons)
    if (r.code == code) return true;
  return false;
}

const join::DivergenceReason* Reason(const join::JoinedModel& m, const std::string& code) {
  for (const auto& r : m.reasons)
    if (r.code == code) return &r;
  return nullptr;
}

// Every aligned pair (exact or diverged) lies in one range instance at `depth` on both sides.
void ExpectNoPairCrossesInstances(const join::JoinedModel& m, size_t depth = 1) {
  for (const auto& mt : m.matches) {
    if (mt.kind == join::MatchKind::kTime) continue;
    const std::string &p = m.primary[mt.primary].path, &s = m.shadow[mt.shadow].path;
    const auto ep = join::ElementEnds(p), es = join::ElementEnds(s);
    ASSERT_GE(ep.size(), depth);
    ASSERT_GE(es.size(), depth);
    EXPECT_EQ(p.substr(0, ep[depth - 1]), s.substr(0, es[depth - 1])) << "a pair crosses instances";
  }
}

// The autotuner benchmarks five configs in step 0 (the primary 10 times each, the shadow, slower under the
// probe, 4), then both run config 2 (or the shadow `shadow_final`) once in each of steps 0..9.
Twins Benchmark(uint32_t shadow_final) {
  Twins r;
  for (uint32_t c = 0; c < 5; ++c)
    for (int i = 0; i < 10; ++i) r.Add(Step(0), c).in_shadow = i < 4;
  for (int k = 0; k < 10; ++k) {
    FakeLaunch& l = r.Add(Step(k), 2);
    if (shadow_final != 2) l.shadow_grid = Grid(shadow_final);
  }
  return r;
}

// Today: the primary's 30 extra benchmark launches are "missing_work", and nothing says autotuning.
TEST(Autotuning, BenchmarkStretchWithTheSameFinalChoice) {
  auto m = Join(WriteTwin(Dir(), Benchmark(2).v));
  EXPECT_EQ(m.summary.exact, 30u);
  EXPECT_EQ(m.summary.diverged, 0u);
  ExpectNoPairCrossesInstances(m);
  for (const auto& mt : m.matches)
    if (m.shadow[mt.shadow].path != Step(0)) EXPECT_EQ(mt.kind, join::MatchKind::kExact);
  EXPECT_EQ(m.summary.autotuning_primary, 30u);
  EXPECT_EQ(m.summary.autotuning_shadow, 0u);
  const auto* r = Reason(m, "autotuning");
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r->text.find("30 launches an autotuner made"), std::string::npos) << r->text;
  EXPECT_NE(r->remedy.find("TRITON_CACHE_AUTOTUNING=1"), std::string::npos) << r->remedy;
  EXPECT_FALSE(HasReason(m, "missing_work"));
  EXPECT_FALSE(HasReason(m, "step_count"));
  EXPECT_FALSE(HasReason(m, "batching"));
}

// The shadow chose config 3: its ten launches are of another shape at the same place. Today: "batching",
// remedy "the same inputs".
TEST(Autotuning, AnotherFinalChoiceIsAutotuningNotBatching) {
  auto m = Join(WriteTwin(Dir(), Benchmark(3).v));
  ExpectNoPairCrossesInstances(m);
  EXPECT_EQ(m.summary.diverged, 10u);
  EXPECT_EQ(m.summary.autotuning_pairs, 10u);
  for (const auto& mt : m.matches)
    if (mt.kind == join::MatchKind::kDiverged) {
      EXPECT_TRUE(mt.autotuning);
      EXPECT_EQ(m.primary[mt.primary].path, m.shadow[mt.shadow].path);
    }
  const auto* r = Reason(m, "autotuning");
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r->text.find("chose differently"), std::string::npos) << r->text;
  EXPECT_FALSE(HasReason(m, "batching"));
  EXPECT_FALSE(HasReason(m, "missing_work"));
}

// Only the primary tuned (in three ranges of its own and in step 0); the shadow reused the shared caches.
// Today: "step_count" (13 ranges against 10) and "missing_work".
TEST(Autotuning, OneSidedTuningWithSharedCaches) {
  Twins r;
  for (int k = 0; k < 3; ++k)
    r.Add("autotune#" + std::to_string(k), static_cast<uint32_t>(k % 2 ? 4 : 0)).in_shadow = false;
  for (uint32_t c : {0u, 1u, 3u, 4u})
    for (int i = 0; i < 2; ++i) r.Add(Step(0), c).in_shadow = false;
  for (int k = 0; k < 10; ++k) r.Add(Step(k), 2);
  auto m = Join(WriteTwin(Dir(), r.v));
  EXPECT_EQ(m.summary.exact, 10u);
  ExpectNoPairCrossesInstances(m);
  EXPECT_TRUE(m.summary.autotuning_one_sided);
  EXPECT_EQ(m.summary.autotuning_primary, 11u);
  const auto* a = Reason(m, "autotuning");
  ASSERT_NE(a, nullptr);
  EXPECT_NE(a->text.find("only the primary tuned"), std::string::npos) << a->text;
  EXPECT_FALSE(HasReason(m, "step_count"));
  EXPECT_FALSE(HasReason(m, "missing_work"));
}

// Both started together and the shadow tuned in step 0 (9 launches in 5 shapes against the primary's 1): a
// benchmark stretch on the shadow's side, autotuning (not one-sided, not extra work).
TEST(Autotuning, ShadowBenchmarkInAnAlignedStepIsAutotuning) {
  Twins r;
  for (uint32_t c : {0u, 1u, 3u, 4u})
    for (int i = 0; i < 2; ++i) r.Add(Step(0), c).in_primary = false;
  for (int k = 0; k < 10; ++k) r.Add(Step(k), 2);
  auto m = Join(WriteTwin(Dir(), r.v));
  EXPECT_EQ(m.summary.exact, 10u);
  EXPECT_FALSE(m.summary.autotuning_one_sided);
  EXPECT_EQ(m.summary.autotuning_shadow, 8u);
  EXPECT_TRUE(HasReason(m, "autotuning"));
  EXPECT_FALSE(HasReason(m, "extra_work"));
}

// Step 5 (with the only evaluation launches, two shapes) is missing from the shadow and step 6 was repacked
// (another grid). Today: the shadow's step 6 pairs with the primary's step 5 (one region over both steps),
// and the evaluation kernel, which the shadow does not launch in that region, reads as "autotuning".
void MissingAndRepacked(const std::string& outer) {
  Twins r;
  for (int k = 0; k < 10; ++k) {
    for (int i = 0; i < 3; ++i) {
      FakeLaunch& l = r.Add(outer + Step(k), 0, "_Z4gemmv");
      l.ordinal = static_cast<uint32_t>(i);
      l.in_shadow = k != 5;
      if (k == 6) l.shadow_grid = {5, 1, 1};
    }
    if (k == 5)
      for (uint32_t c : {1u, 2u}) r.Add(outer + Step(k), c, "_Z4evalv").in_shadow = false;
  }
  r.Add(outer + Step(9), 1, "_Z4evalv");  // both run it once more (the shadow's pattern names it)
  auto m = Join(WriteTwin(Dir(), r.v));
  const size_t depth = outer.empty() ? 1 : 2;
  EXPECT_EQ(m.summary.alignment.depth, depth);
  ExpectNoPairCrossesInstances(m, depth);
  EXPECT_EQ(m.summary.exact, 25u);
  EXPECT_EQ(m.summary.diverged, 3u);
  for (const auto& mt : m.matches)
    if (mt.kind == join::MatchKind::kDiverged) EXPECT_EQ(m.primary[mt.primary].path, outer + Step(6));
  EXPECT_FALSE(HasReason(m, "autotuning"));
  ASSERT_TRUE(HasReason(m, "batching"));
  const auto* mw = Reason(m, "missing_work");
  ASSERT_NE(mw, nullptr);
  EXPECT_NE(mw->text.find("the primary made 5 launches"), std::string::npos) << mw->text;
  EXPECT_NE(mw->text.find("the primary's \"" + (outer.empty() ? Step(5) : outer.substr(0, outer.size() - 1))),
            std::string::npos)
      << mw->text;
  bool row = false;
  for (const auto& in : m.instances) row |= in.cls == "primary_only" && in.primary_name == outer + Step(5);
  EXPECT_TRUE(row) << "the missing step is a whole primary-only instance";
}

TEST(TwoLevel, MissingStepAndRepackedStepNeverPairAcrossSteps) { MissingAndRepacked(""); }

// One range around everything: the instances are the steps one level down.
TEST(TwoLevel, OneRangeAroundEverythingAlignsTheStepsInside) { MissingAndRepacked("main#0/"); }

// The benchmark thresholds at their boundary (docs/join.md): 3x in 2 shapes is a benchmark, 2x or one shape
// is not (then it is missing work). In step 5 of 8, so that no one-sided rule applies.
void Threshold(const std::vector<uint32_t>& primary_configs, bool benchmark) {
  Twins r;
  for (int k = 0; k < 8; ++k) {
    if (k != 5) {
      r.Add(Step(k), 2);
      continue;
    }
    for (size_t i = 0; i < primary_configs.size(); ++i) r.Add(Step(k), primary_configs[i]).in_shadow = i == 0;
  }
  auto m = Join(WriteTwin(Dir(), r.v));
  EXPECT_EQ(HasReason(m, "autotuning"), benchmark);
  EXPECT_EQ(HasReason(m, "missing_work"), !benchmark);
  EXPECT_EQ(m.summary.autotuning_primary, benchmark ? primary_configs.size() - 1 : 0u);
}

TEST(Autotuning, ThreeTimesInTwoShapesIsABenchmark) { Threshold({2, 0, 2}, true); }
TEST(Autotuning, TwiceInTwoShapesIsNot) { Threshold({2, 0}, false); }
TEST(Autotuning, ThreeTimesInOneShapeIsNot) { Threshold({2, 2, 2}, false); }

// A sampling shadow (--every 3) runs each kernel a third as often, in every shape: not a benchmark.
TEST(Autotuning, SamplingShadowIsNotABenchmark) {
  Twins r;
  for (int k = 0; k < 6; ++k)
    for (uint32_t c : {2u, 0u, 2u}) r.Add(Step(k), c).ordinal = static_cast<uint32_t>(r.v.size() % 3);
  for (size_t i = 0; i < r.v.size(); ++i) r.v[i].in_shadow = i % 3 == 0;
  testing::WriteOptions o;
  o.shadow_every = 3;
  auto m = Join(WriteTwin(Dir(), r.v, o));
  EXPECT_TRUE(m.summary.alignment.sampled);
  EXPECT_EQ(m.summary.exact, 6u);
  EXPECT_EQ(m.summary.autotuning_primary, 0u);
  EXPECT_FALSE(HasReason(m, "autotuning"));
}

// The pattern matched nothing in the primary. Today: "step_count" and "extra_work".
TEST(TwoLevel, EmptyPrimaryIsSaidAsSuch) {
  Twins r;
  for (int k = 0; k < 4; ++k) r.Add(Step(k), 2).in_primary = false;
  auto m = Join(WriteTwin(Dir(), r.v));
  ASSERT_EQ(m.reasons.size(), 1u);
  EXPECT_EQ(m.reasons[0].code, "empty_primary");
  EXPECT_NE(m.reasons[0].text.find("the primary made no launch of the target kernels"), std::string::npos);
}

// "batch #3" is a name of its own: only the instance number after it goes. Today both are "batch /4".
TEST(RangeNames, HashInANameIsKept) {
  join::RangeNormalizer n;
  EXPECT_NE(n.Normalize("batch #3/4#0"), n.Normalize("batch #5/4#0"));
  EXPECT_EQ(n.Normalize("batch #3/4#0"), "batch #3/4");
  EXPECT_EQ(n.Normalize("step#3/attn#1"), "step/attn");
  EXPECT_EQ(n.Normalize("mixed step 7 [r0:1,r1:4]#0"), "mixed step N [r0:1,r1:4]");
  EXPECT_EQ(join::ElementEnds("batch #3/4#0"), std::vector<size_t>{12});
  EXPECT_EQ(join::ElementEnds("step#3/attn#1"), (std::vector<size_t>{6, 13}));
}

// A serving run whose shadow packed a step differently: the words and the remedy are a server's. Today:
// "the server batched requests differently" with only `--follow`.
TEST(TwoLevel, RepackedServingStepSaysTheShadowDidNotRunThePrimarysBatches) {
  Twins r;
  for (int k = 0; k < 5; ++k) {
    FakeLaunch& l = r.Add("mixed step " + std::to_string(k) + " [r0:1,r1:7]#0", 2);
    if (k == 3) l.shadow_grid = {9, 1, 1};
  }
  auto m = Join(WriteTwin(Dir(), r.v));
  const auto* b = Reason(m, "batching");
  ASSERT_NE(b, nullptr);
  EXPECT_NE(b->text.find("the shadow did not run the primary's batches"), std::string::npos) << b->text;
  EXPECT_NE(b->remedy.find("--engine-adapter auto"), std::string::npos) << b->remedy;
}

// A server without an engine adapter opens no step ranges and writes no request trace: `twin --serve` says it
// served (twin.json's "serve"), and another grid there is still the shadow not running the primary's batches
// (on the H200, transformers serve under `--engine-adapter off` was told to "give both runs the same inputs").
TEST(TwoLevel, ServingWithoutStepRangesSaysTheShadowDidNotRunThePrimarysBatches) {
  Twins r;
  for (int k = 0; k < 5; ++k) {
    FakeLaunch& l = r.Add("", 2);
    if (k == 3) l.shadow_grid = {9, 1, 1};
  }
  const auto files = WriteTwin(Dir(), r.v);
  const auto* plain = Reason(Join(files), "batching");
  ASSERT_NE(plain, nullptr);
  EXPECT_NE(plain->remedy.find("same inputs"), std::string::npos) << plain->remedy;  // not a server: inputs
  join::JoinOptions o;
  o.serving = true;
  auto m = Join(files, o);
  const auto* b = Reason(m, "batching");
  ASSERT_NE(b, nullptr);
  EXPECT_NE(b->text.find("the shadow did not run the primary's batches"), std::string::npos) << b->text;
  EXPECT_NE(b->remedy.find("--engine-adapter auto"), std::string::npos) << b->remedy;
}

// The same inputs give the same join.json, byte for byte, with the instance pairing in it.
TEST(TwoLevel, SameInputGivesAByteIdenticalJoinJson) {
  const auto files = WriteTwin(Dir(), Benchmark(3).v);
  const std::string first = views::JoinJson(Join(files), {}, {}).dump();
  const std::string second = views::JoinJson(Join(files), {}, {}).dump();
  EXPECT_EQ(first, second);
  const auto j = nlohmann::json::parse(first);
  ASSERT_TRUE(j.contains("instances"));
  ASSERT_EQ(j["instances"].size(), 10u);
  EXPECT_EQ(j["instances"][0]["primary_name"], Step(0));
  EXPECT_EQ(j["instances"][0]["class"], "differs");
  EXPECT_EQ(j["instances"][0]["primary_launches"], 51);
  EXPECT_EQ(j["instances"][0]["shadow_launches"], 21);
  EXPECT_EQ(j["summary"]["alignment"]["instance_pairs"], 10);
  EXPECT_EQ(j["summary"]["autotuning"]["pairs"], 10);
  // The report's copy is bounded; the counts stay whole.
  join::JsonBounds b;
  b.max_instance_rows = 3;
  const auto bounded = views::JoinJson(Join(files), b, {});
  EXPECT_EQ(bounded["instances"].size(), 3u);
  EXPECT_EQ(bounded["summary"]["alignment"]["instances_primary"], 10);
}

// The linear-space search keeps its work bound exactly: D edits pass at max_d = D and fail at D - 1, and a
// length difference past the bound fails at once.
TEST(LinearMyers, WorkBoundIsExact) {
  std::mt19937 rng(31);
  for (int round = 0; round < 200; ++round) {
    const size_t n = 1 + rng() % 60, m = 1 + rng() % 60;
    std::vector<uint32_t> a(n), b(m);
    for (auto& x : a) x = rng() % 4;
    for (auto& x : b) x = rng() % 4;
    std::vector<join::AlignPair> p;
    ASSERT_TRUE(join::MyersAlign(a.data(), n, b.data(), m, n + m, 0, 0, &p));
    const size_t d = n + m - 2 * p.size();
    std::vector<join::AlignPair> q;
    EXPECT_TRUE(join::MyersAlign(a.data(), n, b.data(), m, d, 0, 0, &q)) << round;
    EXPECT_EQ(q.size(), p.size());
    if (d > 0) {
      std::vector<join::AlignPair> r;
      EXPECT_FALSE(join::MyersAlign(a.data(), n, b.data(), m, d - 1, 0, 0, &r)) << round;
      EXPECT_TRUE(r.empty());
    }
  }
}

}  // namespace
}  // namespace twinscope::instances_test
