// ClockMap (clock_map.h): paired samples of two clocks and the piecewise
// linear map between them.
#include "guard/clock_map.h"

#include <algorithm>
#include <limits>

namespace twinscope::guard {

ClockMap::Added ClockMap::Add(const ClockPair& pair) {
  if (count() > 0) {
    const ClockPair& newest = at(count() - 1);
    const bool cupti_back = pair.cupti < newest.cupti, program_back = pair.program < newest.program;
    if (cupti_back != program_back) {  // one clock stepped back, the other went on
      Reset();
      pairs_.push_back(pair);
      return Added::kReset;
    }
    // An older sample (taken before the newest, added after it), or one equal
    // on a clock: nothing to learn from it.
    if (cupti_back || pair.cupti == newest.cupti || pair.program == newest.program) return Added::kIgnored;
  }
  if (pairs_.empty() || pair.cupti - pairs_.back().cupti >= kMinSpacingNs) {
    if (pairs_.size() >= kMaxPairs) Thin();
    pairs_.push_back(pair);
    has_latest_ = false;
    return Added::kKept;
  }
  latest_ = pair;
  has_latest_ = true;
  return Added::kLatest;
}

uint64_t ClockMap::Line(const ClockPair& a, const ClockPair& b, uint64_t c) {
  using U = unsigned __int128;
  const U dp = b.program - a.program, dc = b.cupti - a.cupti;
  constexpr U kMax = std::numeric_limits<uint64_t>::max();
  if (c >= a.cupti) {
    const U p = a.program + (static_cast<U>(c - a.cupti) * dp) / dc;
    return static_cast<uint64_t>(std::min(p, kMax));
  }
  const U back = (static_cast<U>(a.cupti - c) * dp) / dc;
  return back >= a.program ? 0 : static_cast<uint64_t>(a.program - back);
}

uint64_t ClockMap::Map(uint64_t cupti) const {
  const size_t n = count();
  if (cupti < at(0).cupti) {
    // Before the first point: the rate over a long baseline from it.
    size_t j = 1;
    while (j + 1 < n && at(j).cupti - at(0).cupti < kRateBaselineNs) ++j;
    return Line(at(0), at(j), cupti);
  }
  if (cupti >= at(n - 1).cupti) {
    // After the newest point: the most recent rate over a long baseline.
    size_t i = n - 2;
    while (i > 0 && at(n - 1).cupti - at(i).cupti < kRateBaselineNs) --i;
    return Line(at(i), at(n - 1), cupti);
  }
  // Between two points: the first point after `cupti`, and the one before it.
  size_t lo = 0, hi = n - 1;  // at(lo) <= cupti < at(hi)
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    (at(mid).cupti <= cupti ? lo : hi) = mid;
  }
  return Line(at(lo), at(hi), cupti);
}

uint64_t ClockMap::max_uncertainty_ns() const {
  uint64_t m = 0;
  for (size_t i = 0; i < count(); ++i) m = std::max(m, at(i).uncertainty_ns);
  return m;
}

void ClockMap::Thin() {
  const size_t half = pairs_.size() / 2;
  std::vector<ClockPair> kept;
  kept.reserve(kMaxPairs);
  for (size_t i = 0; i < pairs_.size(); ++i)
    if (i >= half || i % 2 == 0) kept.push_back(pairs_[i]);
  pairs_.swap(kept);
}

}  // namespace twinscope::guard
