// The answer first: the summary section (counts, facts, warnings) and "why slow" (slowest launches, verdicts).
#include <cstdio>
#include <vector>

#include "join/why_slow.h"
#include "views/report/html.h"
#include "views/report/renderer.h"

namespace twinscope::report {
namespace {

void Card(std::string& h, const std::string& label, const std::string& value, const std::string& sub,
          const char* cls = "") {
  h += std::string("<div class=\"card ") + cls + "\"><div class=\"label\">" + label + "</div><div class=\"value\">" +
       value + "</div><div class=\"sub\">" + sub + "</div></div>\n";
}

std::string VerdictBadges(const std::vector<std::string>& verdicts) {
  std::string h;
  for (const std::string& s : verdicts) {
    std::string cls =
        (s == "fewer_blocks" || s == "fewer_sms" || s == "reordered" || s == "straggler" || s == "none") ? s : "other";
    h += "<span class=\"badge v-" + cls + "\">" + Esc(VerdictLabel(s)) + "</span>";
  }
  return h;
}

// The match classes, the divergence regions and the reasons (docs/join.md, "Divergence").
std::string DivergenceHtml(const views::JoinDoc& join, const views::SummaryDoc& s) {
  std::string h =
      "<li>Classes: exact " + Cell(s.exact) + ", diverged " + Cell(s.diverged) + " (another shape " +
      Cell(s.diverged_shape) + "), time only " + Cell(s.time_only) + ", unmatched " + Cell(s.unmatched_shadow) + "; " +
      Cell(s.divergence_regions) + " divergence regions cover " + Cell(s.in_divergence) + " shadow launches" +
      (s.ambiguous_regions ? " (" + Cell(s.ambiguous_regions) + " could sit at several places)" : "") + "</li>\n";
  if (join.divergences && !join.divergences->empty()) {
    h += "<li><table class=\"data\"><tr><th>shadow</th><th>primary</th><th>launches (shadow/primary)</th><th>other "
         "shape</th><th>only shadow</th><th>only primary</th><th>places</th></tr>\n";
    size_t n = 0;
    auto side = [](const auto& x, auto first, auto last) {
      if (!x) return std::string("&ndash;");
      return Esc(x->from == x->to ? x->from : x->from + " .. " + x->to) + " (" + Cell((*x).*first) + ".." +
             Cell((*x).*last) + ")";
    };
    for (const views::DivergenceDoc& r : *join.divergences) {
      if (n++ >= 20) break;
      h += "<tr><td>" + side(r.shadow, &views::DivergenceShadowDoc::first_seq, &views::DivergenceShadowDoc::last_seq) +
           "</td><td>" + side(r.primary, &views::DivergencePrimaryDoc::first, &views::DivergencePrimaryDoc::last) +
           "</td><td>" + Cell(r.shadow_launches) + "/" + Cell(r.primary_launches) + "</td><td>" + Cell(r.other_shape) +
           "</td><td>" + Cell(r.inserted) + "</td><td>" + Cell(r.deleted) + "</td><td>" + Cell(r.positions) +
           "</td></tr>\n";
    }
    h += "</table></li>\n";
  }
  if (join.reasons)
    for (const views::ReasonDoc& r : *join.reasons)
      h += "<li class=\"warn\">Why they diverged: " + Esc(r.text) +
           (r.remedy.empty() ? "" : ". Remedy: " + Esc(r.remedy)) + "</li>\n";
  return h;
}

}  // namespace

std::string Renderer::SamplingText() const {
  if (!join_.shadow || join_.shadow->sampling.empty()) return "";
  std::string t = "sampling";
  for (const auto& [key, value] : join_.shadow->sampling) t += " " + Esc(key) + "=" + Cell(value);
  return t;
}

void Renderer::Summary(std::string& h) {
  h += "<section id=\"summary\">\n<h2>Summary</h2>\n";
  if (!summary_) {
    h += "<p class=\"warn\">The join holds no summary.</p>\n</section>\n";
    return;
  }
  const views::SummaryDoc& s = *summary_;
  int64_t shadow = Signed(s.shadow_launches), exact = Signed(s.exact), time_only = Signed(s.time_only);
  int64_t unmatched = Signed(s.unmatched_shadow);
  int64_t ptarget = Signed(s.primary_target_launches), punmatched = Signed(s.primary_target_unmatched);
  int64_t evaluated = Signed(s.time_only_evaluated), agree = Signed(s.time_only_agree);
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
  const std::vector<std::string>& tk = s.target_kernels;
  if (!tk.empty()) {
    for (size_t i = 0; i < tk.size(); ++i) {
      const std::string& name = tk[i];
      const std::string shown = ShortKernelName(name);
      h += std::string(i ? ", " : "") + (shown == name ? "<code>" + Esc(name) + "</code>"
                                                       : "<code title=\"" + Esc(name) + "\">" + Esc(shown) + "</code>");
    }
  } else {
    h += "none named";
  }
  h += "</li>\n";
  h += DivergenceHtml(join_, s);
  if (s.primary_target_without_kernel)
    h += "<li class=\"warn\">" + Cell(s.primary_target_without_kernel) +
         " primary launches of the targets have no kernel record (lost by CUPTI: see <a href=\"#loss\">Loss</a>)."
         "</li>\n";
  bool concurrent = join_.options && join_.options->concurrent;
  if (concurrent) {
    h += "<li class=\"warn\">Primary and shadow ran <strong>at the same time</strong>: " +
         Cell(s.overlapped_primary_kernels) +
         " primary kernels ran while the shadow had GPU work; their durations may include the shadow's time "
         "slices (flagged <em>overlapped</em> below).</li>\n";
  } else {
    h += "<li>Primary and shadow ran one after the other: the primary's timings are its own.</li>\n";
  }
  // What the reader should look at before trusting the answer.
  std::vector<std::string> warnings;
  if (join_.warnings)
    for (const auto& w : *join_.warnings) warnings.push_back("The join: " + Esc(w) + ".");
  if (s.shadow_without_blocks)
    warnings.push_back(Cell(s.shadow_without_blocks) +
                       " traced shadow launches have no block records (lost in the shadow: see its probe counters "
                       "under <a href=\"#loss\">Loss</a>).");
  const views::ReadDoc unread;
  auto side = [&](const char* name, const views::ReadDoc& r, const std::optional<views::LossDoc>& loss) {
    if (r.end != "complete")
      warnings.push_back(std::string("The ") + name + " trace was not read to its end (" + Esc(r.end) +
                         "): " + "what it held up to there was joined.");
    // The trace's loss verdict, taken by stats from the counter table (include/twinscope/counters.def).
    int64_t lost = 0;
    if (loss)
      for (const auto& f : loss->findings)
        if (IsLossFinding(f)) ++lost;
    if (lost)
      warnings.push_back(std::string("The ") + name + " trace reports losses (" + Count(lost) +
                         " counters not zero): see <a href=\"#loss\">Loss</a>.");
  };
  if (join_.primary)
    side("primary", join_.primary->read, join_.primary->loss);
  else
    side("primary", unread, std::nullopt);
  if (join_.shadow)
    side("shadow", join_.shadow->read, join_.shadow->loss);
  else
    side("shadow", unread, std::nullopt);
  if (DriftingRanges() > 0)
    warnings.push_back(Count(DriftingRanges()) +
                       " ranges drifted (launches matched by time only, unmatched, or with another shape): see "
                       "<a href=\"#drift\">Drift</a>.");
  for (const auto& w : warnings) h += "<li class=\"warn\">" + w + "</li>\n";
  h += "</ul>\n</section>\n";
}

int64_t Renderer::DriftingRanges() const {
  int64_t n = 0;
  if (join_.drift)
    for (const auto& d : *join_.drift)
      if (DriftOf(d) > 0) ++n;
  return n;
}

void Renderer::WhySlow(std::string& h) {
  h += "<section id=\"why-slow\">\n<h2>Why slow</h2>\n"
       "<p class=\"note\">Per target kernel and shape, the launches that stand out against the launch of median "
       "primary duration (the reference), compared on the shadow's block structure; a launch slower with unchanged "
       "blocks counts only when it is well over the median (docs/join.md, &ldquo;Why slow&rdquo;). " +
       std::string(kStretchNote) + "</p>\n";
  if (!join_.why_slow) h += "<p class=\"warn\">The join holds no &ldquo;why slow&rdquo; answer.</p>\n";
  constexpr size_t kShown = 5;  // launches with another block structure per shape; the rest are counted
  for (const views::WhySlowDoc* gp : groups_) {
    const views::WhySlowDoc& g = *gp;
    h += "<div class=\"group\">\n<h3><code class=\"kernel\" title=\"" + Esc(g.kernel) + "\">" +
         Esc(ShortKernelName(g.kernel)) + "</code> <span class=\"shape\">grid " + Dims(g.grid) + " block " +
         Dims(g.block) + "</span></h3>\n";
    h += "<p class=\"meta\">" + Cell(g.launches) + " launches of this shape, " + Count(g.slow.size()) +
         " slow; median primary duration " + DurCell(g.median_dur_ns) + "; reference " +
         LaunchRef(Signed(g.reference)) + "</p>\n";
    h += "<table class=\"slow\"><thead><tr><th>launch</th><th class=\"num\">primary</th><th class=\"num\">vs "
         "median</th><th>verdict</th><th>what differs</th></tr></thead><tbody>\n";
    size_t shown = 0, same = 0;
    std::vector<std::vector<std::string>> more;  // verdicts of the findings past the shown ones
    double lo = 0, hi = 0;
    uint64_t same_max = 0;
    for (const views::SlowDoc& s : g.slow) {
      const bool unchanged = s.verdicts.empty() || (s.verdicts.size() == 1 && s.verdicts[0] == "none");
      if (unchanged) {
        lo = same ? std::min(lo, s.ratio) : s.ratio, hi = same ? std::max(hi, s.ratio) : s.ratio;
        same_max = std::max(same_max, s.dur_ns);
        ++same;
        continue;
      }
      if (shown >= kShown) {
        more.push_back(s.verdicts);
        continue;
      }
      ++shown;
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.2f\xC3\x97", s.ratio);
      h += "<tr><td>" + LaunchRef(Signed(s.launch)) + "</td><td class=\"num\">" + DurCell(s.dur_ns) +
           "</td><td class=\"num\">" + ratio + "</td><td>" + VerdictBadges(s.verdicts) + "</td><td>" + Esc(s.text) +
           "</td></tr>\n";
    }
    if (!more.empty())
      h += "<tr><td colspan=\"5\">" + Count(more.size()) +
           " more with another block structure than the median launch&rsquo;s: " + Esc(join::VerdictTally(more)) +
           " (join.json and join.sqlite &ldquo;why_slow&rdquo; hold every one)</td></tr>\n";
    if (same) {
      char ratio[64];
      if (same == 1 || lo == hi)
        std::snprintf(ratio, sizeof ratio, "%.2f\xC3\x97", hi);
      else
        std::snprintf(ratio, sizeof ratio, "%.2f\xC3\x97&ndash;%.2f\xC3\x97", lo, hi);
      h += "<tr><td>" + Count(same) + (same == 1 ? " launch" : " launches") + "</td><td class=\"num\">up to " +
           DurCell(same_max) + "</td><td class=\"num\">" + ratio + "</td><td>" + VerdictBadges({"none"}) +
           "</td><td>unchanged block structure: the time went elsewhere (contention, clocks, memory)</td></tr>\n";
    }
    h += "</tbody></table>\n</div>\n";
  }
  if (groups_left_out_)
    h += "<p class=\"note\">" + Count(groups_left_out_) +
         " more shape groups with findings are in the join (twinscope stats on the join lists them) but not in "
         "this report.</p>\n";
  if (join_.why_slow)
    h += "<p>" + Count(groups_quiet_) + " of " + Count(join_.why_slow->size()) +
         " shapes had no finding (no launch stands out by the rule of docs/join.md).</p>\n";
  h += "</section>\n";
}

}  // namespace twinscope::report
