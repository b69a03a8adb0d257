// Time-only pairing of shadow launches the alignment left unpaired, and the time-only accuracy check (docs/join.md).
#include "join/time_only.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <unordered_map>

namespace twinscope::join {
namespace {

bool SameDims(Dim3 a, Dim3 b) { return a.x == b.x && a.y == b.y && a.z == b.z; }

// Position in `v` (primary indices by time) of the first launch at or after `t`.
size_t FirstAtOrAfter(const std::vector<PrimaryLaunch>& primary, const std::vector<size_t>& v, int64_t t) {
  auto it = std::lower_bound(v.begin(), v.end(), t,
                             [&](size_t i, int64_t x) { return static_cast<int64_t>(primary[i].cpu_ns) < x; });
  return static_cast<size_t>(it - v.begin());
}

// Of v[lo] (lo < hi; kNone if none) and v[hi] (hi < v.size()), the launch nearest to `t`; the earlier on a tie.
constexpr size_t kNone = std::string::npos;
size_t Closer(const std::vector<PrimaryLaunch>& primary, const std::vector<size_t>& v, size_t lo, size_t hi,
              int64_t t) {
  size_t best = kNone;
  uint64_t best_d = std::numeric_limits<uint64_t>::max();
  if (lo != kNone) {
    best = v[lo];
    best_d = static_cast<uint64_t>(std::llabs(static_cast<int64_t>(primary[best].cpu_ns) - t));
  }
  if (hi < v.size()) {
    uint64_t d = static_cast<uint64_t>(std::llabs(static_cast<int64_t>(primary[v[hi]].cpu_ns) - t));
    if (d < best_d) best = v[hi];
  }
  return best;
}

// The free positions of one kernel's time index, as two union-find "next free" pointers (path halving): a
// search skips every taken launch in near-constant time, so pairing P pending launches among E taken ones
// costs O((P + E) log E), not O(P * E) (docs/join.md, "Time only").
class FreePositions {
 public:
  FreePositions(const std::vector<size_t>& v, const std::vector<bool>& used)
      : right_(v.size() + 1), left_(v.size() + 1) {
    for (size_t j = 0; j <= v.size(); ++j) {
      const bool taken = j < v.size() && used[v[j]];
      right_[j] = taken ? j + 1 : j;  // right_[size] = size: none to the right
    }
    left_[0] = 0;  // left_ is shifted by one: position j is slot j + 1, slot 0 = none to the left
    for (size_t j = 0; j < v.size(); ++j) left_[j + 1] = used[v[j]] ? j : j + 1;
  }
  // First free position >= j (size() if none).
  size_t Right(size_t j) { return Find(right_, j); }
  // Last free position < j (kNone if none).
  size_t LeftOf(size_t j) {
    const size_t slot = Find(left_, j);
    return slot ? slot - 1 : kNone;
  }
  void Take(size_t j) { right_[j] = j + 1, left_[j + 1] = j; }

 private:
  static size_t Find(std::vector<size_t>& up, size_t i) {
    while (up[i] != i) {
      up[i] = up[up[i]];
      i = up[i];
    }
    return i;
  }
  std::vector<size_t> right_, left_;
};

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
  std::map<std::string, FreePositions> free;  // built for a kernel when its first pending launch comes
  for (size_t s = 0; s < m.shadow.size(); ++s) {
    if (paired[s]) continue;
    const ShadowLaunch& sh = m.shadow[s];
    auto k = by_kernel_.find(sh.kernel);
    if (k == by_kernel_.end()) {
      m.shadow_unmatched.push_back(s);
      continue;
    }
    const std::vector<size_t>& v = k->second;
    auto f = free.find(sh.kernel);
    if (f == free.end()) f = free.emplace(sh.kernel, FreePositions(v, used)).first;
    auto fo = first_offset_.find(sh.kernel);
    int64_t offset = have_near[s] ? near_offset[s] : (fo != first_offset_.end() ? fo->second : 0);
    const int64_t t = static_cast<int64_t>(sh.cpu_ns) - offset;
    const size_t at = FirstAtOrAfter(m.primary, v, t);
    const size_t lo = f->second.LeftOf(at), hi = f->second.Right(at);
    const size_t p = Closer(m.primary, v, lo, hi, t);
    if (p == kNone) {
      m.shadow_unmatched.push_back(s);
      continue;
    }
    f->second.Take(p == (lo != kNone ? v[lo] : kNone) ? lo : hi);
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
    const int64_t t = static_cast<int64_t>(sh.cpu_ns) - off;
    const size_t at = FirstAtOrAfter(m.primary, k->second, t);
    const size_t p = Closer(m.primary, k->second, at ? at - 1 : kNone, at, t);
    ++m.summary.time_only_evaluated;
    if (p == mt.primary) ++m.summary.time_only_agree;
  }
}

}  // namespace twinscope::join
