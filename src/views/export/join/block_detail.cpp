// Selection of the launches drawn with blocks, and the shadow-to-primary time map.
#include "views/export/join/block_detail.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "join/join_views.h"

namespace twinscope::exporters {

BlockPlan PlanBlocks(const join::JoinedModel& m, const BlockBounds& bounds) {
  BlockPlan plan;
  plan.counts.launches_matched = m.matches.size();
  std::unordered_map<uint64_t, size_t> match_of_seq;
  for (size_t i = 0; i < m.matches.size(); ++i) {
    match_of_seq[m.shadow[m.matches[i].shadow].seq] = i;
    if (m.primary[m.matches[i].primary].have_kernel) {
      plan.timed.push_back(i);
    } else {
      ++plan.counts.launches_untimed;
    }
  }
  std::stable_sort(plan.timed.begin(), plan.timed.end(), [&](size_t a, size_t b) {
    return m.primary[m.matches[a].primary].start_ns < m.primary[m.matches[b].primary].start_ns;
  });
  // Why-slow launches first, then the slowest (join_views' DetailSeqs order).
  uint64_t blocks = 0;
  for (uint64_t seq : join::DetailSeqs(m, m.matches.size())) {
    const size_t id = match_of_seq.at(seq);
    const join::Match& mt = m.matches[id];
    if (!m.primary[mt.primary].have_kernel) continue;
    const uint64_t n = m.shadow[mt.shadow].blocks.blocks_seen;
    if (plan.drawn.size() >= bounds.max_launches || blocks + n > bounds.max_blocks) continue;
    blocks += n;
    plan.drawn.emplace(seq, id);
    plan.drawn_seqs.push_back(seq);
  }
  plan.counts.launches_drawn = plan.drawn.size();
  plan.counts.launches_over_bounds = plan.timed.size() - plan.drawn.size();
  return plan;
}

BlockPlan PlanWithDetail(const join::JoinedRun& run, const BlockBounds& bounds, std::vector<std::string>* warnings) {
  BlockPlan plan = PlanBlocks(run.model, bounds);
  if (!run.detail_error.empty())
    warnings->push_back("the shadow's blocks could not be read (" + run.detail_error +
                        "): launches are drawn without them");
  std::unordered_set<uint64_t> have;
  for (const auto& l : run.detail) have.insert(l.seq);
  std::vector<uint64_t> kept;
  for (uint64_t seq : plan.drawn_seqs) {
    if (have.count(seq)) {
      kept.push_back(seq);
      continue;
    }
    plan.drawn.erase(seq);
    --plan.counts.launches_drawn;
    ++plan.counts.launches_over_bounds;
  }
  plan.drawn_seqs = std::move(kept);
  return plan;
}

uint64_t TimeMap::operator()(uint64_t t) const {
  if (t <= src0 || !src_span) return dst0;
  const uint64_t d = std::min(t - src0, src_span);
  return dst0 + static_cast<uint64_t>(static_cast<unsigned __int128>(d) * dst_span / src_span);
}

TimeMap MapOntoKernel(const join::ShadowLaunch& s, const join::PrimaryLaunch& p) {
  TimeMap t;
  t.src0 = s.blocks.first_enter_ns;
  t.src_span = s.blocks.span_ns;
  t.dst0 = p.start_ns;
  t.dst_span = p.end_ns - p.start_ns;
  return t;
}

std::vector<LaunchArg> LaunchArgs(const join::JoinedModel& m, size_t match, const TimeMap& map, bool blocks_drawn) {
  const join::Match& mt = m.matches[match];
  const join::ShadowLaunch& s = m.shadow[mt.shadow];
  const auto& b = s.blocks;
  return {{"join_launch", uint64_t{match}},
          {"match", std::string(join::MatchKindName(mt.kind))},
          {"shape_differs", mt.shape_differs},
          {"shadow_seq", s.seq},
          {"key_path", s.path},
          {"key_ordinal", uint64_t{s.ordinal}},
          {"blocks_seen", b.blocks_seen},
          {"blocks_expected", b.blocks_expected},
          {"sms_used", uint64_t{b.sms_used}},
          {"kendall_tau", std::isnan(b.kendall_tau) ? 0.0 : b.kendall_tau},
          {"straggler_block", uint64_t{b.straggler.block_linear}},
          {"straggler_sm", uint64_t{b.straggler.sm}},
          {"tail_share", b.span_ns ? static_cast<double>(b.tail_ns) / static_cast<double>(b.span_ns) : 0.0},
          {"shadow_span_ns", b.span_ns},
          {"time_scale", map.Scale()},
          {"blocks_drawn", blocks_drawn}};
}

std::string LaunchName(const join::JoinedModel& m, size_t match) {
  const join::PrimaryLaunch& p = m.primary[m.matches[match].primary];
  const std::string& name = p.demangled.empty() ? p.kernel : p.demangled;
  switch (m.matches[match].kind) {
    case join::MatchKind::kTime:
      return name + " [time-only match]";
    case join::MatchKind::kDiverged:
      return name + " [diverged: other work in the shadow]";
    case join::MatchKind::kExact:
      break;
  }
  return name;
}

std::string BlockGroupName(uint32_t device, const std::string& device_name, const BlockDetailCounts& c) {
  std::string name =
      "GPU " + std::to_string(device) + device_name + " thread blocks by SM (shadow, scaled onto primary kernels";
  if (c.launches_over_bounds)
    name += "; blocks of " + CountText(c.launches_drawn) + " of " +
            CountText(c.launches_drawn + c.launches_over_bounds) + " launches";
  return name + ")";
}

std::string CountText(uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

}  // namespace twinscope::exporters
