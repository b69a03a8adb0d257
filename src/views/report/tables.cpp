// The report's tables: launches (slowest first), kernel time per step, drift per range, loss and probe counters.
#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "twinscope/counters.h"
#include "views/report/html.h"
#include "views/report/renderer.h"

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
  h += "<section id=\"steps\">\n<h2>Kernel time per step</h2>\n";
  if (!join_.steps || join_.steps->empty()) {
    h += "<p>The join holds no per-step kernel time (the primary has no top-level NVTX ranges).</p>\n</section>\n";
    return;
  }
  const std::vector<views::StepDoc>& steps = *join_.steps;
  double total = 0, target = 0;
  for (const auto& s : steps) {
    total += static_cast<double>(s.kernel_ns);
    target += static_cast<double>(s.target_ns);
  }
  int64_t steps_total = join_.steps_total ? Signed(*join_.steps_total) : static_cast<int64_t>(steps.size());
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
DriftTable Renderer::DriftRows() const {
  DriftTable t;
  if (join_.drift)
    for (const auto& d : *join_.drift) t.rows.push_back(&d);
  std::stable_sort(t.rows.begin(), t.rows.end(), [](const views::DriftDoc* a, const views::DriftDoc* b) {
    int64_t da = DriftOf(*a), db = DriftOf(*b);
    if ((da > 0) != (db > 0)) return da > 0;
    return da > db;
  });
  if (t.rows.size() > o_.max_drift_rows) {
    views::DriftDoc& r = t.rest.emplace();
    for (size_t i = o_.max_drift_rows; i < t.rows.size(); ++i) {
      r.exact += t.rows[i]->exact;
      r.time_only += t.rows[i]->time_only;
      r.unmatched += t.rows[i]->unmatched;
      r.shape_differs += t.rows[i]->shape_differs;
    }
    r.range = std::to_string(t.rows.size() - o_.max_drift_rows) + " more ranges";
    t.rows.resize(o_.max_drift_rows);
  }
  return t;
}

void Renderer::Drift(std::string& h) {
  h += "<section id=\"drift\">\n<h2>Drift</h2>\n<p class=\"note\">Per top-level NVTX range instance: the shadow's "
       "target launches matched exactly by launch key, matched by time only, not matched, and exact matches "
       "whose grid/block shape differs (the two runs diverged there). Drifting ranges first.</p>\n";
  const views::SummaryDoc none;
  const views::SummaryDoc& s = summary_ ? *summary_ : none;
  const DriftTable t = DriftRows();
  h += "<div class=\"table-wrap short\"><table class=\"drift\"><thead><tr><th>range</th><th class=\"num\">exact</th>"
       "<th class=\"num\">time only</th><th class=\"num\">unmatched</th><th class=\"num\">shape differs</th>"
       "</tr></thead><tbody>\n";
  auto row = [&](const std::string& name, int64_t e, int64_t t, int64_t u, int64_t sd, const char* cls) {
    h += std::string("<tr class=\"") + cls + "\"><td>" + name + "</td><td class=\"num\">" + Count(e) +
         "</td><td class=\"num" + (t ? " warn" : "") + "\">" + Count(t) + "</td><td class=\"num" + (u ? " bad" : "") +
         "\">" + Count(u) + "</td><td class=\"num" + (sd ? " warn" : "") + "\">" + Count(sd) + "</td></tr>\n";
  };
  row("<strong>all</strong>", Signed(s.exact), Signed(s.time_only), Signed(s.unmatched_shadow),
      Signed(s.diverged_shape), "total");
  for (const views::DriftDoc* d : t.rows)
    row(Esc(d->range), Signed(d->exact), Signed(d->time_only), Signed(d->unmatched), Signed(d->shape_differs),
        DriftOf(*d) ? "drifting" : "");
  if (t.rest)
    row(Esc(t.rest->range), Signed(t.rest->exact), Signed(t.rest->time_only), Signed(t.rest->unmatched),
        Signed(t.rest->shape_differs), "rest");
  h += "</tbody></table></div>\n";
  if (t.rows.empty()) h += "<p>The join holds no per-range drift (no top-level NVTX ranges).</p>\n";
  int64_t drift_total = join_.drift_total ? Signed(*join_.drift_total) : 0;
  int64_t drift_in = join_.drift ? static_cast<int64_t>(join_.drift->size()) : 0;
  if (drift_total > drift_in)
    h += "<p class=\"note\">" + Count(drift_total - drift_in) +
         " more ranges are in the run but not in the join's bounded copy (all of them are in the total).</p>\n";
  h += "</section>\n";
}

void Renderer::Loss(std::string& h) {
  h += "<section id=\"loss\">\n<h2>Loss</h2>\n<p class=\"note\">Each trace's own loss accounting (as "
       "<code>twinscope stats</code> shows it). Any non-zero count means data is missing from that side.</p>\n";
  const views::LossDoc* pl = join_.primary && join_.primary->loss ? &*join_.primary->loss : nullptr;
  const views::LossDoc* sl = join_.shadow && join_.shadow->loss ? &*join_.shadow->loss : nullptr;
  Findings(h);
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const views::LossDoc* l : {pl, sl})
    if (l)
      for (const auto& [key, value] : l->values)
        if (seen.insert(key).second) keys.push_back(key);
  if (keys.empty()) {
    h += "<p class=\"warn\">The join holds no loss counters.</p>\n</section>\n";
    return;
  }
  h += "<table class=\"loss\"><thead><tr><th>counter</th><th class=\"num\">primary</th><th "
       "class=\"num\">shadow</th></tr></thead><tbody>\n";
  for (const auto& k : keys) {
    auto cell = [&](const views::LossDoc* l) {
      std::string v;
      if (l)
        if (auto it = l->values.find(k); it != l->values.end()) v = Cell(it->second);
      return "<td class=\"num\">" + v + "</td>";
    };
    h += "<tr><td><code>" + Esc(k) + "</code></td>" + cell(pl) + cell(sl) + "</tr>\n";
  }
  h += "</tbody></table>\n";
  ProbeCounters(h);
  h += "</section>\n";
}

// Both traces' loss findings (stats::LossFindings: the counter table's severities), losses first.
void Renderer::Findings(std::string& h) {
  std::vector<std::pair<const char*, const views::LossFindingDoc*>> rows;
  auto add = [&](const char* side, const std::optional<views::LossDoc>& loss) {
    if (loss)
      for (const auto& f : loss->findings) rows.emplace_back(side, &f);
  };
  if (join_.primary) add("primary", join_.primary->loss);
  if (join_.shadow) add("shadow", join_.shadow->loss);
  std::stable_partition(rows.begin(), rows.end(), [](const auto& r) { return IsLossFinding(*r.second); });
  if (rows.empty() || !IsLossFinding(*rows.front().second))
    h += "<p>No losses: every loss counter of both traces is zero.</p>\n";
  if (rows.empty()) return;
  h += "<table class=\"loss findings\"><thead><tr><th>trace</th><th>counter</th><th class=\"num\">value</th>"
       "<th>severity</th><th>what</th></tr></thead><tbody>\n";
  for (const auto& [side, f] : rows) {
    const bool loss = IsLossFinding(*f);
    h += std::string("<tr") + (loss ? "" : " class=\"ctx\"") + "><td>" + side + "</td><td><code>" + Esc(f->name) +
         "</code></td><td class=\"num" + (loss ? " bad" : "") + "\">" + Cell(f->value) + "</td><td>" +
         Esc(f->severity) + "</td><td>" + Esc(f->text) + "</td></tr>\n";
  }
  h += "</tbody></table>\n";
}

void Renderer::ProbeCounters(std::string& h) {
  if (!join_.shadow || join_.shadow->probe_counters.empty()) return;
  const std::map<std::string, uint64_t>& pc = join_.shadow->probe_counters;
  // Severities from the counter table; a counter it does not know (a newer probe's) is info.
  auto loss = [](const std::string& k) { return counters::IsLoss(counters::SeverityOf(k)); };
  std::vector<std::string> keys;
  for (const auto& [key, value] : pc) keys.push_back(key);
  std::stable_partition(keys.begin(), keys.end(), loss);
  h += "<p class=\"note\">The shadow's block probe counters: launches it saw, traced and skipped, and blocks it "
       "could not record.</p>\n<table class=\"loss\"><thead><tr><th>probe counter</th><th "
       "class=\"num\">shadow</th></tr></thead><tbody>\n";
  for (const auto& k : keys) {
    const uint64_t v = pc.at(k);
    bool bad = loss(k) && v != 0;
    std::string title = counters::Find(k) ? std::string(counters::Find(k)->help)
                                          : "not known to this twinscope (a newer probe's counter): shown as info";
    h += "<tr" + std::string(loss(k) ? "" : " class=\"ctx\"") + "><td><code title=\"" + Esc(title) + "\">" + Esc(k) +
         "</code></td><td class=\"num" + (bad ? " bad" : "") + "\">" + Cell(v) + "</td></tr>\n";
  }
  h += "</tbody></table>\n";
}

}  // namespace twinscope::report
