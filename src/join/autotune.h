// Launches an autotuner made, named (docs/join.md, "Autotuning"): benchmark stretches, another final choice
// and one-sided autotuning, found on the two-level alignment and counted in the regions and the summary.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "join/instances.h"
#include "join/join_model.h"

namespace twinscope::join {

// Thresholds (docs/join.md): in one aligned pair of instances a side benchmarks a kernel when it runs it at
// least kBenchmarkRatio times as often as the reference (the other side's count there, or the side's median
// count per instance over the instances that launch it, whichever is smaller; at least 1), in at least
// kBenchmarkShapes shapes.
inline constexpr uint64_t kBenchmarkRatio = 3;
inline constexpr uint64_t kBenchmarkShapes = 2;

// One-sided range instances (docs/join.md, "Autotuning"): a stretch of one side's consecutive unpaired
// instances, early (before that side's first paired step instance) and named unlike any of the other side's
// instances, is an autotuner's when at least 1/kOneSidedEvidence of its launches are evidenced: a kernel in a
// shape the other side never ran, or a range named as an autotuner's own (AutotunerRangeName). A stretch wholly
// of an autotuner's own ranges is its anywhere (XLA tunes a function compiled mid-run then).
inline constexpr uint64_t kOneSidedEvidence = 2;

enum class OneSided : uint8_t {
  kNone = 0,   // paired, outside any range, or named like an instance of the other side (a missing step)
  kTuning,     // an autotuner's instance (its launches are the autotuner's)
  kOtherWork,  // other work only this side did (an `eval` or `checkpoint` range): extra or missing work
};

// Per row of m.instances (after the instance pairing is recorded): what a one-sided instance is. Uses only
// m.instances, m.primary and m.shadow, so the reasons read the same answer the autotuning marks used.
std::vector<OneSided> ClassifyOneSided(const JoinedModel& m);

// A range name with every run of digits replaced by "N" ("step 12#0" -> "step N#N"): instances of one kind
// (steps numbered in their names, XLA's program ids) share it.
std::string NamePattern(std::string_view name);

// A range an autotuner makes of its own: XLA compiles and runs each candidate fusion as a module named after
// that fusion (`TSL::XlaModule:#hlo_module=gemm_fusion_dot.4##16`, no program_id), while a program's modules
// are `jit_<fn>,program_id=N`.
bool AutotunerRangeName(std::string_view name);

// After the alignment's pairs and the divergence regions are in m (before the time-only pass): marks the
// autotuner's launches. kernels_a/kernels_b: kernel ids per launch (as the alignment had them);
// region_of_shadow: region index per shadow launch (-1 none).
void MarkAutotuning(JoinedModel& m, const TwoLevelResult& tl, const std::vector<uint32_t>& kernels_a,
                    const std::vector<uint32_t>& kernels_b, const std::vector<int32_t>& region_of_shadow);

}  // namespace twinscope::join
