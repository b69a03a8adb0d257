// Time-only pairing of shadow launches the alignment left unpaired, and the time-only accuracy check (docs/join.md).
#include "join/time_only.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <unordered_map>

namespace twinscope::join {
namespace {

bool SameDims(Dim3 a, Dim3 b) { return a.x == b.x && a.y == b.y && a.z == b.z; }

// Index in `v` (primary indices by time) of the launch nearest to `t`,
// skipping those `skip` says are taken; npos if none.
template <typename Skip>
size_t Nearest(const std::vector<PrimaryLaunch>& primary, const std::vector<size_t>& v, int64_t t, Skip skip) {
  auto it = std::lower_bound(v.begin(), v.end(), t,
                             [&](size_t i, int64_t x) { return static_cast<int64_t>(primary[i].cpu_ns) < x; });
  size_t hi = static_cast<size_t>(it - v.begin());
  size_t lo = hi;  // candidates: v[lo-1] downwards, v[hi] upwards
  size_t best = std::string::npos;
  uint64_t best_d = std::numeric_limits<uint64_t>::max();
  while (lo > 0 && skip(v[lo - 1])) --lo;
  while (hi < v.size() && skip(v[hi])) ++hi;
  if (lo > 0) {
    best = v[lo - 1];
    best_d = static_cast<uint64_t>(std::llabs(static_cast<int64_t>(primary[best].cpu_ns) - t));
  }
  if (hi < v.size()) {
    uint64_t d = static_cast<uint64_t>(std::llabs(static_cast<int64_t>(primary[v[hi]].cpu_ns) - t));
    if (d < best_d) best = v[hi];
  }
  return best;
}

}  // namespace

TimeOnlyPass::TimeOnlyPass(const JoinedModel& m) {
  for (size_t i = 0; i < m.primary.size(); ++i)
    by_kernel_[m.primary[i].kernel].push_back(i);  // m.primary is in launch order already
  std::map<std::string, uint64_t> first_shadow;
  for (const auto& sh : m.shadow) first_shadow.emplace(sh.kernel, sh.cpu_ns);  // m.shadow is by seq
  for (auto& [name, idx] : by_kernel_) {
    auto f = first_shadow.find(name);
    if (f != first_shadow.end() && !idx.empty())
      first_offset_[name] = static_cast<int64_t>(f->second) - static_cast<int64_t>(m.primary[idx[0]].cpu_ns);
  }
}

void TimeOnlyPass::MatchPending(JoinedModel& m, std::vector<bool>& used, const std::vector<bool>& paired,
                                const std::vector<int64_t>& paired_offset,
                                const std::vector<int32_t>& region_of_shadow) const {
  // Offset of the nearest paired launch of the same kernel before (else after) each launch.
  std::vector<int64_t> near_offset(m.shadow.size(), 0);
  std::vector<bool> have_near(m.shadow.size(), false);
  {
    std::unordered_map<std::string, int64_t> last;
    for (size_t s = 0; s < m.shadow.size(); ++s) {
      const std::string& k = m.shadow[s].kernel;
      if (paired[s]) last[k] = paired_offset[s];
      auto it = last.find(k);
      if (it != last.end()) near_offset[s] = it->second, have_near[s] = true;
    }
    last.clear();
    for (size_t s = m.shadow.size(); s-- > 0;) {
      const std::string& k = m.shadow[s].kernel;
      if (paired[s]) last[k] = paired_offset[s];
      auto it = last.find(k);
      if (!have_near[s] && it != last.end()) near_offset[s] = it->second, have_near[s] = true;
    }
  }
  for (size_t s = 0; s < m.shadow.size(); ++s) {
    if (paired[s]) continue;
    const ShadowLaunch& sh = m.shadow[s];
    auto k = by_kernel_.find(sh.kernel);
    if (k == by_kernel_.end()) {
      m.shadow_unmatched.push_back(s);
      continue;
    }
    auto fo = first_offset_.find(sh.kernel);
    int64_t offset = have_near[s] ? near_offset[s] : (fo != first_offset_.end() ? fo->second : 0);
    size_t p =
        Nearest(m.primary, k->second, static_cast<int64_t>(sh.cpu_ns) - offset, [&](size_t i) { return used[i]; });
    if (p == std::string::npos) {
      m.shadow_unmatched.push_back(s);
      continue;
    }
    used[p] = true;
    Match mt;
    mt.kind = MatchKind::kTime;
    mt.shadow = s;
    mt.primary = p;
    mt.region = region_of_shadow[s];
    mt.shape_differs = !SameDims(sh.grid, m.primary[p].grid) || !SameDims(sh.block, m.primary[p].block);
    ++m.summary.time_only;
    m.matches.push_back(mt);
  }
}

void TimeOnlyPass::Evaluate(JoinedModel& m) const {
  for (const Match& mt : m.matches) {
    if (mt.kind != MatchKind::kExact) continue;
    const ShadowLaunch& sh = m.shadow[mt.shadow];
    auto k = by_kernel_.find(sh.kernel);
    if (k == by_kernel_.end()) continue;
    auto fo = first_offset_.find(sh.kernel);
    const int64_t off = fo != first_offset_.end() ? fo->second : 0;
    size_t p = Nearest(m.primary, k->second, static_cast<int64_t>(sh.cpu_ns) - off, [](size_t) { return false; });
    ++m.summary.time_only_evaluated;
    if (p == mt.primary) ++m.summary.time_only_agree;
  }
}

}  // namespace twinscope::join
