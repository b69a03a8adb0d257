// The reasons the twins diverged: autotuning, batching, step counts, extra or missing work.
#include "join/divergence.h"

#include <algorithm>
#include <set>
#include <unordered_set>

#include "join/autotune.h"
#include "launchkey/launch_key.h"

namespace twinscope::join {
namespace {

bool Has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

std::string At(const std::string& range) { return range.empty() ? "outside any range" : "at " + range; }
std::string Where(const DivergenceRegion& r) { return At(r.shadow_launches ? r.shadow_from : r.primary_from); }

}  // namespace

void ExplainDivergence(JoinedModel& m) {
  m.reasons.clear();
  const Summary& s = m.summary;
  // One side without a single target launch: nothing was paired, and no step or work count says anything.
  if (m.primary.empty() != m.shadow.empty()) {
    const bool primary = m.primary.empty();
    DivergenceReason r{primary ? "empty_primary" : "empty_shadow", "", ""};
    r.text = std::string(primary ? "the primary" : "the shadow") +
             " made no launch of the target kernels (the kernel pattern matched nothing there), the " +
             (primary ? "shadow " : "primary ") + std::to_string(primary ? m.shadow.size() : m.primary.size()) +
             ": there is nothing to pair them with";
    r.remedy = std::string("check the pattern against the ") + (primary ? "primary" : "shadow") +
               "'s kernel names (`twinscope stats` on its trace) and that both runs ran the same program";
    m.reasons.push_back(std::move(r));
    return;
  }
  // Which frameworks the names show (kernels and range paths of both sides).
  bool xla = false, inductor = false, triton = false, cudnn = false, serving = m.requests.present || m.options.serving;
  {
    std::unordered_set<std::string> seen;
    auto look = [&](const std::string& kernel, const std::string& path) {
      if (seen.insert(kernel).second) {
        const std::string k = Lower(kernel);
        triton |= Has(k, "triton");
        inductor |= Has(k, "triton_poi_") || Has(k, "triton_red_") || Has(k, "triton_per_") || Has(k, "triton_tem_");
        cudnn |= Has(k, "cudnn");
        xla |= Has(k, "xla") || Has(k, "_fusion");
      }
      if (seen.insert("\x1f" + std::string(TopLevelRange(path))).second) {
        xla |= Has(path, "TSL::Thunk") || Has(path, "XlaModule") || Has(path, "unique_hlo_op_id");
        serving |= Has(path, "prefill step ") || Has(path, "decode step ") || Has(path, "mixed step ");
      }
    };
    for (const auto& p : m.primary) look(p.kernel, p.path);
    for (const auto& x : m.shadow) look(x.kernel, x.path);
  }
  // The autotuner's launches (join/autotune.h) are left out of every other count.
  auto less = [](uint64_t x, uint64_t y) { return x > y ? x - y : 0; };
  uint64_t other_kernels = 0, other_shape = 0, inserted = 0, deleted = 0, regions_kernels = 0, regions_shape = 0;
  const DivergenceRegion *first_kernels = nullptr, *first_shape = nullptr, *first_inserted = nullptr,
                         *first_deleted = nullptr, *first_tuning = nullptr;
  for (const auto& r : m.divergences) {
    const uint64_t shape = less(r.other_shape, r.autotuning_pairs);
    const uint64_t ins = less(r.inserted, r.autotuning_shadow), del = less(r.deleted, r.autotuning_primary);
    if (r.other_kernels)
      other_kernels += r.other_kernels, ++regions_kernels, first_kernels = first_kernels ? first_kernels : &r;
    if (shape) other_shape += shape, ++regions_shape, first_shape = first_shape ? first_shape : &r;
    if (ins > r.other_kernels || (ins && !r.other_kernels)) first_inserted = first_inserted ? first_inserted : &r;
    if (del) first_deleted = first_deleted ? first_deleted : &r;
    if (r.autotuning_shadow || r.autotuning_primary || r.autotuning_pairs)
      first_tuning = first_tuning ? first_tuning : &r;
    inserted += ins, deleted += del;
  }
  const uint64_t tuned = s.autotuning_primary + s.autotuning_shadow;
  if (other_kernels || tuned || s.autotuning_pairs) {
    DivergenceReason r{"autotuning", "", ""};
    std::vector<std::string> said;
    if (tuned) {
      said.push_back(std::to_string(tuned) + " launches an autotuner made to time candidates (primary " +
                     std::to_string(s.autotuning_primary) + ", shadow " + std::to_string(s.autotuning_shadow) +
                     ", without a counterpart" + (first_tuning ? ", first " + Where(*first_tuning) : "") + ")");
    }
    if (s.autotuning_pairs)
      said.push_back(std::to_string(s.autotuning_pairs) +
                     " launches at the same place as the primary's ran another of the shapes the autotuner timed: "
                     "the two runs chose differently");
    if (s.autotuning_one_sided)
      said.push_back(
          "only the primary tuned (early launches of candidates the shadow never ran, or ranges of an autotuner's "
          "own): the shadow reused the choices the primary left in the shared caches");
    if (other_kernels) {
      const bool early = first_kernels->first_primary * 10 <= std::max<size_t>(m.primary.size(), 1) ||
                         first_kernels->first_seq * 10 <= std::max<size_t>(m.shadow.size(), 1);
      said.push_back(std::to_string(other_kernels) + " launches in " + std::to_string(regions_kernels) +
                     " places are of kernels the other run did not launch there (first " + Where(*first_kernels) + ")" +
                     (early ? ", early in the run" : "") +
                     ": an autotuner timed candidates and chose differently in each run");
    }
    for (size_t i = 0; i < said.size(); ++i) r.text += (i ? "; " : "") + said[i];
    std::vector<std::string> how;
    if (xla)
      how.push_back(
          "XLA: give both runs one autotune cache (`twin` sets --xla_gpu_per_fusion_autotune_cache_dir; runs "
          "joined apart: XLA_FLAGS=--xla_gpu_per_fusion_autotune_cache_dir=DIR for both, the primary first) and "
          "warm it with a first run");
    if (inductor)
      how.push_back(
          "Inductor: share TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR (`twin` does) and warm them with a first "
          "run, or compile without max-autotune for the comparison");
    else if (triton)
      how.push_back(
          "Triton @triton.autotune: TRITON_CACHE_AUTOTUNING=1 with one TRITON_CACHE_DIR for both runs (`twin` sets "
          "both), so the shadow reuses the primary's choice; or pin the kernel's config");
    if (cudnn)
      how.push_back("cuDNN: torch.backends.cudnn.benchmark = False (or deterministic algorithms) in both runs");
    if (how.empty())
      how.push_back(
          "Triton @triton.autotune: TRITON_CACHE_AUTOTUNING=1 with one TRITON_CACHE_DIR for both runs (`twin` sets "
          "both); otherwise turn autotuning off for the comparison or share its cache between the runs (the "
          "primary first)");
    if (s.autotuning_one_sided && !tuned) how.insert(how.begin(), "nothing to fix if only this differs");
    for (size_t i = 0; i < how.size(); ++i) r.remedy += (i ? "; " : "") + how[i];
    m.reasons.push_back(std::move(r));
  }
  if (other_shape) {
    DivergenceReason r{"batching", "", ""};
    r.text = std::to_string(other_shape) + " launches in " + std::to_string(regions_shape) +
             " places ran with another grid or block than the primary's launch at the same place (first " +
             Where(*first_shape) + ")";
    if (serving) {
      r.text +=
          ": the shadow did not run the primary's batches (a server packs a batch by arrival, and the shadow is "
          "slower)";
      r.remedy =
          "run `twin --serve` with an engine adapter (`--engine-adapter auto`, the default) or the server's own "
          "follow mode (the demo server: `--follow`), so the shadow runs the primary's batches; otherwise compare "
          "only the exact launches";
    } else {
      r.text += ": the two runs' inputs differ (another batch, sequence length or data-dependent size)";
      r.remedy = "give both runs the same inputs, seed and batch size";
    }
    m.reasons.push_back(std::move(r));
  }
  // Same kernel and shape at the same place (always within one aligned range instance), under another range
  // name: the context differs (a serving step naming its batch's requests in another order or mix, or a name
  // holding a per-run detail).
  uint64_t other_range = 0;
  const DivergenceRegion* first_range = nullptr;
  for (const auto& r : m.divergences) {
    const uint64_t same_shape = less(less(r.diverged, r.other_shape), less(r.autotuning_pairs, r.other_shape));
    if (same_shape) other_range += same_shape, first_range = first_range ? first_range : &r;
  }
  if (other_range) {
    DivergenceReason r{"context", "", ""};
    r.text = std::to_string(other_range) +
             " launches ran the same kernel with the same shape as the primary's at the same place, under another "
             "range name (first: the primary's \"" +
             first_range->primary_from + "\", the shadow's \"" + first_range->shadow_from + "\")";
    if (serving) {
      r.text += ": the server put other requests, or the same in another order, into those steps";
      r.remedy =
          "run `twin --serve` with an engine adapter (`--engine-adapter auto`, the default) or the server's own "
          "follow mode (the demo server: `--follow`)";
    } else {
      r.remedy =
          "if the names hold a per-run detail (an id, a counter, a pointer), ignore it: --normalize-range REGEX "
          "(docs/join.md)";
    }
    m.reasons.push_back(std::move(r));
  }
  // Other work only one side did (join/autotune.h, ClassifyOneSided): whole range instances named unlike any of
  // the other side's (an `eval` or `checkpoint` range), said by name and left out of the step counts.
  struct OtherWork {
    uint64_t ranges = 0, launches = 0;
    std::string first;
  } other_a, other_b;
  {
    const auto kinds = ClassifyOneSided(m);
    for (size_t r = 0; r < kinds.size(); ++r) {
      if (kinds[r] != OneSided::kOtherWork) continue;
      const InstancePair& row = m.instances[r];
      OtherWork& o = row.primary >= 0 ? other_a : other_b;
      if (!o.ranges++) o.first = row.primary >= 0 ? row.primary_name : row.shadow_name;
      o.launches += row.primary >= 0 ? row.primary_launches : row.shadow_launches;
    }
  }
  const uint64_t depth = s.alignment.depth;
  auto ranges = [&](uint64_t n) {
    return std::to_string(n) + (depth <= 1 ? " top-level range" : " range") + (n == 1 ? "" : "s") +
           (depth <= 1 ? "" : " (at depth " + std::to_string(depth) + ")");
  };
  auto other_said = [&](const OtherWork& o, bool primary) {
    return std::string(primary ? "the primary" : "the shadow") + " ran " + ranges(o.ranges) + " the " +
           (primary ? "shadow" : "primary") + " did not (first \"" + o.first + "\", " + std::to_string(o.launches) +
           (o.launches == 1 ? " launch)" : " launches)");
  };
  // Step counts: top-level range instances with target launches on each side, less those holding only the
  // autotuner's launches and those of other work.
  {
    std::unordered_set<std::string> ps, ss;
    for (const auto& p : m.primary) ps.emplace(TopLevelRange(p.path));
    for (const auto& x : m.shadow) ss.emplace(TopLevelRange(x.path));
    uint64_t np = less(ps.size(), s.autotuning_ranges_primary), ns = less(ss.size(), s.autotuning_ranges_shadow);
    if (depth <= 1) np = less(np, other_a.ranges), ns = less(ns, other_b.ranges);
    const bool comparable = !s.alignment.sampled && m.shadow_side.stats.report.end == ReadEnd::kComplete;
    if (comparable && np != ns && (np > 1 || ns > 1)) {
      DivergenceReason r{"step_count", "", ""};
      r.text = "the primary ran " + std::to_string(np) + " top-level ranges (steps) with target launches, the shadow " +
               std::to_string(ns);
      std::vector<std::string> left_out;
      if (s.autotuning_ranges_primary || s.autotuning_ranges_shadow)
        left_out.push_back("ranges that hold only an autotuner's launches");
      if (depth <= 1 && (other_a.ranges || other_b.ranges)) left_out.push_back("ranges of other work, below");
      for (size_t i = 0; i < left_out.size(); ++i)
        r.text += (i ? " or " : " (not counting ") + left_out[i] + (i + 1 == left_out.size() ? ")" : "");
      r.remedy = serving ? "give every request a fixed max_tokens (no early stop) and the same requests to both"
                         : "run a fixed number of steps (iterations) in both";
      m.reasons.push_back(std::move(r));
    }
  }
  // Extra and missing work: whole ranges of other work by name, then launches at a place the other side ran.
  const uint64_t plain_inserted = inserted > other_kernels ? less(inserted, other_b.launches) : 0;
  std::vector<std::string> extra;
  if (other_b.ranges) extra.push_back(other_said(other_b, false));
  if (first_inserted && plain_inserted) {
    extra.push_back("the shadow made launches the primary did not make at that place (first " +
                    At(first_inserted->shadow_launches ? first_inserted->shadow_from : first_inserted->primary_from) +
                    ", " + std::to_string(less(first_inserted->inserted, first_inserted->autotuning_shadow)) +
                    " launches)");
  }
  if (!extra.empty()) {
    DivergenceReason r{"extra_work", "", ""};
    for (size_t i = 0; i < extra.size(); ++i) r.text += (i ? "; " : "") + extra[i];
    m.reasons.push_back(std::move(r));
  }
  std::vector<std::string> missing;
  if (other_a.ranges) missing.push_back(other_said(other_a, true));
  if (first_deleted && deleted > other_a.launches) {
    missing.push_back("the primary made " + std::to_string(deleted - other_a.launches) +
                      " launches the shadow did not make at that place (first at the primary's " +
                      (first_deleted->primary_from.empty() ? "launches outside any range"
                                                           : "\"" + first_deleted->primary_from + "\"") +
                      ")");
  }
  if (!missing.empty()) {
    DivergenceReason r{"missing_work", "", ""};
    for (size_t i = 0; i < missing.size(); ++i) r.text += (i ? "; " : "") + missing[i];
    m.reasons.push_back(std::move(r));
  }
  if (m.shadow_side.stats.report.end != ReadEnd::kComplete && !m.shadow.empty()) {
    m.reasons.push_back({"shadow_cut",
                         "the shadow's trace ends early (no summary: the process was stopped): the primary's later "
                         "launches have no counterpart and are not counted as divergence",
                         "let the shadow finish (a longer --timeout, or fewer steps)"});
  }
}

}  // namespace twinscope::join
