// The time-only pass (src/join/time_only.h): nearest free launch in time, and its cost with many launches taken.
#include "join/time_only.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>

namespace twinscope::join {
namespace {

JoinedModel Model(const std::vector<uint64_t>& primary_ns, const std::vector<uint64_t>& shadow_ns) {
  JoinedModel m;
  for (uint64_t t : primary_ns) {
    PrimaryLaunch p;
    p.kernel = "k";
    p.cpu_ns = t;
    m.primary.push_back(std::move(p));
  }
  for (size_t s = 0; s < shadow_ns.size(); ++s) {
    ShadowLaunch sh;
    sh.seq = s;
    sh.kernel = "k";
    sh.cpu_ns = shadow_ns[s];
    m.shadow.push_back(std::move(sh));
  }
  return m;
}

// The rule the pass keeps, written the plain way: the free primary launch nearest to t, the earlier on a tie.
size_t BruteNearest(const JoinedModel& m, const std::vector<bool>& used, int64_t t) {
  size_t best = std::string::npos;
  uint64_t best_d = ~0ull;
  for (size_t i = 0; i < m.primary.size(); ++i) {
    if (used[i]) continue;
    const uint64_t d = static_cast<uint64_t>(std::llabs(static_cast<int64_t>(m.primary[i].cpu_ns) - t));
    if (d < best_d || (d == best_d && m.primary[i].cpu_ns < m.primary[best].cpu_ns)) best = i, best_d = d;
  }
  return best;
}

TEST(TimeOnly, NearestFreeLaunchAsTheRuleSays) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const size_t np = 1 + rng() % 40, ns = 1 + rng() % 40;
    std::vector<uint64_t> pt(np), st(ns);
    uint64_t t = 1000;
    for (auto& x : pt) x = t += 1 + rng() % 50;  // ascending: m.primary is in launch order
    t = 1000 + rng() % 100;
    for (auto& x : st) x = t += rng() % 60;
    JoinedModel m = Model(pt, st);
    std::vector<bool> used(np, false), paired(ns, false);
    for (size_t i = 0; i < np; ++i) used[i] = rng() % 3 == 0;
    const std::vector<int64_t> offset(ns, 0);
    const std::vector<int32_t> region(ns, -1);
    // The first launches of both sides set the offset: the shadow's time minus that offset is searched.
    const int64_t off = static_cast<int64_t>(st[0]) - static_cast<int64_t>(pt[0]);
    std::vector<bool> expect_used = used;
    std::vector<size_t> expect(ns);
    for (size_t s = 0; s < ns; ++s) {
      expect[s] = BruteNearest(m, expect_used, static_cast<int64_t>(st[s]) - off);
      if (expect[s] != std::string::npos) expect_used[expect[s]] = true;
    }
    TimeOnlyPass(m).MatchPending(m, used, paired, offset, region);
    size_t k = 0;
    for (size_t s = 0; s < ns; ++s) {
      if (expect[s] == std::string::npos) continue;
      ASSERT_LT(k, m.matches.size());
      EXPECT_EQ(m.matches[k].shadow, s) << "round " << round;
      EXPECT_EQ(m.matches[k].primary, expect[s]) << "round " << round << " shadow " << s;
      EXPECT_EQ(m.matches[k].kind, MatchKind::kTime);
      ++k;
    }
    EXPECT_EQ(k, m.matches.size());
    EXPECT_EQ(m.shadow_unmatched.size(), ns - k);
    EXPECT_EQ(used, expect_used);
  }
}

// Issue 31's scale case at 1/100 of the launches and the old cost: 40,000 pending launches whose nearest
// launches in time are 400,000 taken ones. Walking the taken launches for each pending one (the pass before
// the free-position pointers) is ~10^10 steps, minutes; the pass now takes milliseconds.
TEST(TimeOnly, ManyPendingAfterManyTakenIsFast) {
  constexpr size_t kTaken = 400'000, kPending = 40'000;
  std::vector<uint64_t> pt(kTaken + kPending), st(kPending);
  for (size_t i = 0; i < pt.size(); ++i) pt[i] = 1'000 + i * 10;
  for (size_t s = 0; s < st.size(); ++s) st[s] = 1'000 + s * 10;
  JoinedModel m = Model(pt, st);
  std::vector<bool> used(pt.size(), false), paired(kPending, false);
  for (size_t i = 0; i < kTaken; ++i) used[i] = true;
  const auto t0 = std::chrono::steady_clock::now();
  TimeOnlyPass(m).MatchPending(m, used, paired, std::vector<int64_t>(kPending, 0), std::vector<int32_t>(kPending, -1));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(m.matches.size(), kPending);
  for (size_t s = 0; s < kPending; ++s) ASSERT_EQ(m.matches[s].primary, kTaken + s) << s;
  EXPECT_EQ(m.summary.time_only, kPending);
  EXPECT_LT(secs, 3.0) << "the time-only pass walks the taken launches again";
}

}  // namespace
}  // namespace twinscope::join
