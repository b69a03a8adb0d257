// The text views of the joined model that `twinscope join`, `twin` and `stats` print: the summary, the
// divergence, drift, requests and "why slow" (docs/join.md). The model (src/join) only computes; this prints.
#include "views/join_text.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstddef>

#include "join/join_views.h"
#include "join/why_slow.h"

namespace twinscope::views {
namespace {

using namespace twinscope::join;

std::string DimsText(Dim3 d) {
  return "[" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + "]";
}

std::string FileName(const std::string& p) {
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// "Why slow": the shapes with findings (docs/join.md, "Why slow"), each with its first launches whose block
// structure differs and one line for those slower with unchanged blocks; the last line counts the shapes
// without a finding.
void PrintWhySlow(std::FILE* out, const JoinedModel& m) {
  if (m.groups.empty()) return;
  std::fprintf(out, "why slow (shadow block times are stretched by instrumentation: structure is compared):\n");
  const size_t shown_max = m.options.slow_per_group;
  size_t quiet = 0;
  for (const auto& g : m.groups) {
    if (g.slow.empty()) {
      ++quiet;
      continue;
    }
    std::fprintf(out, "  %s grid %s block %s: %" PRIu64 " launches, median %s; %zu slow\n", g.kernel.c_str(),
                 DimsText(g.grid).c_str(), DimsText(g.block).c_str(), g.launches, HumanNs(g.median_dur_ns).c_str(),
                 g.slow.size());
    size_t shown = 0, same = 0;
    std::vector<std::vector<std::string>> more;  // verdicts of the findings past the shown ones
    double same_lo = 0, same_hi = 0;
    uint64_t same_max_ns = 0;
    for (const auto& sl : g.slow) {  // slowest first
      if (!sl.verdicts) {
        same_lo = same ? std::min(same_lo, sl.ratio) : sl.ratio;
        same_hi = same ? std::max(same_hi, sl.ratio) : sl.ratio;
        same_max_ns = std::max(same_max_ns, sl.dur_ns);
        ++same;
        continue;
      }
      if (shown >= shown_max) {
        more.push_back(VerdictNames(sl.verdicts));
        continue;
      }
      ++shown;
      const ShadowLaunch& sh = m.shadow[m.matches[sl.match].shadow];
      std::fprintf(out, "    launch %zu (%s #%u): %s\n", sl.match, sh.path.empty() ? "(no range)" : sh.path.c_str(),
                   sh.ordinal, sl.text.c_str());
    }
    if (!more.empty())
      std::fprintf(out,
                   "    ... %zu more with another block structure than the median launch's: %s (join.json and "
                   "join.sqlite \"why_slow\" list each)\n",
                   more.size(), VerdictTally(more).c_str());
    if (same) {
      char ratios[64];
      if (same_lo == same_hi || same == 1)
        std::snprintf(ratios, sizeof ratios, "%.2fx", same_hi);
      else
        std::snprintf(ratios, sizeof ratios, "%.2fx-%.2fx", same_lo, same_hi);
      std::fprintf(out,
                   "    %zu launch%s at %s the median (up to +%s) with unchanged block structure: the time went "
                   "elsewhere (contention, clocks, memory)\n",
                   same, same == 1 ? "" : "es", ratios, HumanNs(same_max_ns - g.median_dur_ns).c_str());
    }
    if (!g.note.empty()) std::fprintf(out, "    %s\n", g.note.c_str());
  }
  std::fprintf(out, "  %zu of %zu shapes had no finding (no launch over the rule of docs/join.md, \"Why slow\")\n",
               quiet, m.groups.size());
}

}  // namespace

void PrintRequests(std::FILE* out, const join::JoinedModel& m, size_t rows) {
  const RequestTable& t = m.requests;
  if (!t.present) return;
  size_t ok = 0;
  uint64_t smin = UINT64_MAX, smax = 0, dmin = UINT64_MAX, dmax = 0, launches = 0, exact = 0, time_only = 0;
  std::vector<uint64_t> kernel, share;
  for (const auto& r : t.requests) {
    ok += r.status == 200 ? 1 : 0;
    smin = std::min<uint64_t>(smin, r.steps.size()), smax = std::max<uint64_t>(smax, r.steps.size());
    dmin = std::min(dmin, r.decode_steps), dmax = std::max(dmax, r.decode_steps);
    launches += r.target_launches, exact += r.shadow_exact, time_only += r.shadow_time_only;
    kernel.push_back(r.kernel_ns);
    share.push_back(r.kernel_share_ns);
  }
  auto p50 = [](std::vector<uint64_t> v) {
    if (v.empty()) return uint64_t{0};
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2), v.end());
    return v[(v.size() - 1) / 2];
  };
  std::fprintf(out, "requests (%s): %zu, %zu with status 200", FileName(t.trace_path).c_str(), t.requests.size(), ok);
  if (t.requests.empty()) {
    std::fprintf(out, "\n");
    return;
  }
  std::fprintf(out, "; steps per request %" PRIu64 "-%" PRIu64 " (decode %" PRIu64 "-%" PRIu64 ")\n", smin, smax, dmin,
               dmax);
  std::fprintf(out,
               "  kernel time of a request's steps p50 %s (its share by tokens p50 %s); target launches in its steps "
               "%" PRIu64 ", matched in the shadow %" PRIu64 " exactly (%.1f%%), %" PRIu64 " by time only\n",
               HumanNs(p50(kernel)).c_str(), HumanNs(p50(share)).c_str(), launches, exact,
               launches ? 100.0 * static_cast<double>(exact) / static_cast<double>(launches) : 0.0, time_only);
  if (t.primary_steps_without_request)
    std::fprintf(out, "  %" PRIu64 " step ranges of the primary are named by no request in the trace\n",
                 t.primary_steps_without_request);
  if (!rows) return;
  std::fprintf(out, "  %-20s %6s %6s %12s %12s %8s %8s\n", "id", "status", "steps", "kernel time", "share", "targets",
               "exact");
  for (size_t i = 0; i < t.requests.size() && i < rows; ++i) {
    const ServedRequest& r = t.requests[i];
    std::string id = r.id.size() > 20 ? r.id.substr(0, 17) + "..." : r.id;
    std::fprintf(out, "  %-20s %6" PRId64 " %6zu %12s %12s %8" PRIu64 " %8" PRIu64 "\n", id.c_str(), r.status,
                 r.steps.size(), HumanNs(r.kernel_ns).c_str(), HumanNs(r.kernel_share_ns).c_str(), r.target_launches,
                 r.shadow_exact);
  }
  if (t.requests.size() > rows)
    std::fprintf(out, "  (%zu more: twinscope stats DIR --json, \"requests\")\n", t.requests.size() - rows);
}

void PrintJoin(std::FILE* out, const join::JoinedModel& m, size_t top) {
  const Summary& s = m.summary;
  auto pct = [](uint64_t a, uint64_t b) { return b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0.0; };
  std::fprintf(out, "join: primary %s (%s), shadow %s (%s)\n", m.primary_path.c_str(),
               ReadEndName(m.primary_side.stats.report.end), m.shadow_path.c_str(),
               ReadEndName(m.shadow_side.stats.report.end));
  for (const auto& w : m.warnings) std::fprintf(out, "  warning: %s\n", w.c_str());
  std::fprintf(out, "target kernels:");
  for (const auto& k : s.target_kernels) std::fprintf(out, " %s", k.c_str());
  std::fprintf(out, "%s\n", s.target_kernels.empty() ? " none" : "");
  std::fprintf(out,
               "shadow launches %" PRIu64 ": exact %" PRIu64 " (%.1f%%), diverged %" PRIu64 " (other shape %" PRIu64
               "), time only %" PRIu64 ", unmatched %" PRIu64 "\n",
               s.shadow_launches, s.exact, pct(s.exact, s.shadow_launches), s.diverged, s.diverged_shape, s.time_only,
               s.unmatched_shadow);
  if (!m.divergences.empty()) {
    std::fprintf(out,
                 "divergence: %zu regions where the shadow did other work cover %" PRIu64 " shadow and %" PRIu64
                 " primary launches%s\n",
                 m.divergences.size(), s.in_divergence, s.primary_in_divergence,
                 s.ambiguous_regions
                     ? (" (" + std::to_string(s.ambiguous_regions) + " could sit at several places)").c_str()
                     : "");
    for (size_t i = 0; i < m.divergences.size() && i < 10; ++i)
      std::fprintf(out, "  %s\n", DivergenceText(m.divergences[i]).c_str());
    if (m.divergences.size() > 10)
      std::fprintf(out, "  ... %zu more (join.json \"divergences\")\n", m.divergences.size() - 10);
  }
  for (const auto& r : m.reasons) {
    std::fprintf(out, "why they diverged: %s\n", r.text.c_str());
    if (!r.remedy.empty()) std::fprintf(out, "  remedy: %s\n", r.remedy.c_str());
  }
  std::fprintf(out,
               "primary launches of the targets %" PRIu64 ": without a shadow launch %" PRIu64
               ", without a kernel record %" PRIu64 "\n",
               s.primary_target_launches, s.primary_target_unmatched, s.primary_target_without_kernel);
  if (s.shadow_without_blocks) {
    std::fprintf(out,
                 "warning: %" PRIu64
                 " traced shadow launches have no block records (lost in the shadow: see its "
                 "counters with twinscope stats %s)\n",
                 s.shadow_without_blocks, m.shadow_path.c_str());
  }
  if (s.time_only_evaluated) {
    std::fprintf(out, "a time-only join of the same data agrees on %" PRIu64 " of %" PRIu64 " exact matches (%.1f%%)\n",
                 s.time_only_agree, s.time_only_evaluated, pct(s.time_only_agree, s.time_only_evaluated));
  }
  if (m.options.concurrent) {
    std::fprintf(out, "concurrent run: %" PRIu64 " primary target kernels ran while the shadow had GPU work\n",
                 s.overlapped_primary_kernels);
    const auto& o = s.overlap;
    if (o.computed && o.primary_last_kernel != 0)
      std::fprintf(out,
                   "  shadow active %.3f s .. %.3f s, primary kernels %.3f s .. %.3f s (from the shadow's start; %s)\n",
                   0.0, (o.window_end - o.window_start) / 1e9, (o.primary_first_kernel - o.window_start) / 1e9,
                   (o.primary_last_kernel - o.window_start) / 1e9, o.clock.c_str());
  }
  uint64_t drifting = 0;
  for (const auto& d : m.drift) drifting += (d.diverged + d.time_only + d.unmatched + d.shape_differs) ? 1 : 0;
  std::fprintf(out,
               "drift: %" PRIu64 " of %zu top-level ranges have launches not matched exactly or of another shape\n",
               drifting, m.drift.size());
  size_t shown = 0;
  for (const auto& d : m.drift) {
    if (!(d.diverged + d.time_only + d.unmatched + d.shape_differs) || shown++ >= 10) continue;
    std::fprintf(out,
                 "  %-24s exact %" PRIu64 ", diverged %" PRIu64 ", time only %" PRIu64 ", unmatched %" PRIu64
                 ", shape differs %" PRIu64 "\n",
                 d.range.empty() ? "(no range)" : d.range.c_str(), d.exact, d.diverged, d.time_only, d.unmatched,
                 d.shape_differs);
  }
  PrintRequests(out, m, 10);
  PrintWhySlow(out, m);
  if (top && !m.matches.empty()) {
    std::fprintf(out, "slowest matched launches (primary timing; shadow block structure):\n");
    std::fprintf(out, "  %6s %-8s %-24s %10s %6s | %7s %7s %4s %9s %6s %10s\n", "id", "match", "key", "duration",
                 "stream", "blocks", "working", "SMs", "per-SM", "tau", "tail/span");
    size_t n = 0;
    for (size_t id : SlowestFirst(m)) {
      if (n++ >= top) break;
      const Match& mt = m.matches[id];
      const PrimaryLaunch& p = m.primary[mt.primary];
      const ShadowLaunch& sh = m.shadow[mt.shadow];
      const auto& b = sh.blocks;
      std::string key = (sh.path.empty() ? "(no range)" : sh.path) + " #" + std::to_string(sh.ordinal);
      if (key.size() > 24) key = "..." + key.substr(key.size() - 21);
      char per_sm[32];
      std::snprintf(per_sm, sizeof per_sm, "%" PRIu64 "-%" PRIu64, b.blocks_per_sm_min, b.blocks_per_sm_max);
      char tail[32];
      std::snprintf(tail, sizeof tail, "%.0f%%", b.span_ns ? 100.0 * b.tail_ns / b.span_ns : 0.0);
      std::fprintf(out, "  %6zu %-8s %-24s %10s %6u | %7" PRIu64 " %7" PRIu64 " %4u %9s %6.2f %10s\n", id,
                   MatchKindName(mt.kind), key.c_str(), p.have_kernel ? HumanNs(Dur(p)).c_str() : "-", p.stream,
                   b.blocks_seen, sh.blocks_working, b.sms_used, per_sm,
                   std::isnan(b.kendall_tau) ? 0.0 : b.kendall_tau, tail);
    }
  }
}

}  // namespace twinscope::views
