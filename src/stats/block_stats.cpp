#include "stats/block_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace twinscope::stats {

uint64_t PercentileSorted(const std::vector<uint64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  p = std::clamp(p, 0.0, 100.0);
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  size_t idx = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sorted[std::min(idx, sorted.size() - 1)];
}

namespace {

// Merge sort of v[lo, hi) counting pairs i < j with v[i] > v[j].
uint64_t SortCountInversions(std::vector<uint64_t>& v, std::vector<uint64_t>& tmp, size_t lo, size_t hi) {
  if (hi - lo < 2) return 0;
  const size_t mid = lo + (hi - lo) / 2;
  uint64_t inv = SortCountInversions(v, tmp, lo, mid) + SortCountInversions(v, tmp, mid, hi);
  size_t i = lo, j = mid, k = lo;
  while (i < mid && j < hi) {
    if (v[j] < v[i]) {
      inv += mid - i;
      tmp[k++] = v[j++];
    } else {
      tmp[k++] = v[i++];
    }
  }
  while (i < mid) tmp[k++] = v[i++];
  while (j < hi) tmp[k++] = v[j++];
  std::copy(tmp.begin() + lo, tmp.begin() + hi, v.begin() + lo);
  return inv;
}

uint64_t Pairs(uint64_t n) { return n < 2 ? 0 : n * (n - 1) / 2; }

}  // namespace

RankCorrelation CorrelateWithPosition(std::vector<uint64_t> seq) {
  RankCorrelation r;
  const uint64_t n = seq.size();
  r.pairs = Pairs(n);
  std::vector<uint64_t> tmp(seq.size());
  r.discordant = SortCountInversions(seq, tmp, 0, seq.size());
  // seq is sorted now: count pairs of equal values.
  for (size_t i = 0; i < seq.size();) {
    size_t j = i;
    while (j < seq.size() && seq[j] == seq[i]) ++j;
    r.tied += Pairs(j - i);
    i = j;
  }
  // Positions are all distinct, so tau-b = (C - D) / sqrt(n0 * (n0 - ties)).
  const double n0 = static_cast<double>(r.pairs);
  const double denom = std::sqrt(n0 * (n0 - static_cast<double>(r.tied)));
  if (denom == 0) {
    r.kendall_tau = std::numeric_limits<double>::quiet_NaN();
  } else {
    const double concordant = n0 - static_cast<double>(r.tied) - static_cast<double>(r.discordant);
    r.kendall_tau = (concordant - static_cast<double>(r.discordant)) / denom;
  }
  return r;
}

namespace {

BlockRef Ref(const BlockRecord& b) { return BlockRef{b.block_linear, b.sm, b.order, b.enter_ns, b.exit_ns}; }

bool ValidTimes(const BlockRecord& b) { return b.enter_ns != 0 && b.exit_ns != 0 && b.exit_ns >= b.enter_ns; }

}  // namespace

LaunchBlockStats ComputeLaunchBlockStats(uint64_t seq, Dim3 grid, const std::vector<BlockRecord>& blocks) {
  LaunchBlockStats s;
  s.seq = seq;
  s.blocks_expected = uint64_t{grid.x} * grid.y * grid.z;
  s.blocks_seen = blocks.size();
  if (blocks.empty()) {
    s.kendall_tau = std::numeric_limits<double>::quiet_NaN();
    return s;
  }

  // Arrival order; ties in order broken by block index so they never count
  // as inversions.
  std::vector<const BlockRecord*> by_order;
  by_order.reserve(blocks.size());
  for (const auto& b : blocks) by_order.push_back(&b);
  std::sort(by_order.begin(), by_order.end(), [](const BlockRecord* a, const BlockRecord* b) {
    return a->order != b->order ? a->order < b->order : a->block_linear < b->block_linear;
  });
  s.first = Ref(*by_order.front());
  s.last = Ref(*by_order.back());

  std::vector<uint64_t> linear_in_order;
  linear_in_order.reserve(blocks.size());
  for (const auto* b : by_order) linear_in_order.push_back(b->block_linear);
  const RankCorrelation rc = CorrelateWithPosition(linear_in_order);
  s.inversions = rc.discordant;
  s.kendall_tau = rc.kendall_tau;

  std::vector<uint64_t> sorted_linear = std::move(linear_in_order);
  std::sort(sorted_linear.begin(), sorted_linear.end());
  s.blocks_unique = std::unique(sorted_linear.begin(), sorted_linear.end()) - sorted_linear.begin();
  s.duplicates = s.blocks_seen - s.blocks_unique;
  if (s.blocks_expected > 0) {
    for (size_t i = 0; i < s.blocks_unique; ++i) {
      if (sorted_linear[i] >= s.blocks_expected) ++s.out_of_grid;
    }
  }

  std::unordered_map<uint32_t, uint64_t> per_sm;
  std::vector<uint64_t> exits, durations;
  exits.reserve(blocks.size());
  durations.reserve(blocks.size());
  bool have_valid = false;
  for (const auto& b : blocks) {
    ++per_sm[b.sm];
    if (!ValidTimes(b)) {
      ++s.invalid_times;
      continue;
    }
    exits.push_back(b.exit_ns);
    durations.push_back(b.exit_ns - b.enter_ns);
    if (!have_valid || b.exit_ns > s.straggler.exit_ns ||
        (b.exit_ns == s.straggler.exit_ns && b.block_linear < s.straggler.block_linear)) {
      s.straggler = Ref(b);
    }
    if (!have_valid || b.enter_ns < s.first_enter_ns) s.first_enter_ns = b.enter_ns;
    have_valid = true;
  }
  s.sms_used = static_cast<uint32_t>(per_sm.size());
  std::vector<uint64_t> counts;
  counts.reserve(per_sm.size());
  for (const auto& [sm, n] : per_sm) counts.push_back(n);
  std::sort(counts.begin(), counts.end());
  s.blocks_per_sm_min = counts.front();
  s.blocks_per_sm_max = counts.back();
  s.blocks_per_sm_median = PercentileSorted(counts, 50);

  if (have_valid) {
    std::sort(exits.begin(), exits.end());
    std::sort(durations.begin(), durations.end());
    s.last_exit_ns = exits.back();
    s.median_exit_ns = PercentileSorted(exits, 50);
    s.span_ns = s.last_exit_ns - s.first_enter_ns;
    s.tail_ns = s.last_exit_ns - s.median_exit_ns;
    s.block_duration_p50_ns = PercentileSorted(durations, 50);
    s.block_duration_max_ns = durations.back();
  }
  return s;
}

}  // namespace twinscope::stats
