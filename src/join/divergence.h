// Why the twins diverged, in words (docs/join.md, "Why they diverged"): from
// the divergence regions the alignment found, the kernels and range names.
#pragma once

#include "join/join_model.h"

namespace twinscope::join {

// Fills m.reasons from m.divergences, m.matches and the two sides' launches.
void ExplainDivergence(JoinedModel& m);

}  // namespace twinscope::join
