// Every view of one join written from one read: join.json, the Perfetto
// timeline, the SQLite database and the HTML report all take the same joined
// run (join/joined_run.h), whose block detail is read here in the one more
// pass over the shadow that the views share (docs/join.md, "Reads").
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "join/joined_run.h"
#include "report/report.h"

namespace twinscope::views {

// Launches whose blocks join.json and the report carry (join_views.h DetailSeqs).
inline constexpr size_t kDetailLaunches = 32;

// A report kept to be written after every process pair of a run is joined (src/cli/run_pairs.cpp), so
// that it shows the whole run's processes: its path and the report's bounded copy of the model (CBOR,
// compact), what WriteJoinViews would have rendered. Empty `path`: no report to write.
struct DeferredReport {
  std::string path;
  std::vector<uint8_t> join_cbor;
};

// Writes the views of `run` into `dir`: join.json, join.perfetto-trace and
// join.sqlite where this build has them, report.html. Reads the shadow once
// (run->detail, SQLite's blocks table). Says where each view is on `out` and
// what went wrong on stderr (`command`: "twinscope join"). False if a view
// could not be written (the others still are, unless join.json fails).
// `defer` (may be null): the report is kept there instead of written.
bool WriteJoinViews(join::JoinedRun* run, const std::string& dir, FILE* out, const char* command = "twinscope join",
                    DeferredReport* defer = nullptr);

// Writes a deferred report with `options` (its "Processes" section); says where on `out`, what went wrong
// on stderr. False if it could not be written.
bool WriteDeferredReport(const DeferredReport& report, const ReportOptions& options, FILE* out,
                         const char* command = "twinscope join");

}  // namespace twinscope::views
