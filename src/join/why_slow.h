// "Why slow" (docs/join.md): target launches grouped by shape, ranked by the
// primary's duration, the slowest compared with the group's median launch on
// the shadow's block structure, with a verdict per difference.
#pragma once

#include "join/join_model.h"

namespace twinscope::join {

// Thresholds of the verdicts (docs/join.md documents them).
inline constexpr double kWorkingBlockShare = 0.25;  // of the reference's median block time
inline constexpr double kFewerShare = 0.75;         // working blocks / SMs against the reference
inline constexpr double kTauDifference = 0.3;
inline constexpr double kStragglerTailShare = 0.5;  // tail / span
// A launch is a finding ("why slow" lists it) when it stands out from its shape
// group: at least kMinSlowRatio x the group's median duration and more than
// kSpreadMads median absolute deviations above the median; and either its
// block structure differs from the median launch's (a verdict) or it is at
// least kMinExcessNs over the median (below that, on a shared GPU, unchanged
// blocks say nothing: clocks and neighbours move a microsecond kernel that
// much). Every finding is kept (join.json, join.sqlite); the text and the
// report show the first kShownPerGroup of each shape with the count of the rest.
inline constexpr double kMinSlowRatio = 1.2;
inline constexpr double kSpreadMads = 3.0;
inline constexpr uint64_t kMinExcessNs = 5'000;
// A reorder verdict needs this many blocks on both launches.
inline constexpr uint64_t kMinReorderBlocks = 16;

// Fills m.groups (each group's findings in g.slow, slowest first, all of them)
// and each shadow launch's blocks_working, from m.matches.
void ComputeWhySlow(JoinedModel& m);

// The findings past the shown ones, by verdict: "straggler 15" or "reordered+straggler 2, fewer_blocks 1"
// (each launch's verdict names joined by '+', the most frequent first, then by name).
std::string VerdictTally(const std::vector<std::vector<std::string>>& verdicts_per_launch);

// "12.3 us" style duration.
std::string HumanNs(uint64_t ns);

}  // namespace twinscope::join
