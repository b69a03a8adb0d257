// Maps CUPTI's timestamps into the watched program's own clock, for the guard's
// timestamp translation (guard_timestamps.h). CUDA-free: the clocks are plain
// functions, so the map is unit-tested on synthetic clocks.
//
// Why: a program (torch.profiler's Kineto) may register its own clock as
// CUPTI's timestamp source (cuptiActivityRegisterTimestampCallback; Kineto's
// returns TSC ticks, not nanoseconds). Beside twinscope's subscriber CUPTI 13.5
// refuses that, so the program's records come in CUPTI's clock
// (CLOCK_REALTIME ns on Linux) and the guard rewrites them.
//
// How: paired samples (CUPTI time c, program time p), each taken as the
// narrowest of a few brackets "c before, p, c after" (pair = bracket middle,
// uncertainty = half its width). Between two pairs the map is linear
// (interpolation); outside the pairs it extrapolates with the rate over a
// long baseline. No rate is assumed: the program's clock may tick at any
// rate, with any offset.
//
// Error bound: for a timestamp between two pairs, the mapped value is off by
// at most the larger of the two pairs' uncertainties (typically well under a
// microsecond) plus the clocks' departure from a straight line over that
// segment, i.e. their relative drift times the segment's length. Both Linux
// clocks and the TSC run off one crystal; NTP slews CLOCK_REALTIME by at most
// 500 ppm (the kernel's limit), typically under 10 ppm, so a segment of length
// L adds at most 5e-4 * L (1 us per 2 ms at the limit, ~5 us per 500 ms at
// 10 ppm). The guard bounds L by re-sampling at every buffer CUPTI completes
// for the program and at every flush period of the collector
// (twinscope_guard_report, 500 ms by default). A clock that steps backwards
// (settimeofday) resets the map.
//
// Not thread-safe: one owner (the guard's timestamp state) locks around it.
// Samples may be added out of order (taken on several threads): an older one
// is ignored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace twinscope::guard {

struct ClockPair {
  uint64_t cupti = 0;           // CUPTI time, ns (the middle of the bracket)
  uint64_t program = 0;         // the program's clock, its own units
  uint64_t uncertainty_ns = 0;  // half the bracket's width, CUPTI ns
};

// The narrowest of `tries` brackets (cupti(), program(), cupti()). False if
// the CUPTI clock failed or went backwards in every try.
template <typename Cupti, typename Program>
bool SamplePair(Cupti&& cupti, Program&& program, ClockPair* out, int tries = 5) {
  bool have = false;
  for (int i = 0; i < tries; ++i) {
    uint64_t before = 0, after = 0;
    if (!cupti(&before)) return have;
    const uint64_t p = program();
    if (!cupti(&after)) return have;
    if (after < before) continue;
    const uint64_t half = (after - before) / 2;
    if (!have || half < out->uncertainty_ns) {
      *out = ClockPair{before + half, p, half};
      have = true;
    }
  }
  return have;
}

class ClockMap {
 public:
  static constexpr size_t kMaxPairs = 1024;
  // A new pair closer than this to the last one is not kept (interpolation
  // gains nothing from it; a rate from it would be noisy).
  static constexpr uint64_t kMinSpacingNs = 1'000'000;
  // Extrapolation takes its rate from pairs at least this far apart when it can.
  static constexpr uint64_t kRateBaselineNs = 100'000'000;

  enum class Added {
    kKept,     // a new point of the map
    kLatest,   // closer than kMinSpacingNs to the last kept pair: the map's newest end until the next sample
    kIgnored,  // older than the newest point on both clocks, or equal on one (nothing to learn)
    kReset,    // one clock stepped back while the other went on: the map starts afresh from this pair
  };
  Added Add(const ClockPair& pair);
  // Two points at the least: a rate is known.
  bool Ready() const { return count() >= 2; }
  // The program's time for CUPTI time `cupti` (Ready() must hold).
  uint64_t Map(uint64_t cupti) const;
  void Reset() {
    pairs_.clear();
    has_latest_ = false;
  }

  // Points of the map now (kept pairs and the latest sample).
  size_t count() const { return pairs_.size() + (has_latest_ ? 1 : 0); }
  // The largest uncertainty of those points.
  uint64_t max_uncertainty_ns() const;

 private:
  const ClockPair& at(size_t i) const { return i < pairs_.size() ? pairs_[i] : latest_; }
  // p(c) on the line through points a and b (a before b), c anywhere.
  static uint64_t Line(const ClockPair& a, const ClockPair& b, uint64_t c);
  // When full: every second pair of the older half goes (older segments get
  // longer, the span kept stays as long as it was).
  void Thin();

  std::vector<ClockPair> pairs_;  // strictly increasing on both clocks, kMinSpacingNs apart
  ClockPair latest_;              // after pairs_.back() on both clocks, when has_latest_
  bool has_latest_ = false;
};

}  // namespace twinscope::guard
