// The rank comparison's inputs, from a joined pair of one rank (steps, target launches with their
// blocks) or from a primary trace alone (steps; `record` runs). CUDA-free.
#pragma once

#include <string>

#include "base/status.h"
#include "join/join_model.h"
#include "procs/ranks.h"

namespace twinscope::procs {

// Steps from the model's step rows; target launches from its exact matches (primary duration, the
// shadow's block statistics) and its unmatched primary target launches (no blocks).
RankInput RankInputFromJoin(int64_t rank, const join::JoinedModel& m);

// Steps from a primary trace's kernel records (one pass): top-level range instance, GPU span, count
// and time of valid kernels. No target launches.
StatusOr<RankInput> RankInputFromTrace(int64_t rank, const std::string& path);

}  // namespace twinscope::procs
