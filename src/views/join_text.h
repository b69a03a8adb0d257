// The text views of the joined model that `twinscope join`, `twin` and `stats` print (docs/join.md).
#pragma once

#include <cstddef>
#include <cstdio>

#include "join/join_model.h"

namespace twinscope::views {

// The text summary: sides, matches, divergence, drift, requests, why slow,
// then the `top` slowest matched launches (0 = none).
void PrintJoin(std::FILE* out, const join::JoinedModel& m, size_t top);

// A few lines for `stats` on a join: the requests' totals and the first `rows` requests.
void PrintRequests(std::FILE* out, const join::JoinedModel& m, size_t rows);

}  // namespace twinscope::views
