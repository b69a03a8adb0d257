// Every view of one join written from one read: join.json, the Perfetto
// timeline, the SQLite database and the HTML report all take the same joined
// run (join/joined_run.h), whose block detail is read here in the one more
// pass over the shadow that the views share (docs/join.md, "Reads").
#pragma once

#include <cstdio>
#include <string>

#include "join/joined_run.h"

namespace twinscope::views {

// Launches whose blocks join.json and the report carry (join_views.h DetailSeqs).
inline constexpr size_t kDetailLaunches = 32;

// Writes the views of `run` into `dir`: join.json, join.perfetto-trace and
// join.sqlite where this build has them, report.html. Reads the shadow once
// (run->detail, SQLite's blocks table). Says where each view is on `out` and
// what went wrong on stderr (`command`: "twinscope join"). False if a view
// could not be written (the others still are, unless join.json fails).
bool WriteJoinViews(join::JoinedRun* run, const std::string& dir, FILE* out, const char* command = "twinscope join");

}  // namespace twinscope::views
