// Shape groups, reference launches and verdicts of the why-slow view.
#include "join/why_slow.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

namespace twinscope::join {
namespace {

// Blocks of `s` that ran at least `threshold`: exact up to 64 blocks; from the sample's ranks above (within
// 1/64 of the blocks).
uint64_t Working(const ShadowLaunch& s, uint64_t threshold) {
  const auto& d = s.block_durations;
  const size_t j = static_cast<size_t>(std::lower_bound(d.begin(), d.end(), threshold) - d.begin());
  const uint64_t n = std::max<uint64_t>(s.block_durations_of, d.size());
  if (n == d.size()) return d.size() - j;
  return j == d.size() ? 0 : n - j * n / d.size();
}

double TailShare(const stats::LaunchBlockStats& b) {
  return b.span_ns ? static_cast<double>(b.tail_ns) / static_cast<double>(b.span_ns) : 0;
}

std::string Pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", v * 100);
  return buf;
}

std::string Fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string HumanNs(uint64_t ns) {
  char buf[32];
  if (ns < 10'000)
    std::snprintf(buf, sizeof buf, "%llu ns", static_cast<unsigned long long>(ns));
  else if (ns < 10'000'000)
    std::snprintf(buf, sizeof buf, "%.1f us", static_cast<double>(ns) / 1e3);
  else if (ns < 10'000'000'000ull)
    std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(ns) / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.2f s", static_cast<double>(ns) / 1e9);
  return buf;
}

std::vector<std::string> VerdictNames(uint32_t v) {
  std::vector<std::string> out;
  if (v & kVerdictFewerBlocks) out.push_back("fewer_blocks");
  if (v & kVerdictFewerSms) out.push_back("fewer_sms");
  if (v & kVerdictReordered) out.push_back("reordered");
  if (v & kVerdictStraggler) out.push_back("straggler");
  if (out.empty()) out.push_back("none");
  return out;
}

std::string VerdictTally(const std::vector<std::vector<std::string>>& verdicts_per_launch) {
  std::map<std::string, size_t> counts;
  for (const auto& names : verdicts_per_launch) {
    std::string key;
    for (const auto& n : names) key += (key.empty() ? "" : "+") + n;
    ++counts[key.empty() ? "none" : key];
  }
  std::vector<std::pair<std::string, size_t>> order(counts.begin(), counts.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [key, n] : order) out += (out.empty() ? "" : ", ") + key + " " + std::to_string(n);
  return out;
}

void ComputeWhySlow(JoinedModel& m) {
  // (kernel, grid, block) -> match indices with a primary duration and blocks.
  using Shape = std::tuple<std::string, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>;
  std::map<Shape, std::vector<size_t>> groups;
  for (size_t i = 0; i < m.matches.size(); ++i) {
    const Match& mt = m.matches[i];
    const PrimaryLaunch& p = m.primary[mt.primary];
    const ShadowLaunch& s = m.shadow[mt.shadow];
    // A pair of another shape has another block structure: nothing to compare.
    if (!p.have_kernel || s.blocks.blocks_seen == 0 || mt.shape_differs) continue;
    groups[{p.kernel, p.grid.x, p.grid.y, p.grid.z, p.block.x, p.block.y, p.block.z}].push_back(i);
  }
  auto dur = [&](size_t match) {
    const PrimaryLaunch& p = m.primary[m.matches[match].primary];
    return p.end_ns - p.start_ns;
  };
  for (auto& [shape, list] : groups) {
    std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) { return dur(a) < dur(b); });
    ShapeGroup g;
    const PrimaryLaunch& first = m.primary[m.matches[list[0]].primary];
    g.kernel = first.demangled.empty() ? first.kernel : first.demangled;
    g.grid = first.grid;
    g.block = first.block;
    g.launches = list.size();
    g.reference = list[(list.size() - 1) / 2];
    g.median_dur_ns = dur(g.reference);
    {
      std::vector<uint64_t> dev;
      dev.reserve(list.size());
      for (size_t i : list)
        dev.push_back(dur(i) > g.median_dur_ns ? dur(i) - g.median_dur_ns : g.median_dur_ns - dur(i));
      std::sort(dev.begin(), dev.end());
      g.mad_ns = dev[(dev.size() - 1) / 2];
    }
    // Stands out: at least kMinSlowRatio x the median and beyond the group's spread.
    auto stands_out = [&](size_t i) {
      const double d = static_cast<double>(dur(i)), med = static_cast<double>(g.median_dur_ns);
      return d >= kMinSlowRatio * med && d > med + kSpreadMads * static_cast<double>(g.mad_ns);
    };
    const ShadowLaunch& ref = m.shadow[m.matches[g.reference].shadow];
    const uint64_t ref_p50 = stats::PercentileSorted(ref.block_durations, 50);
    const uint64_t threshold = static_cast<uint64_t>(std::ceil(static_cast<double>(ref_p50) * kWorkingBlockShare));
    for (size_t i : list) {
      ShadowLaunch& s = m.shadow[m.matches[i].shadow];
      s.blocks_working = Working(s, threshold);
    }
    if (list.size() >= m.options.min_group_launches) {
      uint64_t under_floor = 0;  // stand out, but unchanged blocks and less than kMinExcessNs over the median
      uint64_t under_floor_max = 0;
      for (size_t k = 0; k + 1 < list.size(); ++k) {
        const size_t i = list[list.size() - 1 - k];
        if (!stands_out(i)) break;
        const Match& mt = m.matches[i];
        const ShadowLaunch& s = m.shadow[mt.shadow];
        SlowLaunch sl;
        sl.match = i;
        sl.dur_ns = dur(i);
        sl.ratio = g.median_dur_ns ? static_cast<double>(sl.dur_ns) / static_cast<double>(g.median_dur_ns) : 0;
        std::vector<std::string> why;
        if (static_cast<double>(s.blocks_working) < kFewerShare * static_cast<double>(ref.blocks_working)) {
          sl.verdicts |= kVerdictFewerBlocks;
          why.push_back("fewer blocks did the work: " + std::to_string(s.blocks_working) + " of " +
                        std::to_string(s.blocks.blocks_expected) + " blocks worked vs " +
                        std::to_string(ref.blocks_working) + " in the median launch");
        }
        if (static_cast<double>(s.blocks.sms_used) < kFewerShare * static_cast<double>(ref.blocks.sms_used)) {
          sl.verdicts |= kVerdictFewerSms;
          why.push_back("its blocks ran on " + std::to_string(s.blocks.sms_used) + " SMs vs " +
                        std::to_string(ref.blocks.sms_used) + " (up to " + std::to_string(s.blocks.blocks_per_sm_max) +
                        " blocks per SM vs " + std::to_string(ref.blocks.blocks_per_sm_max) + ")");
        }
        if (s.blocks.blocks_seen >= kMinReorderBlocks && ref.blocks.blocks_seen >= kMinReorderBlocks &&
            !std::isnan(s.blocks.kendall_tau) && !std::isnan(ref.blocks.kendall_tau) &&
            std::fabs(s.blocks.kendall_tau - ref.blocks.kendall_tau) > kTauDifference) {
          sl.verdicts |= kVerdictReordered;
          why.push_back("blocks arrived in another order: Kendall tau " + Fixed(s.blocks.kendall_tau, 2) + " vs " +
                        Fixed(ref.blocks.kendall_tau, 2));
        }
        const double share = TailShare(s.blocks), ref_share = TailShare(ref.blocks);
        if (share > kStragglerTailShare && share > 2 * ref_share) {
          sl.verdicts |= kVerdictStraggler;
          why.push_back("one block held it up: block " + std::to_string(s.blocks.straggler.block_linear) + " on SM " +
                        std::to_string(s.blocks.straggler.sm) + " left " + Pct(share) +
                        " of the span after the median block (median launch: " + Pct(ref_share) + ")");
        }
        if (why.empty() && sl.dur_ns - g.median_dur_ns < kMinExcessNs) {
          ++under_floor;
          under_floor_max = std::max(under_floor_max, sl.dur_ns);
          continue;
        }
        if (why.empty()) {
          why.push_back("its block structure matches the median launch (" + std::to_string(s.blocks_working) +
                        " blocks worked, " + std::to_string(s.blocks.sms_used) + " SMs, tail " + Pct(share) +
                        " of the span): the time went elsewhere (contention, clocks, memory)");
        }
        sl.text =
            Fixed(sl.ratio, 2) + "x the median (" + HumanNs(sl.dur_ns) + " vs " + HumanNs(g.median_dur_ns) + "): ";
        for (size_t w = 0; w < why.size(); ++w) sl.text += (w ? "; " : "") + why[w];
        if (mt.kind == MatchKind::kTime) sl.text += " [matched by time only]";
        if (mt.kind == MatchKind::kDiverged) sl.text += " [diverged: the shadow ran it in another range]";
        if (m.primary[mt.primary].overlapped) sl.text += " [ran while the shadow had GPU work]";
        g.slow.push_back(std::move(sl));
      }
      if (g.slow.empty() && g.median_dur_ns && !under_floor) {
        g.note = "no launch of this shape stands out: the slowest is " +
                 Fixed(static_cast<double>(dur(list.back())) / static_cast<double>(g.median_dur_ns), 2) +
                 "x the median";
      }
      if (under_floor) {
        g.note = std::string(g.slow.empty() ? "no finding: " : "") + std::to_string(under_floor) + " launch" +
                 (under_floor == 1 ? "" : "es") + " at up to " +
                 Fixed(static_cast<double>(under_floor_max) / static_cast<double>(g.median_dur_ns), 2) +
                 "x the median (+" + HumanNs(under_floor_max - g.median_dur_ns) +
                 ") with unchanged blocks: under the " + HumanNs(kMinExcessNs) + " floor, not a finding";
      }
    }
    m.groups.push_back(std::move(g));
  }
  std::stable_sort(m.groups.begin(), m.groups.end(), [](const ShapeGroup& a, const ShapeGroup& b) {
    return a.kernel != b.kernel ? a.kernel < b.kernel : a.launches > b.launches;
  });
}

}  // namespace twinscope::join
