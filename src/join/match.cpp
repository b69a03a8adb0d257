// Alignment of the two launch sequences, divergence regions and drift; the
// time-only fallback is in join/time_only.h (docs/join.md).
#include "join/match.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <unordered_map>

#include "join/align.h"
#include "join/range_names.h"
#include "join/time_only.h"
#include "launchkey/launch_key.h"

namespace twinscope::join {
namespace {

bool SameDims(Dim3 a, Dim3 b) { return a.x == b.x && a.y == b.y && a.z == b.z; }

// Interns (normalized range path, kernel, grid, block) as token ids.
class Tokens {
 public:
  explicit Tokens(const RangeNormalizer& n) : norm_(n) {}
  uint32_t Of(const std::string& path, const std::string& kernel, Dim3 g, Dim3 b) {
    auto pn = paths_.find(path);
    if (pn == paths_.end()) pn = paths_.emplace(path, norm_.Normalize(path)).first;
    key_.assign(pn->second);
    key_ += '\x1f';
    key_ += kernel;
    key_ += '\x1f';
    for (uint32_t v : {g.x, g.y, g.z, b.x, b.y, b.z}) key_.append(reinterpret_cast<const char*>(&v), sizeof v);
    auto it = ids_.find(key_);
    if (it == ids_.end()) it = ids_.emplace(key_, static_cast<uint32_t>(ids_.size())).first;
    return it->second;
  }

 private:
  const RangeNormalizer& norm_;
  std::unordered_map<std::string, std::string> paths_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::string key_;
};

// Diff's compaction: an LCS may put a launch only the shadow made and the
// primary launch it replaced far apart when the launches between are equal
// (a repacked launch among identical ones). A pure insertion followed, after
// aligned pairs, by a pure deletion (or the reverse) is slid over those pairs
// when the tokens allow it, so the two meet in one region (paired there as
// diverged). The pairs stay equal-token pairs in order.
void CompactEdits(const std::vector<uint32_t>& tp, const std::vector<uint32_t>& ts, std::vector<AlignPair>* pairs) {
  auto& pr = *pairs;
  auto gap = [&](size_t k, size_t* a0, size_t* a1, size_t* b0, size_t* b1) {
    *a0 = k ? pr[k - 1].first + 1 : 0, *b0 = k ? pr[k - 1].second + 1 : 0;
    *a1 = k < pr.size() ? pr[k].first : tp.size(), *b1 = k < pr.size() ? pr[k].second : ts.size();
  };
  constexpr size_t kMaxSlide = 100'000;
  size_t prev = SIZE_MAX;
  for (size_t k = 0; k <= pr.size(); ++k) {
    size_t a0, a1, b0, b1;
    gap(k, &a0, &a1, &b0, &b1);
    if (a0 == a1 && b0 == b1) continue;
    if (prev != SIZE_MAX && k - prev <= kMaxSlide) {
      size_t pa0, pa1, pb0, pb1;
      gap(prev, &pa0, &pa1, &pb0, &pb1);
      const size_t m = k - prev;
      if (pa0 == pa1 && pb1 > pb0 && b0 == b1 && a1 > a0) {  // shadow-only, then primary-only
        bool ok = true;
        for (size_t j = 0; j < m && ok; ++j) ok = ts[pb0 + j] == ts[pb1 + j];
        if (ok)
          for (size_t j = 0; j < m; ++j) pr[prev + j].second = static_cast<uint32_t>(pb0 + j);
      } else if (pb0 == pb1 && pa1 > pa0 && a0 == a1 && b1 > b0) {  // primary-only, then shadow-only
        bool ok = true;
        for (size_t j = 0; j < m && ok; ++j) ok = tp[pa0 + j] == tp[pa1 + j];
        if (ok)
          for (size_t j = 0; j < m; ++j) pr[prev + j].first = static_cast<uint32_t>(pa0 + j);
      }
    }
    prev = k;
  }
}

bool Sampled(const nlohmann::json& header) {
  if (!header.is_object() || !header.contains("config") || !header["config"].is_object()) return false;
  const auto& c = header["config"];
  auto num = [&](const char* k) { return c.contains(k) && c[k].is_number() ? c[k].get<double>() : 0.0; };
  return num("every") > 1 || num("max_launches") > 0 || num("per_second") > 0 || num("budget_pct") > 0;
}

}  // namespace

void MatchLaunches(JoinedModel& m) {
  Summary& sum = m.summary;
  sum.shadow_launches = m.shadow.size();
  for (const auto& sh : m.shadow) sum.shadow_without_blocks += sh.blocks.blocks_seen == 0 ? 1 : 0;
  sum.primary_target_launches = m.primary.size();

  for (const PrimaryLaunch& p : m.primary)
    if (!p.have_kernel) ++sum.primary_target_without_kernel;

  // 1. Align the two launch sequences (join/align.h) on tokens of normalized
  // range path, kernel and shape.
  std::vector<std::string> patterns = m.options.normalize_range;
  for (auto& p : NormalizePatternsFromEnv()) patterns.push_back(std::move(p));
  std::string pattern_error;
  RangeNormalizer norm(patterns, &pattern_error);
  if (!pattern_error.empty()) m.warnings.push_back(pattern_error);
  Tokens tokens(norm);
  std::vector<uint32_t> tp(m.primary.size()), ts(m.shadow.size());
  std::vector<uint64_t> kp(m.primary.size()), ks(m.shadow.size());
  for (size_t i = 0; i < m.primary.size(); ++i) {
    const PrimaryLaunch& p = m.primary[i];
    tp[i] = tokens.Of(p.path, p.kernel, p.grid, p.block), kp[i] = p.hash;
  }
  for (size_t i = 0; i < m.shadow.size(); ++i) {
    const ShadowLaunch& s = m.shadow[i];
    ts[i] = tokens.Of(s.path, s.kernel, s.grid, s.block), ks[i] = s.hash;
  }
  AlignOptions ao;
  ao.max_d = m.options.align_max_d;
  AlignStats as;
  std::vector<AlignPair> pairs = AlignSequences(tp, ts, kp, ks, ao, &as);
  CompactEdits(tp, ts, &pairs);
  sum.alignment.identical = as.identical;
  sum.alignment.anchors = as.anchors;
  sum.alignment.segments = as.segments;
  sum.alignment.capped_segments = as.capped_segments;
  sum.alignment.capped_launches = as.capped_launches;
  sum.alignment.max_d = as.max_d_seen;
  sum.alignment.sampled = Sampled(m.shadow_side.stats.header);
  if (as.capped_segments) {
    m.warnings.push_back("alignment: " + std::to_string(as.capped_segments) +
                         " stretches of the two runs differ by more than " + std::to_string(ao.max_d) +
                         " launches; their " + std::to_string(as.capped_launches) +
                         " shadow launches were matched greedily by key and range, in order, not aligned");
  }

  std::vector<bool> used(m.primary.size(), false);
  std::vector<int64_t> exact_offset(m.shadow.size(), 0);
  std::vector<bool> exact(m.shadow.size(), false);  // paired by the alignment (exact or diverged)
  auto pair = [&](size_t s, size_t p, MatchKind kind) {
    Match mt;
    mt.kind = kind;
    mt.shadow = s;
    mt.primary = p;
    mt.shape_differs =
        !SameDims(m.shadow[s].grid, m.primary[p].grid) || !SameDims(m.shadow[s].block, m.primary[p].block);
    used[p] = true;
    exact[s] = true;
    exact_offset[s] = static_cast<int64_t>(m.shadow[s].cpu_ns) - static_cast<int64_t>(m.primary[p].cpu_ns);
    m.matches.push_back(mt);
    return m.matches.size() - 1;
  };
  for (const auto& [p, s] : pairs) pair(s, p, MatchKind::kExact);
  sum.exact = pairs.size();

  // 2. The stretches between aligned pairs: pair launches of the same kernel
  // in order (diverged: the same place, other work) and record the region.
  const bool shadow_cut = m.shadow_side.stats.report.end != ReadEnd::kComplete;
  std::vector<int32_t> region_of_shadow(m.shadow.size(), -1);
  std::vector<std::pair<size_t, size_t>> shadow_runs;  // per region: pure insertion run (start, len), else (0, 0)
  std::vector<std::pair<size_t, size_t>> primary_runs;
  std::vector<std::pair<size_t, size_t>> bounds_s, bounds_p;  // the paired context around each region
  auto gap = [&](size_t a0, size_t a1, size_t b0, size_t b1, bool trailing) {
    if (a0 >= a1 && b0 >= b1) return;
    if (b0 >= b1 && (sum.alignment.sampled || (trailing && shadow_cut))) return;  // expected: not divergence
    DivergenceRegion r;
    const int32_t idx = static_cast<int32_t>(m.divergences.size());
    r.shadow_launches = b1 - b0, r.primary_launches = a1 - a0;
    if (b1 > b0) {
      r.first_seq = m.shadow[b0].seq, r.last_seq = m.shadow[b1 - 1].seq;
      r.shadow_from = TopLevelRange(m.shadow[b0].path);
      r.shadow_to = TopLevelRange(m.shadow[b1 - 1].path);
    }
    if (a1 > a0) {
      r.first_primary = a0, r.last_primary = a1 - 1;
      r.primary_from = TopLevelRange(m.primary[a0].path);
      r.primary_to = TopLevelRange(m.primary[a1 - 1].path);
    }
    std::unordered_map<std::string, std::vector<size_t>> primary_of_kernel;
    for (size_t a = a0; a < a1; ++a) primary_of_kernel[m.primary[a].kernel].push_back(a);
    std::unordered_map<std::string, size_t> cursor;
    std::unordered_map<std::string, uint64_t> shadow_kernels;
    size_t last = a0;  // pairs stay in order on both sides
    for (size_t b = b0; b < b1; ++b) {
      region_of_shadow[b] = idx;
      const std::string& k = m.shadow[b].kernel;
      ++shadow_kernels[k];
      auto pk = primary_of_kernel.find(k);
      if (pk == primary_of_kernel.end()) {
        ++r.inserted;
        if (a1 > a0) ++r.other_kernels;  // the primary launched something else here
        continue;
      }
      size_t& c = cursor[k];
      while (c < pk->second.size() && pk->second[c] < last) ++c;
      if (c == pk->second.size()) {
        ++r.inserted;
        continue;
      }
      const size_t a = pk->second[c++];
      last = a + 1;
      Match& mt = m.matches[pair(b, a, MatchKind::kDiverged)];
      mt.region = idx;
      ++r.diverged;
      if (mt.shape_differs) ++r.other_shape;
    }
    for (size_t a = a0; a < a1; ++a) {
      if (used[a]) continue;
      ++r.deleted;
      if (b1 > b0 && !shadow_kernels.count(m.primary[a].kernel)) ++r.other_kernels;
    }
    shadow_runs.emplace_back(a0 == a1 ? b0 : 0, a0 == a1 ? b1 - b0 : 0);
    primary_runs.emplace_back(b0 == b1 ? a0 : 0, b0 == b1 ? a1 - a0 : 0);
    m.divergences.push_back(std::move(r));
  };
  {
    size_t a = 0, b = 0;
    for (const auto& [p, s] : pairs) {
      gap(a, p, b, s, false);
      a = p + 1, b = s + 1;
    }
    gap(a, m.primary.size(), b, m.shadow.size(), true);
  }
  // Ambiguity: a pure insertion or deletion that could slide over equal neighbours.
  for (size_t r = 0; r < m.divergences.size(); ++r) {
    DivergenceRegion& d = m.divergences[r];
    if (shadow_runs[r].second) {
      const size_t start = shadow_runs[r].first, len = shadow_runs[r].second;
      size_t lo = 0, hi = ts.size();
      for (size_t q = r; q-- > 0;)
        if (m.divergences[q].shadow_launches) {
          lo = static_cast<size_t>(std::lower_bound(m.shadow.begin(), m.shadow.end(), m.divergences[q].last_seq,
                                                    [](const ShadowLaunch& x, uint64_t v) { return x.seq < v; }) -
                                   m.shadow.begin()) +
               1;
          break;
        }
      for (size_t q = r + 1; q < m.divergences.size(); ++q)
        if (m.divergences[q].shadow_launches) {
          hi = static_cast<size_t>(std::lower_bound(m.shadow.begin(), m.shadow.end(), m.divergences[q].first_seq,
                                                    [](const ShadowLaunch& x, uint64_t v) { return x.seq < v; }) -
                                   m.shadow.begin());
          break;
        }
      d.positions = SlidePositions(ts, start, len, lo, hi);
    } else if (primary_runs[r].second) {
      const size_t start = primary_runs[r].first, len = primary_runs[r].second;
      size_t lo = 0, hi = tp.size();
      for (size_t q = r; q-- > 0;)
        if (m.divergences[q].primary_launches) {
          lo = m.divergences[q].last_primary + 1;
          break;
        }
      for (size_t q = r + 1; q < m.divergences.size(); ++q)
        if (m.divergences[q].primary_launches) {
          hi = m.divergences[q].first_primary;
          break;
        }
      d.positions = SlidePositions(tp, start, len, lo, hi);
    }
    sum.in_divergence += d.shadow_launches;
    sum.primary_in_divergence += d.primary_launches;
    if (d.positions > 1) ++sum.ambiguous_regions, sum.ambiguous += d.shadow_launches;
  }
  if (sum.ambiguous_regions) {
    for (const auto& d : m.divergences) {
      if (d.positions <= 1) continue;
      m.warnings.push_back(std::to_string(sum.ambiguous_regions) +
                           " divergence regions could sit at several places with the same result (repeated identical "
                           "steps or launches); the first (" +
                           std::to_string(d.shadow_launches ? d.shadow_launches : d.primary_launches) +
                           " launches at " + (d.shadow_launches ? d.shadow_from : d.primary_from) +
                           ") could start at " + std::to_string(d.positions) +
                           " launch positions: the pairing there is one of several equal ones");
      break;
    }
  }
  for (Match& mt : m.matches) {
    if (mt.kind == MatchKind::kDiverged) {
      ++sum.diverged;
      if (mt.shape_differs) ++sum.diverged_shape;
    }
    if (mt.region >= 0 && m.divergences[static_cast<size_t>(mt.region)].positions > 1) mt.ambiguous = true;
  }
  // 3. Time only (join/time_only.h), for shadow launches the alignment left unpaired.
  TimeOnlyPass time_only(m);
  time_only.MatchPending(m, used, exact, exact_offset, region_of_shadow);
  std::sort(m.matches.begin(), m.matches.end(), [](const Match& a, const Match& b) { return a.shadow < b.shadow; });
  sum.unmatched_shadow = m.shadow_unmatched.size();
  for (size_t i = 0; i < used.size(); ++i)
    if (!used[i]) m.primary_unmatched.push_back(i);
  sum.primary_target_unmatched = m.primary_unmatched.size();

  // What a time-only join would have chosen for the exact matches.
  time_only.Evaluate(m);

  // 4. Drift per top-level range of the shadow's launches.
  std::map<std::string, size_t> row;
  auto drift = [&](const std::string& path) -> DriftRow& {
    std::string top(TopLevelRange(path));
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
    } else if (mt->kind == MatchKind::kDiverged) {
      ++d.diverged;
    } else {
      ++d.time_only;
    }
    if (mt && mt->shape_differs) ++d.shape_differs;
  }
}

}  // namespace twinscope::join
