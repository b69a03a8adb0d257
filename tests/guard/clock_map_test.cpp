// The guard's clock map (src/guard/clock_map.h) on synthetic clocks: exact
// for clocks that differ by an offset and a rate, within the documented bound
// for drifting clocks, robust to late, stale and stepped samples.
#include "guard/clock_map.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace twinscope::guard {
namespace {

constexpr uint64_t kMs = 1'000'000;

ClockPair At(uint64_t cupti, uint64_t program) { return ClockPair{cupti, program, 0}; }

int64_t Diff(uint64_t a, uint64_t b) { return static_cast<int64_t>(a - b); }

TEST(ClockMapTest, OffsetClockIsMappedExactly) {
  const uint64_t offset = 1'000'000'000'000'000ull;
  ClockMap m;
  EXPECT_FALSE(m.Ready());
  for (uint64_t c = 5'000 * kMs; c <= 5'100 * kMs; c += 10 * kMs) m.Add(At(c, c + offset));
  ASSERT_TRUE(m.Ready());
  for (uint64_t c : {4'000 * kMs, 5'000 * kMs, 5'000 * kMs + 1, 5'055 * kMs + 123, 5'100 * kMs, 7'000 * kMs})
    EXPECT_EQ(m.Map(c), c + offset) << c;
}

// Kineto's clock: TSC ticks (here 3 per ns), not nanoseconds.
TEST(ClockMapTest, ClockOfAnotherRateIsMappedToTheTick) {
  auto tsc = [](uint64_t c) { return 3 * c + 12345; };
  ClockMap m;
  for (uint64_t c = 1'000 * kMs; c <= 1'500 * kMs; c += 50 * kMs) m.Add(At(c, tsc(c)));
  for (uint64_t c = 900 * kMs; c <= 1'600 * kMs; c += 7'777'777) EXPECT_LE(std::llabs(Diff(m.Map(c), tsc(c))), 1) << c;
}

TEST(ClockMapTest, SamplePairTakesTheNarrowestBracket) {
  // CUPTI's clock reads: gaps of 900, 100 (the narrowest), 500 ns around the program's reads.
  const std::vector<uint64_t> reads = {1000, 1900, 5000, 5100, 9000, 9500};
  size_t i = 0;
  uint64_t program_reads = 0;
  ClockPair p;
  ASSERT_TRUE(SamplePair(
      [&](uint64_t* t) {
        *t = reads[i++];
        return true;
      },
      [&] { return 777 + program_reads++; }, &p, 3));
  EXPECT_EQ(p.cupti, 5050u);
  EXPECT_EQ(p.program, 778u);
  EXPECT_EQ(p.uncertainty_ns, 50u);
  // A failing CUPTI clock gives no pair.
  EXPECT_FALSE(SamplePair([](uint64_t*) { return false; }, [] { return uint64_t{1}; }, &p));
}

// Clocks whose relative rate wanders by up to 500 ppm (NTP's slew limit), at
// random, sampled at random intervals: the error between pairs stays inside
// the bound clock_map.h states (5e-4 times the segment's length).
TEST(ClockMapTest, DriftingClocksStayWithinTheStatedBound) {
  std::mt19937_64 rng(20261201);
  for (int round = 0; round < 20; ++round) {
    // The true program clock: piecewise linear in CUPTI time, rate 1 +- 500 ppm, changing every 1-50 ms.
    std::vector<std::pair<uint64_t, double>> knots;  // (cupti, program)
    uint64_t c = 1'700'000'000'000'000'000ull;       // CLOCK_REALTIME-sized values
    double p = 4e14;
    const uint64_t end = c + 3'000 * kMs;
    std::uniform_real_distribution<double> rate(1 - 5e-4, 1 + 5e-4);
    std::uniform_int_distribution<uint64_t> step(1 * kMs, 50 * kMs), gap(1 * kMs, 500 * kMs);
    const uint64_t begin = c;
    knots.emplace_back(c, p);
    while (c < end) {
      const uint64_t d = step(rng);
      p += rate(rng) * static_cast<double>(d);
      c += d;
      knots.emplace_back(c, p);
    }
    auto truth = [&](uint64_t t) {
      size_t k = 1;
      while (knots[k].first < t) ++k;
      const auto& [c0, p0] = knots[k - 1];
      const auto& [c1, p1] = knots[k];
      return p0 + (p1 - p0) * static_cast<double>(t - c0) / static_cast<double>(c1 - c0);
    };
    ClockMap m;
    std::vector<uint64_t> sampled;
    for (uint64_t t = begin; t < end - 500 * kMs; t += gap(rng)) {
      m.Add(At(t, static_cast<uint64_t>(std::llround(truth(t)))));
      sampled.push_back(t);
    }
    for (size_t i = 0; i + 1 < sampled.size(); ++i) {
      const double bound = 5e-4 * static_cast<double>(sampled[i + 1] - sampled[i]) + 2;  // +2: rounding
      for (int q = 1; q < 8; ++q) {
        const uint64_t t = sampled[i] + (sampled[i + 1] - sampled[i]) * q / 8;
        EXPECT_LE(std::fabs(static_cast<double>(m.Map(t)) - truth(t)), bound) << "round " << round << " at " << t;
      }
    }
  }
}

TEST(ClockMapTest, LateStaleAndSteppedSamples) {
  ClockMap m;
  EXPECT_EQ(m.Add(At(1'000 * kMs, 5'000 * kMs)), ClockMap::Added::kKept);
  EXPECT_EQ(m.Add(At(1'010 * kMs, 5'010 * kMs)), ClockMap::Added::kKept);
  // Taken before the newest on another thread, added after it: ignored.
  EXPECT_EQ(m.Add(At(1'005 * kMs, 5'005 * kMs)), ClockMap::Added::kIgnored);
  EXPECT_EQ(m.count(), 2u);
  // Closer than kMinSpacingNs: the newest point, not kept for good.
  EXPECT_EQ(m.Add(At(1'010 * kMs + 300'000, 5'010 * kMs + 300'000)), ClockMap::Added::kLatest);
  EXPECT_EQ(m.count(), 3u);
  EXPECT_EQ(m.Add(At(1'010 * kMs + 600'000, 5'010 * kMs + 600'000)), ClockMap::Added::kLatest);
  EXPECT_EQ(m.count(), 3u);
  EXPECT_EQ(m.Map(1'010 * kMs + 500'000), 5'010 * kMs + 500'000);
  EXPECT_EQ(m.Add(At(1'011 * kMs + 1, 5'011 * kMs + 1)), ClockMap::Added::kKept);
  EXPECT_EQ(m.count(), 3u);
  // CUPTI's CLOCK_REALTIME steps back while the program's TSC goes on: afresh.
  EXPECT_EQ(m.Add(At(900 * kMs, 5'020 * kMs)), ClockMap::Added::kReset);
  EXPECT_EQ(m.count(), 1u);
  EXPECT_FALSE(m.Ready());
  EXPECT_EQ(m.Add(At(910 * kMs, 5'030 * kMs)), ClockMap::Added::kKept);
  EXPECT_EQ(m.Map(905 * kMs), 5'025 * kMs);
}

// A noisy close pair must not set the rate far from it: extrapolation takes
// the rate over a long baseline.
TEST(ClockMapTest, ExtrapolationUsesALongBaseline) {
  ClockMap m;
  m.Add(At(1'000 * kMs, 1'000 * kMs));
  m.Add(At(1'300 * kMs, 1'300 * kMs));
  m.Add(At(1'300 * kMs + 10'000, 1'300 * kMs + 10'050));  // 50 ns off over 10 us: 0.5% off as a rate
  // Anchored at the newest point (50 ns off) with the rate over the 300 ms
  // back to the first: 50 ns * (1 + 1 s / 300 ms) ~ 217 ns off after 1 s; a
  // rate from the last, 10 us segment would be 5 ms off.
  const uint64_t later = 1'300 * kMs + 1'000 * kMs;
  EXPECT_LE(std::llabs(Diff(m.Map(later), later)), 250);
  EXPECT_LE(std::llabs(Diff(m.Map(900 * kMs), 900 * kMs)), 250);
}

TEST(ClockMapTest, ThinningKeepsTheSpanAndBoundsTheSize) {
  ClockMap m;
  auto prog = [](uint64_t c) { return 2 * c + 99; };
  const uint64_t first = 10'000 * kMs;
  uint64_t c = first;
  for (int i = 0; i < 5000; ++i, c += kMs) m.Add(At(c, prog(c)));
  EXPECT_LE(m.count(), ClockMap::kMaxPairs);
  EXPECT_GT(m.count(), ClockMap::kMaxPairs / 2);
  for (uint64_t t : {first, first + 777 * kMs + 3, c - kMs}) EXPECT_LE(std::llabs(Diff(m.Map(t), prog(t))), 1) << t;
}

}  // namespace
}  // namespace twinscope::guard
