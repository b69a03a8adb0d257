// The report's "Processes" section: every process pair of a twin run of several processes, each linked
// to its own report, the unpaired processes, the pairing's notes, and the rank comparison
// (docs/report.md, docs/processes.md).
#include "report/processes.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "report/html.h"
#include "report/renderer.h"

namespace twinscope::report {
namespace {

// A folder's path segments ("." and "" are none).
std::vector<std::string> Segments(const std::string& folder) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i <= folder.size(); ++i) {
    if (i == folder.size() || folder[i] == '/') {
      if (!cur.empty() && cur != ".") out.push_back(cur);
      cur.clear();
    } else {
      cur += folder[i];
    }
  }
  return out;
}

std::string Ratio(double r) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2fx", r);
  return b;
}

std::string StepName(const std::string& range) {
  if (range.size() > 2 && range.compare(range.size() - 2, 2, "#0") == 0) return range.substr(0, range.size() - 2);
  return range.empty() ? "(outside any range)" : range;
}

}  // namespace

std::string PairReportLink(const std::string& from_folder, const std::string& to_folder) {
  const auto from = Segments(from_folder), to = Segments(to_folder);
  size_t common = 0;
  while (common < from.size() && common < to.size() && from[common] == to[common]) ++common;
  std::string s;
  for (size_t i = common; i < from.size(); ++i) s += "../";
  for (size_t i = common; i < to.size(); ++i) s += to[i] + "/";
  return s + "report.html";
}

void Renderer::Processes(std::string& h) {
  const RunProcesses* rp = o_.processes;
  if (!rp || rp->pairs.empty()) return;
  const size_t cur = rp->current < rp->pairs.size() ? rp->current : 0;
  const std::string& here = rp->pairs[cur].folder;
  auto link = [&](size_t i) { return Esc(PairReportLink(here, rp->pairs[i].folder)); };
  auto pid = [](int64_t p) { return std::to_string(p); };

  h +=
      "<section id=\"processes\">\n<h2>Processes</h2>\n<p class=\"note\">This run has " +
      Count(static_cast<int64_t>(rp->pairs.size())) +
      " process pair(s), each joined on its own with its own report (docs/processes.md). This report is pair <strong>" +
      Esc(rp->pairs[cur].label) + "</strong>" + (rp->pairs[cur].main ? " (the main pair)" : "") + ".</p>\n";
  // The picker: plain links, and a select that follows them (works from file://, no server).
  h += "<p><label for=\"ts-process-picker\">Go to the report of pair </label><select id=\"ts-process-picker\" "
       "onchange=\"if(this.value)location.href=this.value\">";
  for (size_t i = 0; i < rp->pairs.size(); ++i) {
    const ProcessPairRow& p = rp->pairs[i];
    if (i != cur && !p.has_report) continue;
    h += "<option value=\"" + (i == cur ? std::string() : link(i)) + "\"" + (i == cur ? " selected" : "") + ">" +
         Esc(p.label) + (p.main ? " (main)" : "") + (i == cur ? " (this report)" : "") + "</option>";
  }
  h += "</select></p>\n";

  h += "<div class=\"table-wrap short\"><table class=\"processes\"><thead><tr><th>pair</th><th>paired by</th>"
       "<th class=\"num\">primary pid</th><th>primary command</th><th class=\"num\">shadow pid</th>"
       "<th class=\"num\">exact / shadow launches</th><th class=\"num\">primary target launches</th>"
       "<th>joined</th></tr></thead><tbody>\n";
  for (size_t i = 0; i < rp->pairs.size(); ++i) {
    const ProcessPairRow& p = rp->pairs[i];
    std::string name = Esc(p.label) + (p.main ? " <span class=\"dim\">(main)</span>" : "");
    if (i == cur)
      name = "<strong>" + name + "</strong> <span class=\"badge\">this report</span>";
    else if (p.has_report)
      name = "<a class=\"ts-pair\" href=\"" + link(i) + "\">" + name + "</a>";
    h += std::string("<tr") + (i == cur ? " class=\"hl current\"" : "") + " data-pair=\"" + Esc(p.label) + "\"><td>" +
         name + "</td><td>" + Esc(p.rule) + "</td><td class=\"num\">" + pid(p.primary_pid) + "</td><td><code>" +
         Esc(p.primary_command) + "</code></td><td class=\"num\">" + pid(p.shadow_pid) + "</td><td class=\"num\">" +
         (p.counted ? Count(static_cast<int64_t>(p.exact)) + " / " + Count(static_cast<int64_t>(p.shadow_launches)) +
                          " (" + Percent(static_cast<double>(p.exact), static_cast<double>(p.shadow_launches)) + ")"
                    : "-") +
         "</td><td class=\"num\">" + (p.counted ? Count(static_cast<int64_t>(p.primary_target_launches)) : "-") +
         "</td><td class=\"" + (p.joined ? "ok\">yes" : "bad\">no") + "</td></tr>\n";
  }
  h += "</tbody></table></div>\n";

  if (!rp->unpaired.empty()) {
    h += "<h3>Unpaired processes</h3>\n<p class=\"note\">Processes with GPU work that no rule paired: not joined "
         "(name a pair with <code>twinscope join P S --pair PRIMARY_PID=SHADOW_PID</code>).</p>\n"
         "<table class=\"unpaired\"><thead><tr><th>side</th><th class=\"num\">pid</th><th>command</th>"
         "<th class=\"num\">rank</th><th class=\"num\">launches</th></tr></thead><tbody>\n";
    for (const auto& u : rp->unpaired)
      h += "<tr><td>" + Esc(u.side) + "</td><td class=\"num\">" + pid(u.pid) + "</td><td><code>" + Esc(u.command) +
           "</code></td><td class=\"num\">" + (u.rank ? std::to_string(*u.rank) : "-") + "</td><td class=\"num\">" +
           Count(static_cast<int64_t>(u.launches)) + "</td></tr>\n";
    h += "</tbody></table>\n";
  }
  h += "<p class=\"note\" id=\"ts-without-gpu-work\">Processes without GPU work (left out, not paired): " +
       Count(static_cast<int64_t>(rp->primary_without_gpu_work)) + " primary, " +
       Count(static_cast<int64_t>(rp->shadow_without_gpu_work)) + " shadow.</p>\n";
  if (!rp->notes.empty()) {
    h += "<ul class=\"facts notes\">\n";
    for (const auto& n : rp->notes) h += "<li>note: " + Esc(n) + "</li>\n";
    h += "</ul>\n";
  }

  const procs::RankComparison* c = rp->ranks;
  if (c && c->ranks.size() >= 2) {
    const size_t n = c->ranks.size();
    std::vector<size_t> order(n);  // ranks shown by rank number
    for (size_t r = 0; r < n; ++r) order[r] = r;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return c->ranks[a] < c->ranks[b]; });
    auto rank_cell = [&](size_t r) {
      const std::string text = "rank " + std::to_string(c->ranks[r]);
      const size_t pi = r < rp->rank_pair.size() ? rp->rank_pair[r] : rp->pairs.size();
      if (pi < rp->pairs.size() && pi != cur && rp->pairs[pi].has_report)
        return "<a href=\"" + link(pi) + "\">" + Esc(text) + "</a>";
      return Esc(text);
    };
    h += "<h3 id=\"ranks\">Ranks</h3>\n<p class=\"note\">Each rank's kernel time (the sum of its kernels' durations, "
         "primary) in each step (top-level NVTX range instance) against the other ranks'; a rank stands out where it "
         "is at least " +
         Ratio(c->min_ratio) + " the other ranks' median. " + Count(static_cast<int64_t>(c->steps.size())) +
         " steps on at least two ranks, " + Count(static_cast<int64_t>(c->steps_standing_out)) +
         " where one rank stood out. A longer span only (the same kernel time: waits, the other ranks' time slices) "
         "is counted, never a finding.</p>\n"
         "<table class=\"ranks\"><thead><tr><th>rank</th><th class=\"num\">most kernel time in</th>"
         "<th class=\"num\">stood out in</th><th class=\"num\">longer span only in</th></tr></thead><tbody>\n";
    for (size_t r : order) {
      auto at = [&](const std::vector<uint64_t>& v) {
        return Count(static_cast<int64_t>(r < v.size() ? v[r] : 0)) + " steps";
      };
      h += "<tr data-rank=\"" + std::to_string(c->ranks[r]) + "\"><td>" + rank_cell(r) + "</td><td class=\"num\">" +
           at(c->slowest_in) + "</td><td class=\"num\">" + at(c->stands_out_in) + "</td><td class=\"num\">" +
           at(c->waited_in) + "</td></tr>\n";
    }
    h += "</tbody></table>\n";
    if (!c->findings.empty()) {
      h += "<ul class=\"facts findings\">\n";
      for (const auto& f : c->findings) h += "<li class=\"finding\">" + Esc(f) + "</li>\n";
      h += "</ul>\n";
      if (c->steps_standing_out > c->findings.size())
        h += "<p class=\"note\">The first " + Count(static_cast<int64_t>(c->findings.size())) + " findings of " +
             Count(static_cast<int64_t>(c->steps_standing_out)) +
             " (processes.json and the SQLite views hold every "
             "step).</p>\n";
    }
    // The steps where one rank stood out, bounded (rows, and cells with many ranks).
    const size_t by_cells = std::max<size_t>(1, rp->max_rank_step_cells / std::max<size_t>(1, n));
    const size_t max_rows = std::min(rp->max_rank_step_rows, by_cells);
    size_t shown = 0;
    std::string rows;
    for (const auto& s : c->steps) {
      if (!s.stands_out) continue;
      if (shown == max_rows) break;
      ++shown;
      rows += "<tr><td><code>" + Esc(StepName(s.range)) + "</code></td>";
      for (size_t r : order) {
        const bool present = r < s.kernels.size() ? s.kernels[r] > 0 : (r < s.kernel_ns.size() && s.kernel_ns[r]);
        const std::string v = present && r < s.kernel_ns.size() ? Duration(static_cast<double>(s.kernel_ns[r])) : "-";
        rows += "<td class=\"num" + std::string(r == s.slowest ? " bad" : "") + "\">" + v + "</td>";
      }
      rows += "<td>" + Esc("rank " + std::to_string(c->ranks[s.slowest])) + "</td><td class=\"num\">" + Ratio(s.ratio) +
              "</td></tr>\n";
    }
    if (shown) {
      h += "<div class=\"table-wrap short\"><table class=\"rank-steps\"><thead><tr><th>step</th>";
      for (size_t r : order) h += "<th class=\"num\">rank " + std::to_string(c->ranks[r]) + "</th>";
      h += "<th>slowest</th><th class=\"num\">ratio</th></tr></thead><tbody>\n" + rows + "</tbody></table></div>\n";
      h += "<p class=\"note\">Kernel time per rank in the steps where one rank stood out";
      if (c->steps_standing_out > shown)
        h += ": the first " + Count(static_cast<int64_t>(shown)) + " of " +
             Count(static_cast<int64_t>(c->steps_standing_out));
      h += "; ratio: the slowest rank's kernel time over the other ranks' median.</p>\n";
    } else {
      h += "<p class=\"note\">No step where one rank stood out.</p>\n";
    }
  }
  h += "</section>\n";
}

}  // namespace twinscope::report
