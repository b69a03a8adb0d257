// Exact matching by launch key, time-only fallback and time-only accuracy.
#include "join/match.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <unordered_map>

namespace twinscope::join {
namespace {

bool SameDims(Dim3 a, Dim3 b) { return a.x == b.x && a.y == b.y && a.z == b.z; }

std::string Identity(const std::string& path, const std::string& kernel, uint32_t ordinal) {
  std::string s = path;
  s += '\x1f';
  s += kernel;
  s += '\x1f';
  s += std::to_string(ordinal);
  return s;
}

std::string TopLevel(const std::string& path) { return path.substr(0, path.find('/')); }

// Primary launches of one kernel, by launch time, for nearest-in-time search.
struct TimeIndex {
  std::vector<size_t> by_time;  // indices into primary, ascending cpu_ns
};

// Index in `idx.by_time` order of the launch nearest to `t`, skipping those
// `skip` says are taken; npos if none.
template <typename Skip>
size_t Nearest(const std::vector<PrimaryLaunch>& primary, const TimeIndex& idx, int64_t t, Skip skip) {
  const auto& v = idx.by_time;
  auto it = std::lower_bound(v.begin(), v.end(), t, [&](size_t i, int64_t x) {
    return static_cast<int64_t>(primary[i].cpu_ns) < x;
  });
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

void MatchLaunches(JoinedModel& m) {
  Summary& sum = m.summary;
  sum.shadow_launches = m.shadow.size();
  for (const auto& sh : m.shadow) sum.shadow_without_blocks += sh.blocks.blocks_seen == 0 ? 1 : 0;
  sum.primary_target_launches = m.primary.size();

  // Candidate lists in launch order, each with a cursor past its taken entries.
  struct Candidates {
    std::vector<size_t> list;
    size_t cursor = 0;
    size_t size() const { return list.size(); }
  };
  std::unordered_map<uint64_t, Candidates> by_hash;
  std::unordered_map<std::string, Candidates> by_identity;
  std::map<std::string, TimeIndex> by_kernel;
  for (size_t i = 0; i < m.primary.size(); ++i) {
    const PrimaryLaunch& p = m.primary[i];
    by_hash[p.hash].list.push_back(i);
    by_identity[Identity(p.path, p.kernel, p.ordinal)].list.push_back(i);
    by_kernel[p.kernel].by_time.push_back(i);  // m.primary is in launch order already
    if (!p.have_kernel) ++sum.primary_target_without_kernel;
  }
  std::vector<bool> used(m.primary.size(), false);
  auto first_unused = [&](Candidates& c) -> size_t {
    while (c.cursor < c.list.size() && used[c.list[c.cursor]]) ++c.cursor;
    return c.cursor < c.list.size() ? c.list[c.cursor] : std::string::npos;
  };

  // 1. Exact, by key.
  std::vector<int64_t> exact_offset(m.shadow.size(), 0);
  std::vector<bool> exact(m.shadow.size(), false);
  std::vector<size_t> pending;
  for (size_t s = 0; s < m.shadow.size(); ++s) {
    const ShadowLaunch& sh = m.shadow[s];
    Match mt;
    mt.shadow = s;
    size_t p = std::string::npos;
    auto h = by_hash.find(sh.hash);
    if (h != by_hash.end()) {
      p = first_unused(h->second);
      if (p != std::string::npos) mt.ambiguous = h->second.size() > 1;
    }
    if (p == std::string::npos) {
      auto id = by_identity.find(Identity(sh.path, sh.kernel, sh.ordinal));
      if (id != by_identity.end()) {
        p = first_unused(id->second);
        if (p != std::string::npos) mt.ambiguous = id->second.size() > 1;
      }
    }
    if (p == std::string::npos) {
      pending.push_back(s);
      continue;
    }
    mt.primary = p;
    mt.shape_differs = !SameDims(sh.grid, m.primary[p].grid) || !SameDims(sh.block, m.primary[p].block);
    used[p] = true;
    exact[s] = true;
    exact_offset[s] = static_cast<int64_t>(sh.cpu_ns) - static_cast<int64_t>(m.primary[p].cpu_ns);
    ++sum.exact;
    if (mt.shape_differs) ++sum.exact_shape_differs;
    if (mt.ambiguous) ++sum.exact_ambiguous;
    m.matches.push_back(mt);
  }

  // First-launch alignment per kernel (what a time-only join has to go on).
  std::map<std::string, int64_t> first_offset;
  {
    std::map<std::string, uint64_t> first_shadow;
    for (const auto& sh : m.shadow) first_shadow.emplace(sh.kernel, sh.cpu_ns);  // m.shadow is by seq
    for (auto& [name, idx] : by_kernel) {
      auto f = first_shadow.find(name);
      if (f != first_shadow.end() && !idx.by_time.empty())
        first_offset[name] = static_cast<int64_t>(f->second) - static_cast<int64_t>(m.primary[idx.by_time[0]].cpu_ns);
    }
  }

  // 2. Time only, for shadow launches without a key match: align on the
  // nearest exact match of the same kernel (by seq), else on first launches.
  // Offset of the nearest exact match of the same kernel before (else after) each launch.
  std::vector<int64_t> near_offset(m.shadow.size(), 0);
  std::vector<bool> have_near(m.shadow.size(), false);
  {
    std::unordered_map<std::string, int64_t> last;
    for (size_t s = 0; s < m.shadow.size(); ++s) {
      const std::string& k = m.shadow[s].kernel;
      if (exact[s]) last[k] = exact_offset[s];
      auto it = last.find(k);
      if (it != last.end()) near_offset[s] = it->second, have_near[s] = true;
    }
    last.clear();
    for (size_t s = m.shadow.size(); s-- > 0;) {
      const std::string& k = m.shadow[s].kernel;
      if (exact[s]) last[k] = exact_offset[s];
      auto it = last.find(k);
      if (!have_near[s] && it != last.end()) near_offset[s] = it->second, have_near[s] = true;
    }
  }
  for (size_t s : pending) {
    const ShadowLaunch& sh = m.shadow[s];
    auto k = by_kernel.find(sh.kernel);
    if (k == by_kernel.end()) {
      m.shadow_unmatched.push_back(s);
      continue;
    }
    int64_t offset = have_near[s] ? near_offset[s] : (first_offset.count(sh.kernel) ? first_offset[sh.kernel] : 0);
    size_t p = Nearest(m.primary, k->second, static_cast<int64_t>(sh.cpu_ns) - offset,
                       [&](size_t i) { return used[i]; });
    if (p == std::string::npos) {
      m.shadow_unmatched.push_back(s);
      continue;
    }
    used[p] = true;
    Match mt;
    mt.kind = MatchKind::kTime;
    mt.shadow = s;
    mt.primary = p;
    mt.shape_differs = !SameDims(sh.grid, m.primary[p].grid) || !SameDims(sh.block, m.primary[p].block);
    ++sum.time_only;
    m.matches.push_back(mt);
  }
  std::sort(m.matches.begin(), m.matches.end(), [](const Match& a, const Match& b) { return a.shadow < b.shadow; });
  sum.unmatched_shadow = m.shadow_unmatched.size();
  for (size_t i = 0; i < used.size(); ++i)
    if (!used[i]) m.primary_unmatched.push_back(i);
  sum.primary_target_unmatched = m.primary_unmatched.size();

  // 3. What a time-only join would have chosen for the exact matches.
  for (const Match& mt : m.matches) {
    if (mt.kind != MatchKind::kExact) continue;
    const ShadowLaunch& sh = m.shadow[mt.shadow];
    auto k = by_kernel.find(sh.kernel);
    if (k == by_kernel.end()) continue;
    const int64_t off = first_offset.count(sh.kernel) ? first_offset[sh.kernel] : 0;
    size_t p = Nearest(m.primary, k->second, static_cast<int64_t>(sh.cpu_ns) - off, [](size_t) { return false; });
    ++sum.time_only_evaluated;
    if (p == mt.primary) ++sum.time_only_agree;
  }

  // 4. Drift per top-level range of the shadow's launches.
  std::map<std::string, size_t> row;
  auto drift = [&](const std::string& path) -> DriftRow& {
    std::string top = TopLevel(path);
    auto it = row.find(top);
    if (it == row.end()) {
      it = row.emplace(top, m.drift.size()).first;
      m.drift.push_back(DriftRow{top});
    }
    return m.drift[it->second];
  };
  std::vector<const Match*> by_shadow(m.shadow.size(), nullptr);
  for (const Match& mt : m.matches) by_shadow[mt.shadow] = &mt;
  for (size_t s = 0; s < m.shadow.size(); ++s) {
    DriftRow& d = drift(m.shadow[s].path);
    const Match* mt = by_shadow[s];
    if (!mt) {
      ++d.unmatched;
    } else if (mt->kind == MatchKind::kExact) {
      ++d.exact;
      if (mt->shape_differs) ++d.shape_differs;
    } else {
      ++d.time_only;
    }
  }
}

}  // namespace twinscope::join
