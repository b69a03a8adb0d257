// The answer first: the summary section (counts, facts, warnings) and "why slow" (slowest launches, verdicts).
#include <cstdio>
#include <vector>

#include "views/report/html.h"
#include "views/report/renderer.h"

namespace twinscope::report {
namespace {

void Card(std::string& h, const std::string& label, const std::string& value, const std::string& sub,
          const char* cls = "") {
  h += std::string("<div class=\"card ") + cls + "\"><div class=\"label\">" + label + "</div><div class=\"value\">" +
       value + "</div><div class=\"sub\">" + sub + "</div></div>\n";
}

std::string VerdictBadges(const json& verdicts) {
  std::string h;
  if (!verdicts.is_array()) return h;
  for (const auto& v : verdicts) {
    if (!v.is_string()) continue;
    std::string s = v.get<std::string>();
    std::string cls =
        (s == "fewer_blocks" || s == "fewer_sms" || s == "reordered" || s == "straggler" || s == "none") ? s : "other";
    h += "<span class=\"badge v-" + cls + "\">" + Esc(VerdictLabel(s)) + "</span>";
  }
  return h;
}

// The match classes, the divergence regions and the reasons (docs/join.md, "Divergence").
std::string DivergenceHtml(const json& join, const json& s) {
  std::string h =
      "<li>Classes: exact " + Count(Int(s, "exact")) + ", diverged " + Count(Int(s, "diverged")) + " (another shape " +
      Count(Int(s, "diverged_shape")) + "), time only " + Count(Int(s, "time_only")) + ", unmatched " +
      Count(Int(s, "unmatched_shadow")) + "; " + Count(Int(s, "divergence_regions")) + " divergence regions cover " +
      Count(Int(s, "in_divergence")) + " shadow launches" +
      (Int(s, "ambiguous_regions") ? " (" + Count(Int(s, "ambiguous_regions")) + " could sit at several places)" : "") +
      "</li>\n";
  const json& regions = At(join, "divergences");
  if (regions.is_array() && !regions.empty()) {
    h += "<li><table class=\"data\"><tr><th>shadow</th><th>primary</th><th>launches (shadow/primary)</th><th>other "
         "shape</th><th>only shadow</th><th>only primary</th><th>places</th></tr>\n";
    size_t n = 0;
    for (const auto& r : regions) {
      if (n++ >= 20) break;
      auto side = [](const json& x, const char* first, const char* last) {
        if (!x.is_object()) return std::string("&ndash;");
        const std::string from = Str(x, "from"), to = Str(x, "to");
        return Esc(from == to ? from : from + " .. " + to) + " (" + Cell(At(x, first)) + ".." + Cell(At(x, last)) + ")";
      };
      h += "<tr><td>" + side(At(r, "shadow"), "first_seq", "last_seq") + "</td><td>" +
           side(At(r, "primary"), "first", "last") + "</td><td>" + Count(Int(r, "shadow_launches")) + "/" +
           Count(Int(r, "primary_launches")) + "</td><td>" + Count(Int(r, "other_shape")) + "</td><td>" +
           Count(Int(r, "inserted")) + "</td><td>" + Count(Int(r, "deleted")) + "</td><td>" +
           Count(Int(r, "positions")) + "</td></tr>\n";
    }
    h += "</table></li>\n";
  }
  for (const auto& r : At(join, "reasons"))
    h += "<li class=\"warn\">Why they diverged: " + Esc(Str(r, "text")) +
         (Str(r, "remedy").empty() ? "" : ". Remedy: " + Esc(Str(r, "remedy"))) + "</li>\n";
  return h;
}

}  // namespace

std::string Renderer::SamplingText() const {
  const json& sm = At(At(join_, "shadow"), "sampling");
  if (!sm.is_object() || sm.empty()) return "";
  std::string t = "sampling";
  for (auto it = sm.begin(); it != sm.end(); ++it) t += " " + Esc(it.key()) + "=" + Cell(it.value());
  return t;
}

void Renderer::Summary(std::string& h) {
  const json& s = summary_;
  h += "<section id=\"summary\">\n<h2>Summary</h2>\n";
  if (!s.is_object()) {
    h += "<p class=\"warn\">The join holds no summary.</p>\n</section>\n";
    return;
  }
  int64_t shadow = Int(s, "shadow_launches"), exact = Int(s, "exact"), time_only = Int(s, "time_only");
  int64_t unmatched = Int(s, "unmatched_shadow");
  int64_t ptarget = Int(s, "primary_target_launches"), punmatched = Int(s, "primary_target_unmatched");
  const json& acc = At(s, "time_only_accuracy");
  int64_t evaluated = Int(acc, "evaluated"), agree = Int(acc, "agree");
  h += "<div class=\"cards\">\n";
  Card(h, "matched exactly", Count(exact), Percent(exact, shadow) + " of " + Count(shadow) + " shadow launches",
       exact == shadow && shadow > 0 ? "good" : "");
  Card(h, "matched by time only", Count(time_only),
       time_only ? "no key match; nearest launch of the same kernel, labelled <em>time</em>" : "none",
       time_only ? "warn" : "");
  Card(h, "shadow launches unmatched", Count(unmatched), unmatched ? "no primary kernel found" : "none",
       unmatched ? "bad" : "");
  std::string sampling = SamplingText();
  Card(h, "primary target launches without a shadow launch", Count(punmatched),
       "of " + Count(ptarget) + (sampling.empty() ? "" : " (shadow " + sampling + ")"));
  Card(h, "time-only accuracy", evaluated ? Percent(agree, evaluated) : "&ndash;",
       evaluated ? "a join by time alone picks the same kernel for " + Count(agree) + " of " + Count(evaluated) +
                       " exact matches"
                 : "not evaluated",
       evaluated && agree < evaluated ? "warn" : "");
  h += "</div>\n<ul class=\"facts\">\n";
  h += "<li>Target kernels: ";
  const json& tk = At(s, "target_kernels");
  if (tk.is_array() && !tk.empty()) {
    for (size_t i = 0; i < tk.size(); ++i) {
      const std::string name = tk[i].is_string() ? tk[i].get<std::string>() : "", shown = ShortKernelName(name);
      h += std::string(i ? ", " : "") + (shown == name ? "<code>" + Cell(tk[i]) + "</code>"
                                                       : "<code title=\"" + Esc(name) + "\">" + Esc(shown) + "</code>");
    }
  } else {
    h += "none named";
  }
  h += "</li>\n";
  h += DivergenceHtml(join_, s);
  if (Int(s, "primary_target_without_kernel"))
    h += "<li class=\"warn\">" + Count(Int(s, "primary_target_without_kernel")) +
         " primary launches of the targets have no kernel record (lost by CUPTI: see <a href=\"#loss\">Loss</a>)."
         "</li>\n";
  bool concurrent = Bool(At(join_, "options"), "concurrent");
  if (concurrent) {
    h += "<li class=\"warn\">Primary and shadow ran <strong>at the same time</strong>: " +
         Count(Int(s, "overlapped_primary_kernels")) +
         " primary kernels ran while the shadow had GPU work; their durations may include the shadow's time "
         "slices (flagged <em>overlapped</em> below).</li>\n";
  } else {
    h += "<li>Primary and shadow ran one after the other: the primary's timings are its own.</li>\n";
  }
  // What the reader should look at before trusting the answer.
  std::vector<std::string> warnings;
  for (const auto& w : At(join_, "warnings"))
    if (w.is_string()) warnings.push_back("The join: " + Esc(w.get<std::string>()) + ".");
  if (Int(s, "shadow_without_blocks"))
    warnings.push_back(Count(Int(s, "shadow_without_blocks")) +
                       " traced shadow launches have no block records (lost in the shadow: see its probe counters "
                       "under <a href=\"#loss\">Loss</a>).");
  for (const char* side : {"primary", "shadow"}) {
    const json& r = At(At(join_, side), "read");
    std::string end = Str(r, "end", "unknown");
    if (end != "complete")
      warnings.push_back(std::string("The ") + side + " trace was not read to its end (" + Esc(end) +
                         "): " + "what it held up to there was joined.");
    // The trace's loss verdict, taken by stats from the counter table (include/twinscope/counters.def).
    int64_t lost = 0;
    for (const auto& f : At(At(At(join_, side), "loss"), "findings"))
      if (IsLossFinding(f)) ++lost;
    if (lost)
      warnings.push_back(std::string("The ") + side + " trace reports losses (" + Count(lost) +
                         " counters not zero): see <a href=\"#loss\">Loss</a>.");
  }
  if (DriftingRanges() > 0)
    warnings.push_back(Count(DriftingRanges()) +
                       " ranges drifted (launches matched by time only, unmatched, or with another shape): see "
                       "<a href=\"#drift\">Drift</a>.");
  for (const auto& w : warnings) h += "<li class=\"warn\">" + w + "</li>\n";
  h += "</ul>\n</section>\n";
}

int64_t Renderer::DriftingRanges() const {
  int64_t n = 0;
  for (const auto& d : At(join_, "drift"))
    if (DriftOf(d) > 0) ++n;
  return n;
}

void Renderer::WhySlow(std::string& h) {
  h += "<section id=\"why-slow\">\n<h2>Why slow</h2>\n"
       "<p class=\"note\">Per target kernel and shape, the slowest launches against the launch of median primary "
       "duration (the reference), compared on the shadow's block structure. " +
       std::string(kStretchNote) + "</p>\n";
  if (groups_.empty()) {
    h += Has(join_, "why_slow") ? "<p>No launch was slower than the median of its shape.</p>\n"
                                : "<p class=\"warn\">The join holds no &ldquo;why slow&rdquo; answer.</p>\n";
  }
  for (const json* gp : groups_) {
    const json& g = *gp;
    h += "<div class=\"group\">\n<h3><code class=\"kernel\" title=\"" + Esc(Str(g, "kernel")) + "\">" +
         Esc(ShortKernelName(Str(g, "kernel"))) + "</code> <span class=\"shape\">grid " + Dims(At(g, "grid")) +
         " block " + Dims(At(g, "block")) + "</span></h3>\n";
    h += "<p class=\"meta\">" + Count(Int(g, "launches")) + " launches of this shape; median primary duration " +
         DurCell(g, "median_dur_ns") + "; reference " +
         (Has(g, "reference") ? LaunchRef(Int(g, "reference")) : std::string("&ndash;")) + "</p>\n";
    const json& slow = At(g, "slow");
    if (!slow.is_array() || slow.empty()) {
      h += "<p>No launch of this shape is slower than its median.</p>\n</div>\n";
      continue;
    }
    h += "<table class=\"slow\"><thead><tr><th>launch</th><th class=\"num\">primary</th><th class=\"num\">vs "
         "median</th><th>verdict</th><th>what differs</th></tr></thead><tbody>\n";
    for (const auto& s : slow) {
      char ratio[32] = "&ndash;";
      if (At(s, "ratio").is_number()) std::snprintf(ratio, sizeof ratio, "%.2f\xC3\x97", Num(s, "ratio"));
      h += "<tr><td>" + (Has(s, "launch") ? LaunchRef(Int(s, "launch")) : std::string("&ndash;")) +
           "</td><td class=\"num\">" + DurCell(s, "dur_ns") + "</td><td class=\"num\">" + ratio + "</td><td>" +
           VerdictBadges(At(s, "verdicts")) + "</td><td>" + Esc(Str(s, "text")) + "</td></tr>\n";
    }
    h += "</tbody></table>\n</div>\n";
  }
  if (groups_left_out_)
    h += "<p class=\"note\">" + Count(groups_left_out_) + " more shape groups are in the join (twinscope stats " +
         "on the join lists them) but not in this report.</p>\n";
  h += "</section>\n";
}

}  // namespace twinscope::report
