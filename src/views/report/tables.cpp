// The report's tables: launches (slowest first), kernel time per step, drift per range, loss and probe counters.
#include <algorithm>
#include <set>
#include <vector>

#include "views/report/html.h"
#include "views/report/renderer.h"
#include "twinscope/counters.h"

namespace twinscope::report {

void Renderer::Launches(std::string& h) {
  h += "<section id=\"launches\">\n<h2>Launches, slowest first</h2>\n<p class=\"note\">";
  if (all_.empty()) {
    h += "The join holds no matched launches.</p>\n</section>\n";
    return;
  }
  h += "The " + Count(static_cast<int64_t>(rows_)) + " slowest of " + Count(launches_total_) +
       " matched launches by primary duration" +
       (static_cast<int64_t>(rows_) < launches_total_ ? " (the rest are in the join, not in this report)" : "") +
       ". Primary: start from the first kernel, duration (CUPTI). Shadow (shaded columns): blocks seen of expected, "
       "working blocks, SMs used, blocks per SM (min/median/max), Kendall tau of arrival vs index (1 = in order), "
       "the straggler block and its SM, the tail (last exit minus median exit) and the span. * " +
       kStretchNote +
       "</p>\n<p class=\"note\" id=\"ts-launch-status\"></p>\n"
       "<div class=\"table-wrap\" id=\"ts-launch-table\"></div>\n"
       "<noscript><p class=\"warn\">The table and the charts of this report are drawn by its script.</p></noscript>\n"
       "</section>\n";
}

void Renderer::Steps(std::string& h) {
  const json& steps = At(join_, "steps");
  h += "<section id=\"steps\">\n<h2>Kernel time per step</h2>\n";
  if (!steps.is_array() || steps.empty()) {
    h += "<p>The join holds no per-step kernel time (the primary has no top-level NVTX ranges).</p>\n</section>\n";
    return;
  }
  double total = 0, target = 0;
  for (const auto& s : steps) {
    total += Num(s, "kernel_ns");
    target += Num(s, "target_ns");
  }
  int64_t steps_total = Int(join_, "steps_total", static_cast<int64_t>(steps.size()));
  h += "<p class=\"note\">The primary's GPU kernel time in each top-level NVTX range instance (CUPTI): the target "
       "kernels and all others. " +
       Count(static_cast<int64_t>(steps.size())) + " ranges" +
       (steps_total > static_cast<int64_t>(steps.size()) ? " (of " + Count(steps_total) + " in the run)" : "") + ", " +
       Duration(total) + " of kernel time, " + Duration(target) + " (" + Percent(target, total) +
       ") in the target kernels" +
       (steps.size() > o_.max_steps
            ? "; consecutive ranges are merged into " + Count(static_cast<int64_t>(o_.max_steps)) + " bars"
            : "") +
       ".</p>\n<div class=\"chart steps\"><canvas id=\"ts-steps\"></canvas></div>\n</section>\n";
}

// Drift rows as shown: drifting ranges first (most drift first), then the rest in order; past the bound
// the remainder is summed into one row.
std::vector<const json*> Renderer::DriftRows(json* rest) const {
  std::vector<const json*> rows;
  for (const auto& d : At(join_, "drift"))
    if (d.is_object()) rows.push_back(&d);
  std::stable_sort(rows.begin(), rows.end(), [](const json* a, const json* b) {
    int64_t da = DriftOf(*a), db = DriftOf(*b);
    if ((da > 0) != (db > 0)) return da > 0;
    return da > db;
  });
  if (rows.size() > o_.max_drift_rows) {
    json r = {{"range", ""}, {"exact", 0}, {"time_only", 0}, {"unmatched", 0}, {"shape_differs", 0}};
    for (size_t i = o_.max_drift_rows; i < rows.size(); ++i)
      for (const char* k : {"exact", "time_only", "unmatched", "shape_differs"})
        r[k] = r[k].get<int64_t>() + Int(*rows[i], k);
    r["range"] = std::to_string(rows.size() - o_.max_drift_rows) + " more ranges";
    *rest = r;
    rows.resize(o_.max_drift_rows);
  }
  return rows;
}

void Renderer::Drift(std::string& h) {
  h += "<section id=\"drift\">\n<h2>Drift</h2>\n<p class=\"note\">Per top-level NVTX range instance: the shadow's "
       "target launches matched exactly by launch key, matched by time only, not matched, and exact matches "
       "whose grid/block shape differs (the two runs diverged there). Drifting ranges first.</p>\n";
  const json& s = summary_;
  json rest;
  std::vector<const json*> rows = DriftRows(&rest);
  h += "<div class=\"table-wrap short\"><table class=\"drift\"><thead><tr><th>range</th><th class=\"num\">exact</th>"
       "<th class=\"num\">time only</th><th class=\"num\">unmatched</th><th class=\"num\">shape differs</th>"
       "</tr></thead><tbody>\n";
  auto row = [&](const std::string& name, int64_t e, int64_t t, int64_t u, int64_t sd, const char* cls) {
    h += std::string("<tr class=\"") + cls + "\"><td>" + name + "</td><td class=\"num\">" + Count(e) +
         "</td><td class=\"num" + (t ? " warn" : "") + "\">" + Count(t) + "</td><td class=\"num" + (u ? " bad" : "") +
         "\">" + Count(u) + "</td><td class=\"num" + (sd ? " warn" : "") + "\">" + Count(sd) + "</td></tr>\n";
  };
  row("<strong>all</strong>", Int(s, "exact"), Int(s, "time_only"), Int(s, "unmatched_shadow"),
      Int(s, "diverged_shape"), "total");
  for (const json* d : rows)
    row(Esc(Str(*d, "range")), Int(*d, "exact"), Int(*d, "time_only"), Int(*d, "unmatched"), Int(*d, "shape_differs"),
        DriftOf(*d) ? "drifting" : "");
  if (rest.is_object())
    row(Esc(Str(rest, "range")), Int(rest, "exact"), Int(rest, "time_only"), Int(rest, "unmatched"),
        Int(rest, "shape_differs"), "rest");
  h += "</tbody></table></div>\n";
  if (rows.empty()) h += "<p>The join holds no per-range drift (no top-level NVTX ranges).</p>\n";
  int64_t drift_total = Int(join_, "drift_total", 0), drift_in = static_cast<int64_t>(At(join_, "drift").size());
  if (drift_total > drift_in)
    h += "<p class=\"note\">" + Count(drift_total - drift_in) +
         " more ranges are in the run but not in the join's bounded copy (all of them are in the total).</p>\n";
  h += "</section>\n";
}

void Renderer::Loss(std::string& h) {
  h += "<section id=\"loss\">\n<h2>Loss</h2>\n<p class=\"note\">Each trace's own loss accounting (as "
       "<code>twinscope stats</code> shows it). Any non-zero count means data is missing from that side.</p>\n";
  const json& pl = At(At(join_, "primary"), "loss");
  const json& sl = At(At(join_, "shadow"), "loss");
  Findings(h);
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const json* l : {&pl, &sl})
    if (l->is_object())
      for (auto it = l->begin(); it != l->end(); ++it)
        if (it.key() != "findings" && seen.insert(it.key()).second) keys.push_back(it.key());
  if (keys.empty()) {
    h += "<p class=\"warn\">The join holds no loss counters.</p>\n</section>\n";
    return;
  }
  h += "<table class=\"loss\"><thead><tr><th>counter</th><th class=\"num\">primary</th><th "
       "class=\"num\">shadow</th></tr></thead><tbody>\n";
  for (const auto& k : keys) {
    auto cell = [&](const json& l) {
      return std::string("<td class=\"num\">") + (l.contains(k) ? Cell(At(l, k)) : "") + "</td>";
    };
    h += "<tr><td><code>" + Esc(k) + "</code></td>" + cell(pl) + cell(sl) + "</tr>\n";
  }
  h += "</tbody></table>\n";
  ProbeCounters(h);
  h += "</section>\n";
}

// Both traces' loss findings (stats::LossFindings: the counter table's severities), losses first.
void Renderer::Findings(std::string& h) {
  std::vector<std::pair<const char*, const json*>> rows;
  for (const char* side : {"primary", "shadow"})
    for (const auto& f : At(At(At(join_, side), "loss"), "findings"))
      if (f.is_object()) rows.emplace_back(side, &f);
  std::stable_partition(rows.begin(), rows.end(), [](const auto& r) { return IsLossFinding(*r.second); });
  if (rows.empty() || !IsLossFinding(*rows.front().second))
    h += "<p>No losses: every loss counter of both traces is zero.</p>\n";
  if (rows.empty()) return;
  h += "<table class=\"loss findings\"><thead><tr><th>trace</th><th>counter</th><th class=\"num\">value</th>"
       "<th>severity</th><th>what</th></tr></thead><tbody>\n";
  for (const auto& [side, f] : rows) {
    const bool loss = IsLossFinding(*f);
    h += std::string("<tr") + (loss ? "" : " class=\"ctx\"") + "><td>" + side + "</td><td><code>" +
         Esc(Str(*f, "name")) + "</code></td><td class=\"num" + (loss ? " bad" : "") + "\">" + Cell(At(*f, "value")) +
         "</td><td>" + Esc(Str(*f, "severity")) + "</td><td>" + Esc(Str(*f, "text")) + "</td></tr>\n";
  }
  h += "</tbody></table>\n";
}

void Renderer::ProbeCounters(std::string& h) {
  const json& pc = At(At(join_, "shadow"), "probe_counters");
  if (!pc.is_object() || pc.empty()) return;
  // Severities from the counter table; a counter it does not know (a newer probe's) is info.
  auto loss = [](const std::string& k) { return counters::IsLoss(counters::SeverityOf(k)); };
  std::vector<std::string> keys;
  for (auto it = pc.begin(); it != pc.end(); ++it) keys.push_back(it.key());
  std::stable_partition(keys.begin(), keys.end(), loss);
  h += "<p class=\"note\">The shadow's block probe counters: launches it saw, traced and skipped, and blocks it "
       "could not record.</p>\n<table class=\"loss\"><thead><tr><th>probe counter</th><th "
       "class=\"num\">shadow</th></tr></thead><tbody>\n";
  for (const auto& k : keys) {
    const json& v = pc[k];
    bool bad = loss(k) && v.is_number() && v.get<double>() != 0;
    std::string title = counters::Find(k) ? std::string(counters::Find(k)->help)
                                          : "not known to this twinscope (a newer probe's counter): shown as info";
    h += "<tr" + std::string(loss(k) ? "" : " class=\"ctx\"") + "><td><code title=\"" + Esc(title) + "\">" + Esc(k) +
         "</code></td><td class=\"num" + (bad ? " bad" : "") + "\">" + Cell(v) + "</td></tr>\n";
  }
  h += "</tbody></table>\n";
}

}  // namespace twinscope::report
