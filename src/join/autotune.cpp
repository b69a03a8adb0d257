// Autotuning, named: benchmark stretches, another final choice and one-sided tuning on the aligned instances.
#include "join/autotune.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "launchkey/launch_key.h"

namespace twinscope::join {
namespace {

uint64_t Shape(Dim3 g, Dim3 b) {
  uint64_t h = 1469598103934665603ull;
  for (uint32_t v : {g.x, g.y, g.z, b.x, b.y, b.z}) h = (h ^ v) * 1099511628211ull;
  return h;
}

struct Counts {
  uint64_t n = 0;
  std::set<uint64_t> shapes;
};
using KernelCounts = std::unordered_map<uint32_t, Counts>;

// Per instance, kernel -> launches and shapes.
std::vector<KernelCounts> PerInstance(const std::vector<Instance>& inst, const std::vector<uint32_t>& kernels,
                                      const std::vector<uint64_t>& shapes) {
  std::vector<KernelCounts> out(inst.size());
  for (size_t x = 0; x < inst.size(); ++x)
    for (uint32_t i = inst[x].begin; i < inst[x].end; ++i) {
      Counts& c = out[x][kernels[i]];
      ++c.n;
      c.shapes.insert(shapes[i]);
    }
  return out;
}

// Median launches of each kernel per instance, over the instances that launch it (a kernel's usual count).
class Medians {
 public:
  explicit Medians(const std::vector<KernelCounts>& counts) {
    std::unordered_map<uint32_t, std::vector<uint64_t>> lists;
    for (const auto& per : counts)
      for (const auto& [k, c] : per) lists[k].push_back(c.n);
    for (auto& [k, v] : lists) {
      std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
      median_[k] = v[v.size() / 2];
    }
  }
  uint64_t Of(uint32_t kernel) const {
    auto it = median_.find(kernel);
    return it == median_.end() ? 0 : it->second;
  }

 private:
  std::unordered_map<uint32_t, uint64_t> median_;
};

// (kernel, shape) of a launch, for "the other side never ran this" (names are interned: one address a name).
uint64_t KernelShape(const Name& kernel, Dim3 g, Dim3 b) {
  return Shape(g, b) ^ (static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&kernel.str())) * 0x9e3779b97f4a7c15ull);
}

}  // namespace

std::string NamePattern(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (size_t i = 0; i < name.size();) {
    if (name[i] >= '0' && name[i] <= '9') {
      while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
      out += 'N';
    } else {
      out += name[i++];
    }
  }
  return out;
}

bool AutotunerRangeName(std::string_view name) {
  constexpr std::string_view kModule = "XlaModule:#hlo_module=";
  const size_t at = name.find(kModule);
  if (at == std::string_view::npos || name.find("program_id=") != std::string_view::npos) return false;
  std::string_view module = name.substr(at + kModule.size());
  module = module.substr(0, module.find_first_of(",#/"));
  if (module.starts_with("jit_") || module.starts_with("pmap_")) return false;
  return module.find("fusion") != std::string_view::npos || module.find("gemm") != std::string_view::npos ||
         module.find("triton") != std::string_view::npos;
}

std::vector<OneSided> ClassifyOneSided(const JoinedModel& m) {
  const auto& rows = m.instances;
  std::vector<OneSided> out(rows.size(), OneSided::kNone);
  // Launch offsets of each row on each side (rows hold each side's instances in order).
  std::vector<size_t> begin_a(rows.size()), begin_b(rows.size());
  {
    size_t a = 0, b = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      begin_a[r] = a, begin_b[r] = b;
      a += rows[r].primary_launches, b += rows[r].shadow_launches;
    }
    if (a != m.primary.size() || b != m.shadow.size()) return out;  // rows not of these launches
  }
  std::vector<std::string> pattern_a(rows.size()), pattern_b(rows.size());
  std::unordered_set<std::string> all_a, all_b;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].primary >= 0) all_a.insert(pattern_a[r] = NamePattern(rows[r].primary_name));
    if (rows[r].shadow >= 0) all_b.insert(pattern_b[r] = NamePattern(rows[r].shadow_name));
  }
  std::unordered_set<uint64_t> ran_b;  // (kernel, shape) the shadow ran: made when a stretch needs it
  bool ran_b_made = false;
  const bool sampled = m.summary.alignment.sampled;
  // Where the primary's launches without a counterpart are expected (a sampling shadow leaves them out; a cut
  // shadow has none after its last), a primary-only instance says nothing.
  const bool cut = m.shadow_side.stats.report.end != ReadEnd::kComplete;
  size_t last_shadow_row = 0;
  for (size_t r = 0; r < rows.size(); ++r)
    if (rows[r].shadow >= 0) last_shadow_row = r;
  for (int side = 0; side < 2; ++side) {
    const bool primary = side == 0;
    auto mine = [&](size_t r) { return primary ? rows[r].primary >= 0 : rows[r].shadow >= 0; };
    auto paired = [&](size_t r) { return rows[r].primary >= 0 && rows[r].shadow >= 0; };
    const auto& pattern = primary ? pattern_a : pattern_b;
    const auto& other = primary ? all_b : all_a;
    // The steps: the pattern this side's paired instances have most often (the earliest on a tie); early is
    // before its first paired instance.
    std::map<std::string, std::pair<size_t, size_t>> count;  // pattern -> (paired instances, -first row)
    for (size_t r = 0; r < rows.size(); ++r)
      if (paired(r)) {
        auto it = count.emplace(pattern[r], std::make_pair(size_t{0}, r)).first;
        ++it->second.first;
      }
    size_t steps = rows.size();
    {
      size_t best = 0;
      for (const auto& [pat, c] : count)
        if (c.first > best || (c.first == best && c.second < steps)) best = c.first, steps = c.second;
    }
    // A server's steps name their batch (`decode step 17 [r3:1,r4:1]`): another batch is another name, the
    // same kind of range, never other work.
    auto candidate = [&](size_t r) {
      const std::string& name = primary ? rows[r].primary_name : rows[r].shadow_name;
      if (paired(r) || name.empty() || other.count(pattern[r])) return false;
      if (primary && (sampled || (cut && r > last_shadow_row))) return false;
      return name.find("prefill step") == std::string::npos && name.find("decode step") == std::string::npos &&
             name.find("mixed step") == std::string::npos;
    };
    // Stretches of this side's consecutive candidates; a stretch reaching past the steps' start is not early.
    for (size_t r = 0; r < rows.size();) {
      if (!mine(r) || !candidate(r)) {
        ++r;
        continue;
      }
      std::vector<size_t> stretch;
      size_t e = r;
      for (; e < rows.size(); ++e) {
        if (!mine(e)) continue;
        if (!candidate(e)) break;
        stretch.push_back(e);
      }
      uint64_t launches = 0, evidenced = 0, named = 0;
      for (size_t x : stretch) {
        const uint64_t n = primary ? rows[x].primary_launches : rows[x].shadow_launches;
        launches += n;
        if (AutotunerRangeName(primary ? rows[x].primary_name : rows[x].shadow_name)) {
          evidenced += n, named += n;
          continue;
        }
        // The shadow's early ranges of kernels the primary never ran are far more often other work (an eval
        // before the first step) than tuning the primary skipped: only an autotuner's names count there.
        if (!primary) continue;
        if (!ran_b_made) {
          for (const auto& l : m.shadow) ran_b.insert(KernelShape(l.kernel, l.grid, l.block));
          ran_b_made = true;
        }
        for (size_t k = begin_a[x]; k < begin_a[x] + n; ++k)
          evidenced += ran_b.count(KernelShape(m.primary[k].kernel, m.primary[k].grid, m.primary[k].block)) ? 0 : 1;
      }
      const bool early = stretch.back() < steps;
      // A stretch wholly of an autotuner's own ranges is tuning wherever it is (a function compiled mid-run).
      const bool tuning = !sampled && ((early && evidenced * kOneSidedEvidence >= launches) || named == launches);
      for (size_t x : stretch) out[x] = tuning ? OneSided::kTuning : OneSided::kOtherWork;
      r = e;
    }
  }
  return out;
}

void MarkAutotuning(JoinedModel& m, const TwoLevelResult& tl, const std::vector<uint32_t>& kernels_a,
                    const std::vector<uint32_t>& kernels_b, const std::vector<int32_t>& region_of_shadow) {
  // A sampling shadow leaves primary launches out by design: no count of it is comparable.
  if (m.summary.alignment.sampled) return;
  const size_t np = m.primary.size(), ns = m.shadow.size();
  std::vector<uint64_t> shape_a(np), shape_b(ns);
  for (size_t i = 0; i < np; ++i) shape_a[i] = Shape(m.primary[i].grid, m.primary[i].block);
  for (size_t j = 0; j < ns; ++j) shape_b[j] = Shape(m.shadow[j].grid, m.shadow[j].block);
  constexpr size_t kNone = SIZE_MAX;
  std::vector<size_t> match_a(np, kNone), match_b(ns, kNone);
  for (size_t k = 0; k < m.matches.size(); ++k) match_a[m.matches[k].primary] = k, match_b[m.matches[k].shadow] = k;
  std::vector<uint8_t> auto_a(np, 0), auto_b(ns, 0);
  // A launch of the benchmark: alone, it is the autotuner's; in a diverged pair, the pair is.
  auto mark = [&](std::vector<uint8_t>& flags, const std::vector<size_t>& match, size_t i) {
    if (match[i] == kNone) {
      flags[i] = 1;
    } else if (m.matches[match[i]].kind == MatchKind::kDiverged) {
      m.matches[match[i]].autotuning = true;
    }
  };

  // 1. Benchmark stretches in aligned pairs of instances.
  const auto ca = PerInstance(tl.a, kernels_a, shape_a), cb = PerInstance(tl.b, kernels_b, shape_b);
  const Medians med_a(ca), med_b(cb);
  std::unordered_map<uint32_t, std::set<uint64_t>> bench_shapes;  // kernel -> shapes its benchmarks ran
  auto benchmarks = [](const Counts& mine, uint64_t other, uint64_t median) {
    const uint64_t ref = std::max<uint64_t>(1, std::min(other, median));
    return mine.n >= kBenchmarkRatio * ref && mine.shapes.size() >= kBenchmarkShapes;
  };
  for (size_t x = 0; x < tl.a.size(); ++x) {
    const int32_t y = tl.partner_a[x];
    if (y < 0) continue;
    const Instance &ia = tl.a[x], &ib = tl.b[static_cast<size_t>(y)];
    const KernelCounts &ka = ca[x], &kb = cb[static_cast<size_t>(y)];
    for (const auto& [k, c] : ka) {
      auto o = kb.find(k);
      if (!benchmarks(c, o == kb.end() ? 0 : o->second.n, med_a.Of(k))) continue;
      bench_shapes[k].insert(c.shapes.begin(), c.shapes.end());
      for (uint32_t i = ia.begin; i < ia.end; ++i)
        if (kernels_a[i] == k) mark(auto_a, match_a, i);
    }
    for (const auto& [k, c] : kb) {
      auto o = ka.find(k);
      if (!benchmarks(c, o == ka.end() ? 0 : o->second.n, med_b.Of(k))) continue;
      bench_shapes[k].insert(c.shapes.begin(), c.shapes.end());
      for (uint32_t j = ib.begin; j < ib.end; ++j)
        if (kernels_b[j] == k) mark(auto_b, match_b, j);
    }
  }
  // 2. Another final choice: diverged pairs whose two shapes were both benchmarked.
  for (Match& mt : m.matches) {
    if (mt.kind != MatchKind::kDiverged || !mt.shape_differs || mt.autotuning) continue;
    auto it = bench_shapes.find(kernels_a[mt.primary]);
    if (it != bench_shapes.end() && it->second.count(shape_a[mt.primary]) && it->second.count(shape_b[mt.shadow]))
      mt.autotuning = true;
  }
  // 3. One-sided: early primary-only launches of candidates the shadow never ran (a kernel, or a kernel in a
  // shape), and the other early primary-only launches of those kernels. Early: before the first pair of
  // instances with equal launches, or in the first quarter of the primary's launches.
  size_t first_same = tl.a.size();
  for (size_t x = 0; x < tl.a.size() && first_same == tl.a.size(); ++x) {
    const int32_t y = tl.partner_a[x];
    if (y >= 0 && tl.a[x].content == tl.b[static_cast<size_t>(y)].content &&
        tl.a[x].end - tl.a[x].begin == tl.b[static_cast<size_t>(y)].end - tl.b[static_cast<size_t>(y)].begin)
      first_same = x;
  }
  // A launch in a named instance without a partner is the instance rule's to judge (below), not this one's.
  auto early = [&](size_t i) {
    const uint32_t x = tl.instance_of_a[i];
    if (tl.partner_a[x] < 0 && !tl.a[x].name.empty()) return false;
    return x < first_same || i < np / 4;
  };
  {
    std::unordered_set<uint64_t> shadow_ran;  // (kernel, shape) hashes
    std::unordered_set<uint32_t> shadow_kernels;
    for (size_t j = 0; j < ns; ++j) shadow_ran.insert(shape_b[j] ^ (uint64_t{kernels_b[j]} * 0x9e3779b97f4a7c15ull));
    std::unordered_set<uint32_t> tuned;
    for (size_t i = 0; i < np; ++i) {
      if (match_a[i] != kNone || auto_a[i] || !early(i)) continue;
      if (!shadow_ran.count(shape_a[i] ^ (uint64_t{kernels_a[i]} * 0x9e3779b97f4a7c15ull))) tuned.insert(kernels_a[i]);
    }
    for (size_t i = 0; i < np; ++i) {
      if (match_a[i] != kNone || auto_a[i] || !early(i) || !tuned.count(kernels_a[i])) continue;
      auto_a[i] = 1;
      m.summary.autotuning_one_sided = true;
    }
  }
  // 4. One-sided instances: a stretch of early unpaired instances of an autotuner (ClassifyOneSided).
  {
    const auto kinds = ClassifyOneSided(m);
    size_t a = 0, b = 0;
    for (size_t r = 0; r < kinds.size(); ++r) {
      const InstancePair& row = m.instances[r];
      if (kinds[r] == OneSided::kTuning) {
        for (size_t i = a; i < a + row.primary_launches; ++i)
          if (match_a[i] == kNone) auto_a[i] = 1;
        for (size_t j = b; j < b + row.shadow_launches; ++j)
          if (match_b[j] == kNone) auto_b[j] = 1;
        if (row.primary_launches) m.summary.autotuning_one_sided = true;
      }
      a += row.primary_launches, b += row.shadow_launches;
    }
  }
  // 5. Counts per region and in the summary; top-level ranges that hold only the autotuner's launches.
  Summary& sum = m.summary;
  sum.autotuning_primary = sum.autotuning_shadow = sum.autotuning_pairs = 0;
  for (size_t r = 0; r < m.divergences.size(); ++r) {
    DivergenceRegion& d = m.divergences[r];
    if (!d.primary_launches) continue;
    for (size_t i = d.first_primary; i <= d.last_primary; ++i) d.autotuning_primary += auto_a[i];
  }
  for (size_t j = 0; j < ns; ++j)
    if (auto_b[j] && region_of_shadow[j] >= 0)
      ++m.divergences[static_cast<size_t>(region_of_shadow[j])].autotuning_shadow;
  for (const Match& mt : m.matches)
    if (mt.autotuning) {
      ++sum.autotuning_pairs;
      if (mt.region >= 0) ++m.divergences[static_cast<size_t>(mt.region)].autotuning_pairs;
    }
  for (uint8_t f : auto_a) sum.autotuning_primary += f;
  for (uint8_t f : auto_b) sum.autotuning_shadow += f;
  auto tuning_only_ranges = [](auto& launches, const std::vector<uint8_t>& flags) {
    std::unordered_map<std::string_view, std::pair<uint64_t, uint64_t>> per;  // range -> (launches, tuning)
    for (size_t i = 0; i < launches.size(); ++i) {
      auto& c = per[TopLevelRange(launches[i].path)];
      ++c.first, c.second += flags[i];
    }
    uint64_t n = 0;
    for (const auto& [name, c] : per) n += c.first == c.second ? 1 : 0;
    return n;
  };
  sum.autotuning_ranges_primary = tuning_only_ranges(m.primary, auto_a);
  sum.autotuning_ranges_shadow = tuning_only_ranges(m.shadow, auto_b);
}

}  // namespace twinscope::join
