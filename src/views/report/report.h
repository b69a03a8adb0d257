// The HTML report: one self-contained file (works offline) rendered from the join's typed document
// (src/views/join_doc.h; docs/join.md); a view only, it matches nothing itself. Layout and bounds:
// docs/report.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "views/join_doc.h"

namespace twinscope {

namespace report {
struct RunProcesses;  // report/processes.h
}

// Bounds that keep a report of any run small and quick to open. What is left out is counted and said
// on the page; launches that "why slow" or the block detail refer to are always kept.
struct ReportOptions {
  size_t max_launch_rows = 2000;               // the table of launches, slowest first
  size_t max_detail_launches = 32;             // launches with a block heatmap and order plot
  uint64_t max_detail_blocks = 32ull * 65536;  // blocks of all detailed launches together
  size_t max_steps = 2000;                     // more steps are merged into this many bars
  size_t max_drift_rows = 1000;                // drifting ranges first; the rest are summed in one row
  size_t max_why_slow_groups = 200;            // shape groups in "why slow"
  size_t max_request_rows = 1000;              // requests listed ("Requests", a serving run's join)
  size_t max_request_steps = 2000;             // steps of the listed requests with their target launches
  std::string title = "twinscope report";
  bool deflate_blocks = true;  // block detail deflated where this build has zlib (else raw, ~1.7x larger)
  bool inline_chartjs = true;  // false: as if built without Chart.js (the step chart drawn by the page's own code)
  // A twin run of several processes: the "Processes" section (pairs, unpaired, ranks); null: no section.
  const report::RunProcesses* processes = nullptr;
};

// What the report holds, for callers that print where it is and for tests.
struct ReportInfo {
  size_t bytes = 0;
  size_t launch_rows = 0;
  size_t launches_total = 0;
  size_t detail_launches = 0;
  uint64_t detail_blocks = 0;
  size_t detail_launches_left_out = 0;  // over max_detail_launches or max_detail_blocks
  uint64_t malformed_block_rows = 0;    // block_detail rows that are not [block, sm, enter, exit, order]
  size_t request_rows = 0;              // requests listed (0: the join has none)
  size_t request_steps = 0;             // steps kept for the request detail
  bool charts = false;                  // Chart.js was inlined
  bool deflated = false;                // block detail is deflated
  size_t data_bytes = 0;                // the embedded JSON copy of the join
  size_t block_bytes = 0;               // the embedded block detail (base64)
};

// Renders the report of the join's document (views::MakeJoinDoc); parts it does not have are shown as
// missing on the page.
StatusOr<std::string> RenderReport(const views::JoinDoc& join, const ReportOptions& options = {},
                                   ReportInfo* info = nullptr);
// The same from join.json (a saved join, a test's): read with views::JoinDocFromJson, which fails (with a
// message that says what to do) only if `join` is not a joined model of a known version; missing or
// malformed parts are shown as missing.
StatusOr<std::string> RenderReport(const nlohmann::json& join, const ReportOptions& options = {},
                                   ReportInfo* info = nullptr);

// RenderReport, written to `path` (replaced if it exists).
Status WriteReport(const views::JoinDoc& join, const std::string& path, const ReportOptions& options = {},
                   ReportInfo* info = nullptr);
Status WriteReport(const nlohmann::json& join, const std::string& path, const ReportOptions& options = {},
                   ReportInfo* info = nullptr);

// True if this build inlines Chart.js (configured with TWINSCOPE_CHARTJS); else the page draws the step chart itself.
bool ReportHasCharts();

}  // namespace twinscope
