// The report's Renderer: bounds one join and writes its page section by section (internal to src/views/report).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "views/join_doc.h"
#include "views/report/block_codec.h"
#include "views/report/fields.h"
#include "views/report/report.h"

namespace twinscope::report {

// A launch of the join's "launches": its id and its part of the document.
struct Launch {
  int64_t id;
  const views::LaunchDoc* l;
};

// A launch's block detail that reaches the page.
struct Detail {
  int64_t id;
  const views::BlockDetailDoc* d;
};

// Drift rows as the page shows them: the join's (drifting first) and, past the bound, the rest summed.
struct DriftTable {
  std::vector<const views::DriftDoc*> rows;
  std::optional<views::DriftDoc> rest;  // range: "N more ranges"
};

// Renders one report of `join`, which must outlive it; RenderReport (report.cpp) makes one per call and
// calls Render once. Where each part is written:
//   report.cpp      the page skeleton: head, inlined CSS/JS and Chart.js, header, nav, footer
//   page_data.cpp   bounding (what reaches the page) and the JSON copy the page's script draws from
//   summary.cpp     the summary cards and warnings, and "why slow"
//   requests.cpp    a serving run's requests
//   pictures.cpp    "Blocks of one launch" (heatmap, order plot) and links to it
//   tables.cpp      the launch table, steps, drift and loss
class Renderer {
 public:
  Renderer(const views::JoinDoc& join, const ReportOptions& o, ReportInfo* info) : join_(join), o_(o), info_(info) {}

  std::string Render();

 private:
  bool Charts() const { return ReportHasCharts() && o_.inline_chartjs; }

  // page_data.cpp
  void Prepare();
  json Data() const;
  json StepsData() const;

  // report.cpp
  void Header(std::string& h);
  void Footer(std::string& h);

  // summary.cpp
  std::string SamplingText() const;
  void Summary(std::string& h);
  int64_t DriftingRanges() const;
  void WhySlow(std::string& h);

  // requests.cpp
  void PrepareRequests();
  void Requests(std::string& h);
  json RequestsData() const;

  // pictures.cpp
  std::string LaunchRef(int64_t id) const;
  void Blocks(std::string& h);

  // processes.cpp
  void Processes(std::string& h);

  // tables.cpp
  void Launches(std::string& h);
  void Steps(std::string& h);
  DriftTable DriftRows() const;
  void Drift(std::string& h);
  void Loss(std::string& h);
  void Findings(std::string& h);
  void ProbeCounters(std::string& h);

  const views::JoinDoc& join_;
  const ReportOptions& o_;
  ReportInfo* info_;
  const views::SummaryDoc* summary_ = nullptr;  // the join's, or null
  std::vector<Launch> all_;
  std::map<int64_t, const views::LaunchDoc*> by_id_;
  size_t rows_ = 0;
  int64_t launches_total_ = 0;
  std::vector<const views::WhySlowDoc*> groups_;
  size_t groups_left_out_ = 0;  // with findings, past max_why_slow_groups
  size_t groups_quiet_ = 0;     // shapes without a finding: one line
  std::map<int64_t, std::string> role_;
  std::map<int64_t, const std::vector<std::string>*> verdicts_;
  std::vector<Detail> detail_;
  std::set<int64_t> detail_ids_;
  std::vector<EncodedBlocks> encoded_;
  size_t detail_left_out_ = 0;
  uint64_t malformed_ = 0;
  const views::RequestsDoc* requests_ = nullptr;            // the join's "requests" (a serving run), or null
  std::vector<const views::RequestRowDoc*> request_rows_;   // listed, in the trace's order
  std::vector<const views::ServedStepDoc*> request_steps_;  // steps of the listed requests, within the bound
  std::map<int64_t, size_t> request_pictures_;              // listed request -> its target launches with block detail
  int64_t first_arrival_us_ = -1;                           // earliest arrival_unix_us of the join's rows; -1 none
};

}  // namespace twinscope::report
