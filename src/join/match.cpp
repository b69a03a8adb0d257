// Alignment of the two launch sequences, divergence regions and drift; the
// time-only fallback is in join/time_only.h (docs/join.md).
#include "join/match.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "join/align.h"
#include "join/autotune.h"
#include "join/instances.h"
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

bool Sampled(const nlohmann::json& header) {
  if (!header.is_object() || !header.contains("config") || !header["config"].is_object()) return false;
  const auto& c = header["config"];
  auto num = [&](const char* k) { return c.contains(k) && c[k].is_number() ? c[k].get<double>() : 0.0; };
  return num("every") > 1 || num("max_launches") > 0 || num("per_second") > 0 || num("budget_pct") > 0;
}

// The instance pairing as rows of the model (both sides' instances, in order) and its counts.
void RecordInstances(const TwoLevelResult& tl, JoinedModel& m) {
  auto& al = m.summary.alignment;
  al.depth = tl.depth;
  al.instances_primary = tl.a.size(), al.instances_shadow = tl.b.size();
  al.bounded_instances = tl.bounded_instances;
  m.instances.clear();
  size_t i = 0, j = 0;
  while (i < tl.a.size() || j < tl.b.size()) {
    InstancePair row;
    auto take_a = [&] {
      const Instance& x = tl.a[i];
      row.primary = static_cast<int64_t>(i), row.primary_name = x.name, row.primary_launches = x.end - x.begin;
      row.bounded = tl.bounded_a[i];
      ++i;
    };
    auto take_b = [&] {
      const Instance& y = tl.b[j];
      row.shadow = static_cast<int64_t>(j), row.shadow_name = y.name, row.shadow_launches = y.end - y.begin;
      ++j;
    };
    if (i < tl.a.size() && j < tl.b.size() && tl.partner_a[i] == static_cast<int32_t>(j)) {
      const bool same =
          tl.a[i].content == tl.b[j].content && tl.a[i].end - tl.a[i].begin == tl.b[j].end - tl.b[j].begin;
      take_a(), take_b();
      row.cls = same ? "same" : "differs";
      ++al.instance_pairs;
    } else if (i < tl.a.size() && tl.partner_a[i] < 0) {
      take_a();
      row.cls = "primary_only";
    } else {
      take_b();
      row.cls = "shadow_only";
    }
    m.instances.push_back(std::move(row));
  }
}

}  // namespace

void MatchLaunches(JoinedModel& m) {
  Summary& sum = m.summary;
  sum.shadow_launches = m.shadow.size();
  for (const auto& sh : m.shadow) sum.shadow_without_blocks += sh.blocks.blocks_seen == 0 ? 1 : 0;
  sum.primary_target_launches = m.primary.size();

  for (const PrimaryLaunch& p : m.primary)
    if (!p.have_kernel) ++sum.primary_target_without_kernel;

  // 1. Align the two launch sequences in two levels (join/instances.h): range
  // instances first, then the launches inside each aligned pair, on tokens of
  // normalized range path, kernel and shape.
  std::vector<std::string> patterns = m.options.normalize_range;
  for (auto& p : NormalizePatternsFromEnv()) patterns.push_back(std::move(p));
  std::string pattern_error;
  RangeNormalizer norm(patterns, &pattern_error);
  if (!pattern_error.empty()) m.warnings.push_back(pattern_error);
  Tokens tokens(norm);
  std::unordered_map<std::string, uint32_t> kernel_ids;
  auto kernel_id = [&](const std::string& k) {
    return kernel_ids.emplace(k, static_cast<uint32_t>(kernel_ids.size())).first->second;
  };
  AlignSide sa, sb;
  auto side = [&](AlignSide& x, size_t n) {
    x.paths.resize(n), x.tokens.resize(n), x.kernels.resize(n), x.keys.resize(n);
  };
  side(sa, m.primary.size());
  side(sb, m.shadow.size());
  for (size_t i = 0; i < m.primary.size(); ++i) {
    const PrimaryLaunch& p = m.primary[i];
    sa.paths[i] = &p.path.str(), sa.tokens[i] = tokens.Of(p.path, p.kernel, p.grid, p.block);
    sa.kernels[i] = kernel_id(p.kernel), sa.keys[i] = p.hash;
  }
  for (size_t i = 0; i < m.shadow.size(); ++i) {
    const ShadowLaunch& s = m.shadow[i];
    sb.paths[i] = &s.path.str(), sb.tokens[i] = tokens.Of(s.path, s.kernel, s.grid, s.block);
    sb.kernels[i] = kernel_id(s.kernel), sb.keys[i] = s.hash;
  }
  const std::vector<uint32_t>& tp = sa.tokens;
  const std::vector<uint32_t>& ts = sb.tokens;
  TwoLevelOptions to;
  to.max_d = m.options.align_max_d;
  TwoLevelResult tl = AlignTwoLevel(sa, sb, norm, to);
  const std::vector<AlignPair>& pairs = tl.pairs;
  const AlignStats& as = tl.stats;
  sum.alignment.identical = as.identical;
  sum.alignment.anchors = as.anchors;
  sum.alignment.segments = as.segments;
  sum.alignment.capped_segments = as.capped_segments;
  sum.alignment.capped_launches = as.capped_launches;
  sum.alignment.max_d = as.max_d_seen;
  sum.alignment.sampled = Sampled(m.shadow_side.stats.header);
  RecordInstances(tl, m);
  if (tl.bounded_instances) {
    m.warnings.push_back("alignment: in " + std::to_string(tl.bounded_instances) +
                         " aligned range instances the two runs differ by more than " + std::to_string(to.max_d) +
                         " launches (the search's work bound); their " + std::to_string(tl.bounded_launches) +
                         " shadow launches were matched within the instance by key and token, in order, not "
                         "aligned");
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
    // Pairs only within one aligned pair of instances: (kernel, primary instance) -> launches in order.
    auto key = [](uint32_t kernel, uint32_t instance) { return (uint64_t{kernel} << 32) | instance; };
    std::unordered_map<uint64_t, std::vector<size_t>> primary_of_kernel;
    std::unordered_set<uint32_t> primary_instances, shadow_instances;
    for (size_t a = a0; a < a1; ++a) {
      primary_of_kernel[key(sa.kernels[a], tl.instance_of_a[a])].push_back(a);
      primary_instances.insert(tl.instance_of_a[a]);
    }
    std::unordered_map<uint64_t, size_t> cursor;
    std::unordered_set<uint64_t> shadow_kernels;
    size_t last = a0;  // pairs stay in order on both sides
    for (size_t b = b0; b < b1; ++b) {
      region_of_shadow[b] = idx;
      const uint32_t si = tl.instance_of_b[b];
      shadow_kernels.insert(key(sb.kernels[b], si));
      shadow_instances.insert(si);
      const int32_t partner = tl.partner_b[si];
      if (partner < 0) {  // a whole instance only the shadow ran
        ++r.inserted;
        continue;
      }
      const uint64_t k = key(sb.kernels[b], static_cast<uint32_t>(partner));
      auto pk = primary_of_kernel.find(k);
      if (pk == primary_of_kernel.end()) {
        ++r.inserted;
        if (primary_instances.count(static_cast<uint32_t>(partner)))
          ++r.other_kernels;  // the primary launched something else here
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
      const int32_t partner = tl.partner_a[tl.instance_of_a[a]];
      if (partner >= 0 && shadow_instances.count(static_cast<uint32_t>(partner)) &&
          !shadow_kernels.count(key(sa.kernels[a], static_cast<uint32_t>(partner))))
        ++r.other_kernels;
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
  // The autotuner's launches (join/autotune.h), before the time-only pass pairs any of them.
  MarkAutotuning(m, tl, sa.kernels, sb.kernels, region_of_shadow);

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
