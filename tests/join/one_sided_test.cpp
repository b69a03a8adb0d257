// One-sided range instances in the join (docs/join.md, "Autotuning", "Why they diverged"): an autotuner's own
// top-level ranges on one side (XLA compiles and runs each candidate fusion as a module of its own; the other
// side reused the shared cache), and other work interleaved on one side (an `eval` range after every 5th step,
// a step run twice): whole inserted or deleted instances, never paired across steps, named in the reasons.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "join/join_model.h"
#include "join_fixture.h"
#include "join_test_util.h"

namespace twinscope::one_sided_test {
namespace {

using testing::Dir;
using testing::FakeLaunch;
using testing::Join;
using testing::WriteTwin;

struct Twins {
  std::vector<FakeLaunch> v;
  // One launch at `path` (the shadow's at `shadow_path` when it differs), of `kernel` in grid x block.
  FakeLaunch& Add(const std::string& path, const std::string& kernel, uint32_t grid, uint32_t block,
                  const std::string& shadow_path = "") {
    FakeLaunch l;
    l.kernel = kernel;
    l.path = path;
    l.shadow_path = shadow_path;
    l.grid = {grid, 1, 1};
    l.block = {block, 1, 1};
    l.cpu_ns = 1'000'000 * (v.size() + 1);
    uint32_t ordinal = 0;
    for (const auto& o : v) ordinal += o.path == path ? 1 : 0;
    l.ordinal = ordinal;
    v.push_back(l);
    return v.back();
  }
};

const join::DivergenceReason* Reason(const join::JoinedModel& m, const std::string& code) {
  for (const auto& r : m.reasons)
    if (r.code == code) return &r;
  return nullptr;
}

std::string Codes(const join::JoinedModel& m) {
  std::string s;
  for (const auto& r : m.reasons) s += r.code + ": " + r.text + "\n";
  return s;
}

// Every aligned pair (exact or diverged) lies in one pair of instances the alignment paired (a row of
// m.instances holding both), and each side's instances cover its launches in order.
void ExpectNoPairCrossesInstances(const join::JoinedModel& m) {
  std::vector<size_t> row_a, row_b;  // per launch: its instance's row
  for (size_t r = 0; r < m.instances.size(); ++r) {
    row_a.insert(row_a.end(), m.instances[r].primary_launches, r);
    row_b.insert(row_b.end(), m.instances[r].shadow_launches, r);
  }
  ASSERT_EQ(row_a.size(), m.primary.size());
  ASSERT_EQ(row_b.size(), m.shadow.size());
  for (const auto& mt : m.matches) {
    if (mt.kind == join::MatchKind::kTime) continue;
    EXPECT_EQ(row_a[mt.primary], row_b[mt.shadow])
        << "a pair crosses instances: " << m.primary[mt.primary].path << " with " << m.shadow[mt.shadow].path;
  }
}

// --- XLA's autotuner on the primary only (the H200 run of tests/gpu/jax_twin_step.py, c5ba1e8) ---

constexpr char kModule[] = "TSL::XlaModule:#hlo_module=";

// A program module: program ids differ between the processes.
std::string Program(const std::string& fn, int primary_id, int shadow_id, int k, bool shadow) {
  return std::string(kModule) + fn + ",program_id=" + std::to_string(shadow ? shadow_id : primary_id) + "##" +
         std::to_string(k);
}

// One jit_step instance: 20 launches of 13 fusion kernels, as the real step.
void Step(Twins& t, int k, bool in_shadow = true, int shadow_k = -1) {
  const std::string p = Program("jit_step", 6632, 6620, k, false) + "/TSL::Thunk:#hlo_op=command_buffer_1##0";
  const std::string s =
      Program("jit_step", 6632, 6620, shadow_k < 0 ? k : shadow_k, true) + "/TSL::Thunk:#hlo_op=command_buffer_1##0";
  struct K {
    const char* name;
    uint32_t grid, block, n;
  };
  for (const K& x :
       {K{"gemm_fusion_dot", 256, 64, 1}, K{"gemm_fusion_dot_1", 256, 64, 3}, K{"gemm_fusion_dot_4", 128, 64, 1},
        K{"gemm_fusion_dot_5", 128, 64, 3}, K{"gemm_fusion_dot_8", 128, 128, 3},
        K{"input_add_multiply_reduce_fusion", 64, 256, 1}, K{"input_reduce_fusion", 1, 32, 1},
        K{"loop_add_fusion_1", 512, 128, 2}, K{"loop_add_fusion_2", 512, 128, 1},
        K{"loop_multiply_fusion", 512, 128, 1}, K{"loop_multiply_fusion_1", 512, 128, 1},
        K{"loop_multiply_fusion_2", 1, 1, 1}, K{"loop_multiply_reduce_fusion", 2048, 128, 1}})
    for (uint32_t i = 0; i < x.n; ++i) {
      // loop_multiply_fusion_2's grid tells the steps apart (k % 7), so a missing step has one place: with
      // identical steps any of them could be the missing one (the region's `positions` says so).
      const uint32_t g = std::string(x.name) == "loop_multiply_fusion_2" ? 1 + static_cast<uint32_t>(k % 7) : x.grid;
      t.Add(p, x.name, g, x.block, s).in_shadow = in_shadow;
    }
}

// 13 program modules (paired), then (primary only) XLA's autotuner's 72 single-launch modules named after one
// fusion each (the names of that run; loop_multiply_fusion's four in the shape the steps run it in, the
// others' candidates in shapes the shadow never ran, or in the step's), then 64 jit_step instances.
// `missing_step` >= 0: the shadow did not run that step (its later steps renumbered).
Twins XlaPrimaryTuned(int missing_step = -1) {
  Twins t;
  auto program = [&](const std::string& fn, int pid, int sid, int k, const char* kernel, uint32_t g, uint32_t b) {
    t.Add(Program(fn, pid, sid, k, false), kernel, g, b, Program(fn, pid, sid, k, true));
  };
  program("jit__threefry_seed", 662, 662, 0, "input_concatenate_fusion", 1, 1);
  program("jit__threefry_split", 1325, 1324, 0, "input_concatenate_fusion", 1, 5);
  program("jit_dynamic_slice", 1988, 1986, 0, "loop_dynamic_slice_fusion", 1, 2);
  for (int k = 0; k < 4; ++k) {
    program("jit__normal", 3317, 3310, k, "loop_multiply_fusion", 2048, 128);
    program("jit__normal", 3317, 3310, k, "loop_multiply_fusion_1", 8, 128);
    program("jit_multiply", 3981, 3972, k, "loop_multiply_fusion", 2048, 128);
  }
  program("jit_dynamic_slice", 4644, 4634, 0, "loop_dynamic_slice_fusion", 1, 8);
  program("jit__normal", 5969, 5958, 0, "loop_multiply_fusion", 2048, 128);
  auto tuned = [&](const std::string& module, int k, const char* kernel, uint32_t g, uint32_t b) {
    t.Add(std::string(kModule) + module + "##" + std::to_string(k), kernel, g, b).in_shadow = false;
  };
  for (int k = 0; k < 4; ++k) tuned("loop_multiply_fusion", k, "loop_multiply_fusion", 512, 128);
  for (int k = 0; k < 4; ++k) tuned("loop_multiply_fusion.1", k, "loop_multiply_fusion_1", 1024, 64 << (k % 2));
  for (int k = 0; k < 6; ++k) tuned("input_reduce_fusion", k, "input_reduce_fusion", 1, 64u << (k % 3));
  const uint32_t candidates[] = {128, 64, 256, 32};  // the first is the steps' shape (the winner)
  for (int k = 16; k < 38; ++k) tuned("gemm_fusion_dot.4", k, "gemm_fusion_dot_4", candidates[k % 4], 64);
  for (int k = 16; k < 38; ++k) tuned("gemm_fusion_dot.8", k, "gemm_fusion_dot_8", candidates[k % 4], 128);
  for (int k = 16; k < 30; ++k) tuned("gemm_fusion_dot", k, "gemm_fusion_dot", candidates[k % 4] * 2, 64);
  for (int k = 0; k < 64; ++k) Step(t, k, k != missing_step, missing_step >= 0 && k > missing_step ? k - 1 : k);
  return t;
}

// Today (c5ba1e8): "autotuning: 68 launches ... only the primary tuned", plus "step_count: the primary ran 68
// top-level ranges (steps) ..., the shadow 64" and "missing_work: the primary made 4 launches ... (first at the
// primary's "TSL::XlaModule:#hlo_module=loop_multiply_fusion##0")": loop_multiply_fusion's four candidate runs
// are of the shape the steps run too, so no launch of them was a candidate the shadow never ran.
TEST(OneSidedInstances, XlaAutotunerModulesOnThePrimaryAreAllAutotuning) {
  auto m = Join(WriteTwin(Dir(), XlaPrimaryTuned().v));
  EXPECT_EQ(m.summary.exact, 17u + 64u * 20u);
  EXPECT_EQ(m.summary.primary_target_unmatched, 72u);
  ExpectNoPairCrossesInstances(m);
  EXPECT_EQ(m.summary.autotuning_primary, 72u);
  EXPECT_EQ(m.summary.autotuning_shadow, 0u);
  ASSERT_EQ(m.reasons.size(), 1u) << Codes(m);
  const auto& r = m.reasons[0];
  EXPECT_EQ(r.code, "autotuning");
  EXPECT_NE(r.text.find("72 launches an autotuner made"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("only the primary tuned"), std::string::npos) << r.text;
  EXPECT_NE(r.remedy.find("xla_gpu_per_fusion_autotune_cache_dir"), std::string::npos) << r.remedy;
}

// The same run with step 30 missing from the shadow: the autotuner's modules stay autotuning, the missing
// step stays missing work (and a step count), named.
TEST(OneSidedInstances, MissingStepBesideXlaAutotuningStaysMissingWork) {
  auto m = Join(WriteTwin(Dir(), XlaPrimaryTuned(30).v));
  EXPECT_EQ(m.summary.exact, 17u + 63u * 20u);
  ExpectNoPairCrossesInstances(m);
  EXPECT_EQ(m.summary.autotuning_primary, 72u);
  ASSERT_NE(Reason(m, "autotuning"), nullptr) << Codes(m);
  const auto* mw = Reason(m, "missing_work");
  ASSERT_NE(mw, nullptr) << Codes(m);
  EXPECT_NE(mw->text.find("the primary made 20 launches"), std::string::npos) << mw->text;
  EXPECT_NE(mw->text.find("jit_step,program_id=6632##30"), std::string::npos) << mw->text;
  const auto* sc = Reason(m, "step_count");
  ASSERT_NE(sc, nullptr) << Codes(m);
  EXPECT_NE(sc->text.find("the primary ran 77 top-level ranges"), std::string::npos) << sc->text;
  EXPECT_NE(sc->text.find("the shadow 76"), std::string::npos) << sc->text;
}

// Today: also "step_count: the primary ran 9 ..., the shadow 8".
// A first program module only the primary ran (a warm-up), of the steps' own kernels and shapes: early and
// named unlike the shadow's, but nothing says an autotuner made it. Missing work, named; not autotuning.
TEST(OneSidedInstances, EarlyMissingModuleWithoutEvidenceStaysMissingWork) {
  Twins t;
  t.Add(Program("jit_warmup", 17, 16, 0, false), "gemm_fusion_dot", 256, 64).in_shadow = false;
  t.Add(Program("jit_warmup", 17, 16, 0, false), "loop_multiply_fusion", 512, 128).in_shadow = false;
  for (int k = 0; k < 8; ++k) Step(t, k);
  auto m = Join(WriteTwin(Dir(), t.v));
  EXPECT_EQ(m.summary.exact, 8u * 20u);
  EXPECT_EQ(m.summary.autotuning_primary, 0u);
  EXPECT_EQ(Reason(m, "autotuning"), nullptr) << Codes(m);
  EXPECT_EQ(Reason(m, "step_count"), nullptr) << Codes(m);
  const auto* mw = Reason(m, "missing_work");
  ASSERT_NE(mw, nullptr) << Codes(m);
  EXPECT_NE(mw->text.find("the primary ran 1 top-level range the shadow did not (first \"" +
                          Program("jit_warmup", 17, 16, 0, false) + "\", 2 launches)"),
            std::string::npos)
      << mw->text;
}

// Today: "step_count: the primary ran 8 ..., the shadow 16" and extra work.
// XLA's autotuner modules on the shadow's side (both started together, the shadow tuned first): autotuning by
// their names; the primary's steps stay exact.
TEST(OneSidedInstances, XlaAutotunerModulesOnTheShadowAreAutotuning) {
  Twins t;
  for (int k = 16; k < 24; ++k)
    t.Add(std::string(kModule) + "gemm_fusion_dot.4##" + std::to_string(k), "gemm_fusion_dot_4", 128, 64).in_primary =
        false;
  for (int k = 0; k < 8; ++k) Step(t, k);
  auto m = Join(WriteTwin(Dir(), t.v));
  EXPECT_EQ(m.summary.exact, 8u * 20u);
  EXPECT_EQ(m.summary.autotuning_shadow, 8u);
  ASSERT_EQ(m.reasons.size(), 1u) << Codes(m);
  EXPECT_EQ(m.reasons[0].code, "autotuning");
  EXPECT_NE(m.reasons[0].text.find("8 launches an autotuner made"), std::string::npos) << m.reasons[0].text;
}

// A function compiled mid-run: XLA's autotuner modules after step 3 (the primary only) are autotuning there too,
// by their names; today: missing work and a step count.
TEST(OneSidedInstances, XlaAutotunerModulesMidRunAreAutotuning) {
  Twins t;
  for (int k = 0; k < 8; ++k) {
    Step(t, k);
    if (k != 3) continue;
    for (int c = 0; c < 6; ++c)
      t.Add(std::string(kModule) + "gemm_fusion_dot.4##" + std::to_string(c), "gemm_fusion_dot_4", 64u << (c % 3), 64)
          .in_shadow = false;
  }
  auto m = Join(WriteTwin(Dir(), t.v));
  EXPECT_EQ(m.summary.exact, 8u * 20u);
  EXPECT_EQ(m.summary.autotuning_primary, 6u);
  ASSERT_EQ(m.reasons.size(), 1u) << Codes(m);
  EXPECT_EQ(m.reasons[0].code, "autotuning");
}

// --- Other work interleaved on one side: an `eval` range after every 5th step, a step run twice ---

constexpr char kGemm[] = "_Z4gemmv";
constexpr char kEval[] = "_Z4evalv";

// 20 steps "step#k" of 3 launches (grid 8 + k: each step's own), and where `eval_side` is "shadow" or
// "primary" that side also runs "eval#j" (2 launches: the eval kernel and the gemm in another shape) after
// every 5th step.
Twins WithEval(const std::string& eval_side) {
  Twins t;
  int evals = 0;
  for (int k = 0; k < 20; ++k) {
    for (int i = 0; i < 3; ++i) t.Add("step#" + std::to_string(k), kGemm, 8 + static_cast<uint32_t>(k), 256);
    if (k % 5 != 4) continue;
    const std::string e = "eval#" + std::to_string(evals++);
    t.Add(e, eval_side == "shadow" ? kEval : kGemm, 4, 128);  // the primary keeps only the targets' launches
    t.Add(e, kGemm, 2, 512);
    for (size_t i = t.v.size() - 2; i < t.v.size(); ++i) {
      t.v[i].in_primary = eval_side == "primary";
      t.v[i].in_shadow = eval_side == "shadow";
    }
  }
  return t;
}

void ExpectEvalIsOtherWork(const join::JoinedModel& m, bool shadow) {
  EXPECT_EQ(m.summary.exact, 60u);
  EXPECT_EQ(m.summary.diverged, 0u);
  ExpectNoPairCrossesInstances(m);
  ASSERT_EQ(m.divergences.size(), 4u);
  for (const auto& d : m.divergences) {
    EXPECT_EQ(d.positions, 1u);
    EXPECT_EQ(shadow ? d.inserted : d.deleted, 2u);
    EXPECT_EQ(shadow ? d.shadow_launches : d.primary_launches, 2u);
    EXPECT_EQ(shadow ? d.primary_launches : d.shadow_launches, 0u);
  }
  EXPECT_EQ(m.divergences[2].shadow_launches ? m.divergences[2].shadow_from : m.divergences[2].primary_from, "eval#2");
  size_t rows = 0;
  for (const auto& in : m.instances) {
    if (in.cls == "same") continue;
    ++rows;
    EXPECT_EQ(in.cls, shadow ? "shadow_only" : "primary_only");
    EXPECT_EQ((shadow ? in.shadow_name : in.primary_name).rfind("eval#", 0), 0u);
  }
  EXPECT_EQ(rows, 4u);
  ASSERT_EQ(m.reasons.size(), 1u) << Codes(m);
  const auto& r = m.reasons[0];
  EXPECT_EQ(r.code, shadow ? "extra_work" : "missing_work") << Codes(m);
  EXPECT_EQ(r.text, std::string(shadow ? "the shadow" : "the primary") + " ran 4 top-level ranges the " +
                        (shadow ? "primary" : "shadow") + " did not (first \"eval#0\", 8 launches)");
}

// Today: also "step_count: the primary ran 20 top-level ranges (steps) ..., the shadow 24" (the remedy "run
// a fixed number of steps"), and the text says only "launches ... at that place (first at eval#0, 2 launches)".
TEST(OtherWork, ShadowEvalRangeAfterEveryFifthStepIsExtraWorkByName) {
  ExpectEvalIsOtherWork(Join(WriteTwin(Dir(), WithEval("shadow").v)), true);
}

// Today: eval#0 (in the primary's first quarter, of a shape the shadow never ran) is called autotuning "only
// the primary tuned", plus "step_count: the primary ran 23 ..., the shadow 20".
TEST(OtherWork, PrimaryEvalRangeAfterEveryFifthStepIsMissingWorkByName) {
  ExpectEvalIsOtherWork(Join(WriteTwin(Dir(), WithEval("primary").v)), false);
}

// A step run twice on one side (right today too: a guard for the rules above) ("step 3#0" and "step 3#1": NVTX numbers
// a range's repeats): a whole extra instance, never paired across steps; a step count and missing (or extra) work, not
// other work.
void StepRunTwice(bool primary) {
  Twins t;
  for (int k = 0; k < 10; ++k)
    for (int rep = 0; rep < (k == 3 ? 2 : 1); ++rep)
      for (int i = 0; i < 3; ++i) {
        FakeLaunch& l =
            t.Add("step " + std::to_string(k) + "#" + std::to_string(rep), kGemm, 8 + static_cast<uint32_t>(k), 256);
        if (rep == 1) (primary ? l.in_shadow : l.in_primary) = false;
      }
  auto m = Join(WriteTwin(Dir(), t.v));
  EXPECT_EQ(m.summary.exact, 30u);
  EXPECT_EQ(m.summary.diverged, 0u);
  ExpectNoPairCrossesInstances(m);
  ASSERT_EQ(m.divergences.size(), 1u);
  const auto& d = m.divergences[0];
  EXPECT_EQ(primary ? d.deleted : d.inserted, 3u);
  const std::string from = primary ? d.primary_from : d.shadow_from;
  EXPECT_TRUE(from == "step 3#0" || from == "step 3#1") << from;
  const auto* sc = Reason(m, "step_count");
  ASSERT_NE(sc, nullptr) << Codes(m);
  EXPECT_NE(sc->text.find(primary ? "the primary ran 11 top-level ranges (steps) with target launches, the shadow 10"
                                  : "the primary ran 10 top-level ranges (steps) with target launches, the shadow 11"),
            std::string::npos)
      << sc->text;
  const auto* w = Reason(m, primary ? "missing_work" : "extra_work");
  ASSERT_NE(w, nullptr) << Codes(m);
  EXPECT_EQ(w->text.find("top-level range"), std::string::npos) << "a repeated step is not other work: " << w->text;
  EXPECT_EQ(m.reasons.size(), 2u) << Codes(m);
}

// One range around everything: the eval ranges are instances one level down, said as ranges at that depth.
TEST(OtherWork, EvalInsideOneRangeAroundEverythingIsNamedAtItsDepth) {
  Twins t = WithEval("shadow");
  for (auto& l : t.v) l.path = "main#0/" + l.path;
  auto m = Join(WriteTwin(Dir(), t.v));
  EXPECT_EQ(m.summary.alignment.depth, 2u);
  EXPECT_EQ(m.summary.exact, 60u);
  ASSERT_EQ(m.reasons.size(), 1u) << Codes(m);
  EXPECT_EQ(m.reasons[0].text,
            "the shadow ran 4 ranges (at depth 2) the primary did not (first \"main#0/eval#0\", 8 launches)");
}

// A sampling shadow (--every 3) left the primary's "init#0" and most launches out by design, and a shadow cut
// early has no counterpart for the primary's last ranges: neither is missing work nor other work.
TEST(OtherWork, SampledOrCutShadowSaysNoRangesOfOtherWork) {
  {
    Twins t;
    t.Add("init#0", kGemm, 2, 512);
    for (int k = 0; k < 6; ++k)
      for (int i = 0; i < 3; ++i) t.Add("step#" + std::to_string(k), kGemm, 8, 256);
    for (size_t i = 0; i < t.v.size(); ++i) t.v[i].in_shadow = i % 3 == 1;
    testing::WriteOptions o;
    o.shadow_every = 3;
    auto m = Join(WriteTwin(Dir(), t.v, o));
    EXPECT_TRUE(m.summary.alignment.sampled);
    EXPECT_TRUE(m.reasons.empty()) << Codes(m);
  }
  {
    Twins t;
    for (int k = 0; k < 40; ++k)
      for (int i = 0; i < 3; ++i) t.Add("step#" + std::to_string(k), kGemm, 8 + static_cast<uint32_t>(k), 256);
    t.Add("save#0", kGemm, 2, 512);
    testing::WriteOptions o;
    o.shadow_keep_fraction = 0.5;
    auto m = Join(WriteTwin(Dir() + "_cut", t.v, o));
    ASSERT_NE(Reason(m, "shadow_cut"), nullptr) << Codes(m);
    EXPECT_EQ(Reason(m, "missing_work"), nullptr) << Codes(m);
  }
}

// A server's extra decode step of a batch the primary never ran (its name has another pattern) is a step:
// counted, and extra work at a place, not a range of other work.
TEST(OtherWork, ServerStepOfAnotherBatchIsAStepNotOtherWork) {
  Twins t;
  for (int k = 0; k < 6; ++k)
    t.Add("decode step " + std::to_string(k) + " [r0:1]#0", kGemm, 8 + static_cast<uint32_t>(k), 256);
  t.Add("decode step 6 [r0:1,r1:1]#0", kGemm, 40, 256).in_primary = false;
  auto m = Join(WriteTwin(Dir(), t.v));
  EXPECT_EQ(m.summary.exact, 6u);
  ASSERT_NE(Reason(m, "step_count"), nullptr) << Codes(m);
  const auto* w = Reason(m, "extra_work");
  ASSERT_NE(w, nullptr) << Codes(m);
  EXPECT_EQ(w->text.find("top-level range"), std::string::npos) << w->text;
}

TEST(OtherWork, StepRunTwiceOnThePrimaryIsMissingWork) { StepRunTwice(true); }
TEST(OtherWork, StepRunTwiceOnTheShadowIsExtraWork) { StepRunTwice(false); }

}  // namespace
}  // namespace twinscope::one_sided_test
