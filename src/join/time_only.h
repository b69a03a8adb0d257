// Time-only pairing of shadow launches the alignment left unpaired, and the time-only accuracy check (docs/join.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "join/join_model.h"

namespace twinscope::join {

// Per kernel, the primary launches by launch time, and the first-launch offset
// of each kernel (what a time-only join has to go on).
class TimeOnlyPass {
 public:
  explicit TimeOnlyPass(const JoinedModel& m);

  // Pairs every shadow launch s with !paired[s] to the nearest free primary
  // launch of its kernel in time (kTime matches, appended to m.matches; their
  // region from region_of_shadow), aligned on the offset of the nearest paired
  // launch of the same kernel (paired_offset, shadow minus primary cpu_ns),
  // else on the kernel's first launches. Marks used primaries; launches with no
  // candidate go to m.shadow_unmatched. Counts m.summary.time_only.
  void MatchPending(JoinedModel& m, std::vector<bool>& used, const std::vector<bool>& paired,
                    const std::vector<int64_t>& paired_offset, const std::vector<int32_t>& region_of_shadow) const;

  // For every exact match, whether a time-only join would have chosen the
  // same primary launch (m.summary.time_only_evaluated / time_only_agree).
  void Evaluate(JoinedModel& m) const;

 private:
  std::map<std::string, std::vector<size_t>> by_kernel_;  // primary indices, ascending cpu_ns
  std::map<std::string, int64_t> first_offset_;
};

}  // namespace twinscope::join
