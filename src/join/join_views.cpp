// The text view of the joined model (its JSON: src/views/join_doc*).
#include "join/join_views.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <set>
#include <unordered_map>

#include "join/why_slow.h"

namespace twinscope::join {
namespace {

std::string DimsText(Dim3 d) {
  return "[" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + "]";
}

}  // namespace

uint64_t Dur(const PrimaryLaunch& p) { return p.have_kernel ? p.end_ns - p.start_ns : 0; }

std::vector<size_t> SlowestFirst(const JoinedModel& m) {
  std::vector<size_t> order(m.matches.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return Dur(m.primary[m.matches[a].primary]) > Dur(m.primary[m.matches[b].primary]);
  });
  return order;
}

namespace {

std::string RangeText(const std::string& from, const std::string& to) {
  const std::string a = from.empty() ? "(no range)" : from, b = to.empty() ? "(no range)" : to;
  return a == b ? a : a + " .. " + b;
}

}  // namespace

std::string DivergenceText(const DivergenceRegion& d) {
  std::string t;
  if (d.shadow_launches)
    t += "shadow " + RangeText(d.shadow_from, d.shadow_to) + " (seq " + std::to_string(d.first_seq) + ".." +
         std::to_string(d.last_seq) + ", " + std::to_string(d.shadow_launches) + " launches)";
  if (d.primary_launches)
    t += std::string(t.empty() ? "" : " vs ") + "primary " + RangeText(d.primary_from, d.primary_to) + " (#" +
         std::to_string(d.first_primary) + ".." + std::to_string(d.last_primary) + ", " +
         std::to_string(d.primary_launches) + " launches)";
  std::vector<std::string> what;
  if (d.other_shape) what.push_back(std::to_string(d.other_shape) + " of another shape");
  if (d.diverged > d.other_shape) what.push_back(std::to_string(d.diverged - d.other_shape) + " in another range");
  if (d.inserted) what.push_back(std::to_string(d.inserted) + " only in the shadow");
  if (d.deleted) what.push_back(std::to_string(d.deleted) + " only in the primary");
  if (d.other_kernels)
    what.push_back(std::to_string(d.other_kernels) + " of kernels the other side did not launch here");
  if (!what.empty()) {
    t += ": ";
    for (size_t i = 0; i < what.size(); ++i) t += (i ? ", " : "") + what[i];
  }
  if (d.positions > 1) t += " [could sit at " + std::to_string(d.positions) + " places]";
  return t;
}

std::vector<uint64_t> DetailSeqs(const JoinedModel& m, size_t max) {
  std::vector<uint64_t> out;
  std::set<uint64_t> seen;
  auto add = [&](size_t match) {
    uint64_t seq = m.shadow[m.matches[match].shadow].seq;
    if (out.size() < max && seen.insert(seq).second) out.push_back(seq);
  };
  for (const auto& g : m.groups) {
    if (g.slow.empty()) continue;
    add(g.reference);
    for (const auto& s : g.slow) add(s.match);
  }
  for (uint64_t seq : RequestDetailSeqs(m, kRequestDetailLaunches))
    if (out.size() < max && seen.insert(seq).second) out.push_back(seq);
  for (size_t i : SlowestFirst(m)) add(i);
  return out;
}

void PrintJoin(std::FILE* out, const JoinedModel& m, size_t top) {
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
  if (!m.groups.empty())
    std::fprintf(out, "why slow (shadow block times are stretched by instrumentation: structure is compared):\n");
  for (const auto& g : m.groups) {
    std::fprintf(out, "  %s grid %s block %s: %" PRIu64 " launches, median %s\n", g.kernel.c_str(),
                 DimsText(g.grid).c_str(), DimsText(g.block).c_str(), g.launches, HumanNs(g.median_dur_ns).c_str());
    if (!g.note.empty()) std::fprintf(out, "    %s\n", g.note.c_str());
    for (const auto& sl : g.slow) {
      const ShadowLaunch& sh = m.shadow[m.matches[sl.match].shadow];
      std::fprintf(out, "    launch %zu (%s #%u): %s\n", sl.match, sh.path.empty() ? "(no range)" : sh.path.c_str(),
                   sh.ordinal, sl.text.c_str());
    }
  }
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

}  // namespace twinscope::join
