// Launches an autotuner made, named (docs/join.md, "Autotuning"): benchmark stretches, another final choice
// and one-sided autotuning, found on the two-level alignment and counted in the regions and the summary.
#pragma once

#include <cstdint>
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

// After the alignment's pairs and the divergence regions are in m (before the time-only pass): marks the
// autotuner's launches. kernels_a/kernels_b: kernel ids per launch (as the alignment had them);
// region_of_shadow: region index per shadow launch (-1 none).
void MarkAutotuning(JoinedModel& m, const TwoLevelResult& tl, const std::vector<uint32_t>& kernels_a,
                    const std::vector<uint32_t>& kernels_b, const std::vector<int32_t>& region_of_shadow);

}  // namespace twinscope::join
