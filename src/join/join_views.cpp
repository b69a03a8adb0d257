// JSON and text views of the joined model.
#include "join/join_views.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <set>
#include <unordered_map>

#include "join/why_slow.h"

namespace twinscope::join {
namespace {

using nlohmann::json;

json Dims(Dim3 d) { return json::array({d.x, d.y, d.z}); }
json Num(double v) { return std::isnan(v) ? json(nullptr) : json(v); }

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

std::string DimsText(Dim3 d) {
  return "[" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + "]";
}

uint64_t Dur(const PrimaryLaunch& p) { return p.have_kernel ? p.end_ns - p.start_ns : 0; }

// Match indices, slowest primary duration first (launches without timing last).
std::vector<size_t> SlowestFirst(const JoinedModel& m) {
  std::vector<size_t> order(m.matches.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return Dur(m.primary[m.matches[a].primary]) > Dur(m.primary[m.matches[b].primary]);
  });
  return order;
}

json LossJson(const stats::TraceStats& s) { return stats::StatsToJson(s, 1)["loss"]; }

json ReadJson(const stats::TraceStats& s) {
  return {{"end", ReadEndName(s.report.end)}, {"ok", s.report.ok()}, {"message", s.report.message}};
}

std::string Name(const PrimaryLaunch& p) { return p.demangled.empty() ? p.kernel : p.demangled; }

json LaunchJson(const JoinedModel& m, size_t id) {
  const Match& mt = m.matches[id];
  const PrimaryLaunch& p = m.primary[mt.primary];
  const ShadowLaunch& s = m.shadow[mt.shadow];
  const auto& b = s.blocks;
  json pj = {{"stream", p.stream},          {"device", p.device}, {"grid", Dims(p.grid)},
             {"block", Dims(p.block)},      {"graph", p.graph},   {"overlapped", p.overlapped},
             {"have_kernel", p.have_kernel}};
  if (p.have_kernel) {
    pj["start_ns"] = p.start_ns - m.primary_t0_ns;
    pj["end_ns"] = p.end_ns - m.primary_t0_ns;
    pj["dur_ns"] = p.end_ns - p.start_ns;
  }
  json sj = {{"seq", s.seq},
             {"grid", Dims(s.grid)},
             {"blocks_expected", b.blocks_expected},
             {"blocks_seen", b.blocks_seen},
             {"blocks_working", s.blocks_working},
             {"sms_used", b.sms_used},
             {"blocks_per_sm", json::array({b.blocks_per_sm_min, b.blocks_per_sm_median, b.blocks_per_sm_max})},
             {"inversions", b.inversions},
             {"kendall_tau", Num(b.kendall_tau)},
             {"straggler",
              {{"block", b.straggler.block_linear},
               {"sm", b.straggler.sm},
               {"exit_ns", b.straggler.exit_ns ? b.straggler.exit_ns - b.first_enter_ns : 0}}},
             {"tail_ns", b.tail_ns},
             {"span_ns", b.span_ns},
             {"block_p50_ns", b.block_duration_p50_ns}};
  return {{"id", id},
          {"kernel", Name(p)},
          {"match", MatchKindName(mt.kind)},
          {"key", {{"path", s.path}, {"ordinal", s.ordinal}, {"hash", Hex(s.hash)}}},
          {"shape_differs", mt.shape_differs},
          {"ambiguous", mt.ambiguous},
          {"region", mt.region >= 0 ? json(mt.region) : json(nullptr)},
          {"primary", pj},
          {"shadow", sj}};
}

std::string RangeText(const std::string& from, const std::string& to) {
  const std::string a = from.empty() ? "(no range)" : from, b = to.empty() ? "(no range)" : to;
  return a == b ? a : a + " .. " + b;
}

}  // namespace

json DivergenceJson(const JoinedModel& m, const DivergenceRegion& d) {
  json j = {{"shadow_launches", d.shadow_launches},
            {"primary_launches", d.primary_launches},
            {"diverged", d.diverged},
            {"other_shape", d.other_shape},
            {"inserted", d.inserted},
            {"deleted", d.deleted},
            {"other_kernels", d.other_kernels},
            {"positions", d.positions}};
  if (d.shadow_launches)
    j["shadow"] = {{"first_seq", d.first_seq}, {"last_seq", d.last_seq}, {"from", d.shadow_from}, {"to", d.shadow_to}};
  else
    j["shadow"] = nullptr;
  if (d.primary_launches)
    j["primary"] = {
        {"first", d.first_primary}, {"last", d.last_primary}, {"from", d.primary_from}, {"to", d.primary_to}};
  else
    j["primary"] = nullptr;
  (void)m;
  return j;
}

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

json JoinToJson(const JoinedModel& m, const JsonBounds& bounds, const std::vector<LaunchBlocks>& blocks) {
  const Summary& s = m.summary;
  json j;
  j["format"] = "twinscope-join";
  j["version"] = 1;
  const auto& ph = m.primary_side.stats.header;
  const auto& sh = m.shadow_side.stats.header;
  j["primary"] = {
      {"path", m.primary_path},
      {"pid", ph.value("pid", 0)},
      {"command_line", ph.value("command_line", json::array())},
      {"read", ReadJson(m.primary_side.stats)},
      {"kernels", m.primary_side.stats.counts.count("kernel") ? m.primary_side.stats.counts.at("kernel") : 0},
      {"launches", m.primary_side.launches},
      {"loss", LossJson(m.primary_side.stats)}};
  json sampling = json::object();
  if (sh.contains("config") && sh["config"].is_object()) {
    for (const char* k : {"every", "max_launches", "per_second", "budget_pct", "patch_mode"})
      if (sh["config"].contains(k)) sampling[k] = sh["config"][k];
  }
  j["shadow"] = {{"path", m.shadow_path},
                 {"pid", sh.value("pid", 0)},
                 {"read", ReadJson(m.shadow_side.stats)},
                 {"launches_traced", m.shadow.size()},
                 {"blocks", m.shadow_side.stats.counts.count("block") ? m.shadow_side.stats.counts.at("block") : 0},
                 {"patterns", sh.value("patterns", json::array())},
                 {"sampling", sampling},
                 {"probe_counters", m.shadow_side.stats.probe_counters},
                 {"loss", LossJson(m.shadow_side.stats)}};
  j["options"] = {{"concurrent", m.options.concurrent}};
  j["warnings"] = m.warnings;
  j["summary"] = {{"shadow_launches", s.shadow_launches},
                  {"exact", s.exact},
                  {"diverged", s.diverged},
                  {"diverged_shape", s.diverged_shape},
                  {"time_only", s.time_only},
                  {"unmatched_shadow", s.unmatched_shadow},
                  {"primary_target_launches", s.primary_target_launches},
                  {"primary_target_unmatched", s.primary_target_unmatched},
                  {"primary_target_without_kernel", s.primary_target_without_kernel},
                  {"shadow_without_blocks", s.shadow_without_blocks},
                  {"time_only_accuracy", {{"evaluated", s.time_only_evaluated}, {"agree", s.time_only_agree}}},
                  {"overlapped_primary_kernels", s.overlapped_primary_kernels},
                  {"divergence_regions", m.divergences.size()},
                  {"in_divergence", s.in_divergence},
                  {"primary_in_divergence", s.primary_in_divergence},
                  {"ambiguous", s.ambiguous},
                  {"ambiguous_regions", s.ambiguous_regions},
                  {"alignment",
                   {{"identical", s.alignment.identical},
                    {"anchors", s.alignment.anchors},
                    {"segments", s.alignment.segments},
                    {"capped_segments", s.alignment.capped_segments},
                    {"capped_launches", s.alignment.capped_launches},
                    {"max_d", s.alignment.max_d},
                    {"shadow_sampled", s.alignment.sampled}}},
                  {"target_kernels", s.target_kernels}};
  json dv = json::array();
  for (const auto& d : m.divergences) dv.push_back(DivergenceJson(m, d));
  j["divergences"] = dv;
  json rj = json::array();
  for (const auto& r : m.reasons) rj.push_back({{"code", r.code}, {"text", r.text}, {"remedy", r.remedy}});
  j["reasons"] = rj;
  if (s.overlap.computed)
    j["summary"]["overlap"] = {
        {"shadow_window_realtime_ns", {s.overlap.window_start, s.overlap.window_end}},
        {"primary_kernels_realtime_ns", {s.overlap.primary_first_kernel, s.overlap.primary_last_kernel}},
        {"primary_to_realtime_ns", s.overlap.primary_to_realtime},
        {"clock", s.overlap.clock}};

  std::vector<const DriftRow*> drift;
  for (const auto& d : m.drift) drift.push_back(&d);
  std::stable_sort(drift.begin(), drift.end(), [](const DriftRow* a, const DriftRow* b) {
    return (a->diverged + a->time_only + a->unmatched + a->shape_differs) >
           (b->diverged + b->time_only + b->unmatched + b->shape_differs);
  });
  json dj = json::array();
  for (size_t i = 0; i < drift.size() && (!bounds.max_drift_rows || i < bounds.max_drift_rows); ++i) {
    const DriftRow& d = *drift[i];
    dj.push_back({{"range", d.range},
                  {"exact", d.exact},
                  {"diverged", d.diverged},
                  {"time_only", d.time_only},
                  {"unmatched", d.unmatched},
                  {"shape_differs", d.shape_differs}});
  }
  j["drift"] = dj;
  j["drift_total"] = m.drift.size();
  json st = json::array();
  for (size_t i = 0; i < m.steps.size() && (!bounds.max_step_rows || i < bounds.max_step_rows); ++i) {
    const StepRow& r = m.steps[i];
    st.push_back({{"range", r.range},
                  {"kernels", r.kernels},
                  {"kernel_ns", r.kernel_ns},
                  {"targets", r.targets},
                  {"target_ns", r.target_ns}});
  }
  j["steps"] = st;
  j["steps_total"] = m.steps.size();

  // Launches: the slowest first, bounded, keeping every launch why_slow names.
  std::set<size_t> named;
  for (const auto& g : m.groups) {
    named.insert(g.reference);
    for (const auto& sl : g.slow) named.insert(sl.match);
  }
  json lj = json::array();
  size_t taken = 0;
  for (size_t id : SlowestFirst(m)) {
    const bool keep = !bounds.max_launches || taken < bounds.max_launches;
    if (!keep && !named.count(id)) continue;
    lj.push_back(LaunchJson(m, id));
    ++taken;
  }
  j["launches"] = lj;
  j["launches_total"] = m.matches.size();

  json wj = json::array();
  for (const auto& g : m.groups) {
    json slow = json::array();
    for (const auto& sl : g.slow) {
      slow.push_back({{"launch", sl.match},
                      {"dur_ns", sl.dur_ns},
                      {"ratio", sl.ratio},
                      {"verdicts", VerdictNames(sl.verdicts)},
                      {"text", sl.text}});
    }
    wj.push_back({{"kernel", g.kernel},
                  {"grid", Dims(g.grid)},
                  {"block", Dims(g.block)},
                  {"launches", g.launches},
                  {"median_dur_ns", g.median_dur_ns},
                  {"reference", g.reference},
                  {"mad_ns", g.mad_ns},
                  {"note", g.note},
                  {"slow", slow}});
  }
  j["why_slow"] = wj;

  std::unordered_map<uint64_t, size_t> match_of_seq;
  for (size_t i = 0; i < m.matches.size(); ++i) match_of_seq[m.shadow[m.matches[i].shadow].seq] = i;
  json bj = json::array();
  for (const auto& lb : blocks) {
    auto it = match_of_seq.find(lb.seq);
    if (it == match_of_seq.end()) continue;
    uint64_t t0 = 0;
    for (const auto& b : lb.blocks)
      if (b.enter_ns && (!t0 || b.enter_ns < t0)) t0 = b.enter_ns;
    json rows = json::array();
    for (const auto& b : lb.blocks) {
      rows.push_back(json::array({b.block_linear, b.sm, b.enter_ns ? b.enter_ns - t0 : 0,
                                  b.exit_ns >= t0 && b.exit_ns ? b.exit_ns - t0 : 0, b.order}));
    }
    bj.push_back({{"launch", it->second}, {"blocks", rows}});
  }
  j["block_detail"] = bj;
  if (m.requests.present) j["requests"] = RequestsToJson(m, bounds.requests);
  return j;
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
