// Matching of shadow launches to primary launches: exact by launch key, then
// time-only (labelled), then drift per top-level NVTX range (docs/join.md).
#pragma once

#include "join/join_model.h"

namespace twinscope::join {

// Fills m.matches, m.shadow_unmatched, m.primary_unmatched, m.drift and the
// match counts of m.summary from m.primary and m.shadow.
void MatchLaunches(JoinedModel& m);

}  // namespace twinscope::join
