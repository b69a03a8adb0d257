// The join document from the joined model (join_doc.h): what join.json holds, bounded, with times made
// relative and kinds named; and views::JoinJson, which writes it.
#include "views/join_doc.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "join/why_slow.h"
#include "twinscope/counters.h"

namespace twinscope::views {
namespace {

using join::Dur;
using join::JoinedModel;
using join::SlowestFirst;

DimsDoc Dims(Dim3 d) { return {d.x, d.y, d.z}; }

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

ReadDoc Read(const stats::TraceStats& s) { return {ReadEndName(s.report.end), s.report.ok(), s.report.message}; }

// The trace's loss accounting as `stats --json` writes it: its findings, and the rest by stats' names.
LossDoc Loss(const stats::TraceStats& s) {
  LossDoc d;
  const nlohmann::json l = stats::StatsToJson(s, 1)["loss"];
  for (auto it = l.begin(); it != l.end(); ++it)
    if (it.key() != "findings") d.values.emplace(it.key(), it.value());
  for (const stats::LossFinding& f : stats::LossFindings(s))
    d.findings.push_back({f.name, f.value, std::string(counters::SeverityName(f.severity)), f.text});
  return d;
}

std::string Name(const join::PrimaryLaunch& p) { return p.demangled.empty() ? p.kernel : p.demangled; }

LaunchDoc Launch(const JoinedModel& m, size_t id) {
  const join::Match& mt = m.matches[id];
  const join::PrimaryLaunch& p = m.primary[mt.primary];
  const join::ShadowLaunch& s = m.shadow[mt.shadow];
  const auto& b = s.blocks;
  LaunchDoc d;
  d.id = id;
  d.kernel = Name(p);
  d.match = join::MatchKindName(mt.kind);
  d.key = {s.path, s.ordinal, Hex(s.hash)};
  d.shape_differs = mt.shape_differs;
  d.ambiguous = mt.ambiguous;
  if (mt.region >= 0) d.region = mt.region;
  LaunchPrimaryDoc& pd = d.primary;
  if (p.have_kernel) {
    pd.start_ns = p.start_ns - m.primary_t0_ns;
    pd.end_ns = p.end_ns - m.primary_t0_ns;
    pd.dur_ns = p.end_ns - p.start_ns;
  }
  pd.stream = p.stream;
  pd.device = p.device;
  pd.grid = Dims(p.grid);
  pd.block = Dims(p.block);
  pd.graph = p.graph;
  pd.overlapped = p.overlapped;
  pd.have_kernel = p.have_kernel;
  LaunchShadowDoc& sd = d.shadow;
  sd.seq = s.seq;
  sd.grid = Dims(s.grid);
  sd.blocks_expected = b.blocks_expected;
  sd.blocks_seen = b.blocks_seen;
  sd.blocks_working = s.blocks_working;
  sd.sms_used = b.sms_used;
  sd.blocks_per_sm = {b.blocks_per_sm_min, b.blocks_per_sm_median, b.blocks_per_sm_max};
  sd.inversions = b.inversions;
  if (!std::isnan(b.kendall_tau)) sd.kendall_tau = b.kendall_tau;
  sd.straggler = {b.straggler.block_linear, b.straggler.sm,
                  b.straggler.exit_ns ? b.straggler.exit_ns - b.first_enter_ns : 0};
  sd.tail_ns = b.tail_ns;
  sd.span_ns = b.span_ns;
  sd.block_p50_ns = b.block_duration_p50_ns;
  return d;
}

DivergenceDoc Divergence(const join::DivergenceRegion& r) {
  DivergenceDoc d;
  d.shadow_launches = r.shadow_launches;
  d.primary_launches = r.primary_launches;
  d.diverged = r.diverged;
  d.other_shape = r.other_shape;
  d.inserted = r.inserted;
  d.deleted = r.deleted;
  d.other_kernels = r.other_kernels;
  d.positions = r.positions;
  d.autotuning_primary = r.autotuning_primary, d.autotuning_shadow = r.autotuning_shadow;
  d.autotuning_pairs = r.autotuning_pairs;
  if (r.shadow_launches) d.shadow = DivergenceShadowDoc{r.first_seq, r.last_seq, r.shadow_from, r.shadow_to};
  if (r.primary_launches)
    d.primary = DivergencePrimaryDoc{r.first_primary, r.last_primary, r.primary_from, r.primary_to};
  return d;
}

// The per-request views (docs/join.md, "Requests"): rows first, then the steps of the kept rows before any
// other, within the bounds. GPU times from the primary's first kernel.
RequestsDoc Requests(const JoinedModel& m, const join::RequestJsonBounds& b) {
  const join::RequestTable& t = m.requests;
  const uint64_t t0 = m.primary_t0_ns;
  auto rel = [&](uint64_t ns) -> std::optional<uint64_t> {
    if (!ns) return std::nullopt;
    return ns >= t0 ? ns - t0 : 0;
  };
  auto opt = [](int64_t v) -> std::optional<int64_t> {
    if (v < 0) return std::nullopt;
    return v;
  };
  // An arrival on the primary's clock, relative like the GPU times; signed: a request may arrive before the
  // first kernel.
  auto arrival = [&](uint64_t ns) -> std::optional<int64_t> {
    if (!ns) return std::nullopt;
    return ns >= t0 ? static_cast<int64_t>(ns - t0) : -static_cast<int64_t>(std::min<uint64_t>(t0 - ns, INT64_MAX));
  };
  RequestsDoc d;
  d.source = {t.trace_path, t.schedule_path};
  d.read = {t.lines, t.bad_lines, t.first_bad, t.requests_left_out, t.schedule_steps, t.schedule_bad_lines};
  d.total = t.requests.size();
  d.steps_total = t.steps.size();
  d.steps_without_kernels = t.steps_without_kernels;
  d.primary_steps_without_request = t.primary_steps_without_request;
  d.warnings = t.warnings;
  const size_t rows = b.max_rows ? std::min(b.max_rows, t.requests.size()) : t.requests.size();
  std::vector<uint64_t> wanted;  // step indices of the kept rows, in order of first mention
  std::unordered_map<uint64_t, bool> seen;
  for (size_t i = 0; i < rows; ++i) {
    const join::ServedRequest& r = t.requests[i];
    RequestRowDoc row;
    row.id = r.id;
    row.status = r.status;
    row.finish_reason = r.finish_reason;
    if (!r.error.empty()) row.error = r.error;
    row.prompt_tokens = opt(r.prompt_tokens);
    row.completion_tokens = opt(r.completion_tokens);
    row.queued_us = opt(r.queued_us);
    row.first_token_us = opt(r.first_token_us);
    row.done_us = opt(r.done_us);
    row.arrival_unix_us = opt(r.arrival_unix_us);
    row.arrival_ns = arrival(r.arrival_ns);
    row.prefill_step = opt(r.prefill_step);
    row.steps = r.steps;
    row.prefill_steps = r.prefill_steps;
    row.decode_steps = r.decode_steps;
    row.steps_without_kernels = r.steps_without_kernels;
    row.kernels = r.kernels;
    row.kernel_ns = r.kernel_ns;
    row.kernel_share_ns = r.kernel_share_ns;
    row.targets = r.targets;
    row.target_ns = r.target_ns;
    row.target_launches = r.target_launches;
    row.shadow_exact = r.shadow_exact;
    row.shadow_time_only = r.shadow_time_only;
    row.gpu_start_ns = rel(r.first_start_ns);
    row.gpu_end_ns = rel(r.last_end_ns);
    d.rows.push_back(std::move(row));
    for (uint64_t s : r.steps)
      if (seen.emplace(s, true).second) wanted.push_back(s);
  }
  for (const auto& s : t.steps)  // then steps no kept request names (the primary's own)
    if (seen.emplace(s.index, true).second) wanted.push_back(s.index);
  if (b.max_steps && wanted.size() > b.max_steps) wanted.resize(b.max_steps);
  std::sort(wanted.begin(), wanted.end());
  size_t k = 0;
  for (uint64_t index : wanted) {
    while (k < t.steps.size() && t.steps[k].index < index) ++k;
    if (k == t.steps.size() || t.steps[k].index != index) continue;
    const join::ServedStep& s = t.steps[k];
    ServedStepDoc st;
    st.step = s.index;
    st.kind = s.kind;
    st.batch = opt(s.batch);
    st.padded = opt(s.padded);
    st.tokens = opt(s.tokens);
    st.range = s.range;
    st.kernels = s.kernels;
    st.kernel_ns = s.kernel_ns;
    st.targets = s.targets;
    st.target_ns = s.target_ns;
    st.start_ns = rel(s.first_start_ns);
    st.end_ns = rel(s.last_end_ns);
    st.shadow_exact = s.shadow_exact;
    st.shadow_time_only = s.shadow_time_only;
    for (size_t i = 0; i < s.target_launches.size(); ++i) {
      const join::PrimaryLaunch& pl = m.primary[s.target_launches[i]];
      StepLaunchDoc tl;
      if (pl.have_kernel) {
        tl.start_ns = rel(pl.start_ns);
        tl.dur_ns = Dur(pl);
      }
      tl.launch = s.target_matches[i];
      st.target_launches.push_back(tl);
    }
    d.steps.push_back(std::move(st));
  }
  return d;
}

}  // namespace

LaunchDoc MakeLaunchDoc(const JoinedModel& m, size_t id) { return Launch(m, id); }

JoinDoc MakeJoinDoc(const JoinedModel& m, const join::JsonBounds& bounds,
                    const std::vector<join::LaunchBlocks>& blocks) {
  const join::Summary& s = m.summary;
  JoinDoc d;
  const auto& ph = m.primary_side.stats.header;
  const auto& sh = m.shadow_side.stats.header;
  const auto& pc = m.primary_side.stats.counts;
  const auto& sc = m.shadow_side.stats.counts;

  PrimarySideDoc& p = d.primary.emplace();
  p.path = m.primary_path;
  p.pid = ph.value("pid", 0);
  const nlohmann::json cmd = ph.value("command_line", nlohmann::json::array());
  if (cmd.is_string()) {
    p.command_line.text = cmd.get<std::string>();
  } else if (cmd.is_array()) {
    for (const auto& a : cmd)
      if (a.is_string()) p.command_line.args.push_back(a.get<std::string>());
  }
  p.read = Read(m.primary_side.stats);
  p.kernels = pc.count("kernel") ? pc.at("kernel") : 0;
  p.launches = m.primary_side.launches;
  p.loss = Loss(m.primary_side.stats);

  ShadowSideDoc& sd = d.shadow.emplace();
  sd.path = m.shadow_path;
  sd.pid = sh.value("pid", 0);
  sd.read = Read(m.shadow_side.stats);
  sd.launches_traced = m.shadow.size();
  sd.blocks = sc.count("block") ? sc.at("block") : 0;
  const nlohmann::json patterns = sh.value("patterns", nlohmann::json::array());
  if (patterns.is_array())
    for (const auto& pt : patterns)
      if (pt.is_string()) sd.patterns.push_back(pt.get<std::string>());
  if (sh.contains("config") && sh["config"].is_object()) {
    for (const char* k : {"every", "max_launches", "per_second", "budget_pct", "patch_mode"})
      if (sh["config"].contains(k)) sd.sampling[k] = sh["config"][k];
  }
  const nlohmann::json& counters = m.shadow_side.stats.probe_counters;
  if (counters.is_object())
    for (auto it = counters.begin(); it != counters.end(); ++it)
      if (it.value().is_number_integer() && it.value().get<int64_t>() >= 0)  // CounterValue's or 0
        sd.probe_counters[it.key()] = it.value().get<uint64_t>();
  sd.loss = Loss(m.shadow_side.stats);

  d.options = OptionsDoc{m.options.concurrent};
  d.warnings = m.warnings;

  SummaryDoc& sm = d.summary.emplace();
  sm.shadow_launches = s.shadow_launches;
  sm.exact = s.exact;
  sm.diverged = s.diverged;
  sm.diverged_shape = s.diverged_shape;
  sm.time_only = s.time_only;
  sm.unmatched_shadow = s.unmatched_shadow;
  sm.primary_target_launches = s.primary_target_launches;
  sm.primary_target_unmatched = s.primary_target_unmatched;
  sm.primary_target_without_kernel = s.primary_target_without_kernel;
  sm.shadow_without_blocks = s.shadow_without_blocks;
  sm.time_only_evaluated = s.time_only_evaluated;
  sm.time_only_agree = s.time_only_agree;
  sm.overlapped_primary_kernels = s.overlapped_primary_kernels;
  sm.divergence_regions = m.divergences.size();
  sm.in_divergence = s.in_divergence;
  sm.primary_in_divergence = s.primary_in_divergence;
  sm.ambiguous = s.ambiguous;
  sm.ambiguous_regions = s.ambiguous_regions;
  sm.alignment = {};
  sm.alignment.identical = s.alignment.identical;
  sm.alignment.anchors = s.alignment.anchors;
  sm.alignment.segments = s.alignment.segments;
  sm.alignment.capped_segments = s.alignment.capped_segments;
  sm.alignment.capped_launches = s.alignment.capped_launches;
  sm.alignment.max_d = s.alignment.max_d;
  sm.alignment.shadow_sampled = s.alignment.sampled;
  sm.alignment.depth = s.alignment.depth;
  sm.alignment.instances_primary = s.alignment.instances_primary;
  sm.alignment.instances_shadow = s.alignment.instances_shadow;
  sm.alignment.instance_pairs = s.alignment.instance_pairs;
  sm.alignment.bounded_instances = s.alignment.bounded_instances;
  sm.autotuning = AutotuningDoc{s.autotuning_primary, s.autotuning_shadow, s.autotuning_pairs, s.autotuning_one_sided};
  sm.target_kernels = s.target_kernels;
  if (s.overlap.computed)
    sm.overlap = OverlapDoc{{s.overlap.window_start, s.overlap.window_end},
                            {s.overlap.primary_first_kernel, s.overlap.primary_last_kernel},
                            s.overlap.primary_to_realtime,
                            s.overlap.clock};

  auto& dv = d.divergences.emplace();
  for (const auto& r : m.divergences) dv.push_back(Divergence(r));
  auto& rs = d.reasons.emplace();
  for (const auto& r : m.reasons) rs.push_back({r.code, r.text, r.remedy});
  auto& in = d.instances.emplace();
  for (const auto& r : m.instances) {
    if (bounds.max_instance_rows && in.size() >= bounds.max_instance_rows) break;
    InstanceDoc& row = in.emplace_back();
    if (r.primary >= 0) row.primary = static_cast<uint64_t>(r.primary);
    if (r.shadow >= 0) row.shadow = static_cast<uint64_t>(r.shadow);
    row.primary_name = r.primary_name, row.shadow_name = r.shadow_name;
    row.primary_launches = r.primary_launches, row.shadow_launches = r.shadow_launches;
    row.cls = r.cls, row.bounded = r.bounded;
  }

  std::vector<const join::DriftRow*> drift;
  for (const auto& r : m.drift) drift.push_back(&r);
  std::stable_sort(drift.begin(), drift.end(), [](const join::DriftRow* a, const join::DriftRow* b) {
    return (a->diverged + a->time_only + a->unmatched + a->shape_differs) >
           (b->diverged + b->time_only + b->unmatched + b->shape_differs);
  });
  auto& dj = d.drift.emplace();
  for (size_t i = 0; i < drift.size() && (!bounds.max_drift_rows || i < bounds.max_drift_rows); ++i) {
    const join::DriftRow& r = *drift[i];
    dj.push_back({r.range, r.exact, r.diverged, r.time_only, r.unmatched, r.shape_differs});
  }
  d.drift_total = m.drift.size();
  auto& st = d.steps.emplace();
  for (size_t i = 0; i < m.steps.size() && (!bounds.max_step_rows || i < bounds.max_step_rows); ++i) {
    const join::StepRow& r = m.steps[i];
    st.push_back({r.range, r.kernels, r.kernel_ns, r.targets, r.target_ns});
  }
  d.steps_total = m.steps.size();

  // Launches: the slowest first, bounded, keeping every launch why_slow names.
  std::set<size_t> named;
  for (const auto& g : m.groups) {
    named.insert(g.reference);
    for (const auto& sl : g.slow) named.insert(sl.match);
  }
  auto& lj = d.launches.emplace();
  size_t taken = 0;
  for (size_t id : SlowestFirst(m)) {
    const bool keep = !bounds.max_launches || taken < bounds.max_launches;
    if (!keep && !named.count(id)) continue;
    lj.push_back(Launch(m, id));
    ++taken;
  }
  d.launches_total = m.matches.size();

  auto& wj = d.why_slow.emplace();
  for (const auto& g : m.groups) {
    WhySlowDoc w;
    w.kernel = g.kernel;
    w.grid = Dims(g.grid);
    w.block = Dims(g.block);
    w.launches = g.launches;
    w.median_dur_ns = g.median_dur_ns;
    w.reference = g.reference;
    w.mad_ns = g.mad_ns;
    w.note = g.note;
    for (const auto& sl : g.slow)
      w.slow.push_back({sl.match, sl.dur_ns, sl.ratio, join::VerdictNames(sl.verdicts), sl.text});
    wj.push_back(std::move(w));
  }

  std::unordered_map<uint64_t, size_t> match_of_seq;
  for (size_t i = 0; i < m.matches.size(); ++i) match_of_seq[m.shadow[m.matches[i].shadow].seq] = i;
  auto& bj = d.block_detail.emplace();
  for (const auto& lb : blocks) {
    auto it = match_of_seq.find(lb.seq);
    if (it == match_of_seq.end()) continue;
    uint64_t t0 = 0;
    for (const auto& b : lb.blocks)
      if (b.enter_ns && (!t0 || b.enter_ns < t0)) t0 = b.enter_ns;
    BlockDetailDoc bd;
    bd.launch = it->second;
    bd.blocks.reserve(lb.blocks.size());
    for (const auto& b : lb.blocks)
      bd.blocks.push_back({b.block_linear, b.sm, static_cast<int64_t>(b.enter_ns ? b.enter_ns - t0 : 0),
                           static_cast<int64_t>(b.exit_ns >= t0 && b.exit_ns ? b.exit_ns - t0 : 0), b.order});
    bj.push_back(std::move(bd));
  }
  if (m.requests.present) d.requests = Requests(m, bounds.requests);
  return d;
}

}  // namespace twinscope::views

namespace twinscope::views {

nlohmann::json JoinJson(const join::JoinedModel& m, const join::JsonBounds& bounds,
                        const std::vector<join::LaunchBlocks>& blocks) {
  return ToJson(MakeJoinDoc(m, bounds, blocks));
}

}  // namespace twinscope::views
