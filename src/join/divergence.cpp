// The reasons the twins diverged: autotuning, batching, step counts, extra or missing work.
#include "join/divergence.h"

#include <algorithm>
#include <set>
#include <unordered_set>

#include "launchkey/launch_key.h"

namespace twinscope::join {
namespace {

bool Has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

std::string Where(const DivergenceRegion& r) {
  const std::string& a = r.shadow_launches ? r.shadow_from : r.primary_from;
  return a.empty() ? "outside any range" : "at " + a;
}

}  // namespace

void ExplainDivergence(JoinedModel& m) {
  m.reasons.clear();
  const Summary& s = m.summary;
  // Which frameworks the names show (kernels and range paths of both sides).
  bool xla = false, inductor = false, triton = false, cudnn = false, serving = m.requests.present;
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
        serving |= Has(path, "prefill step ") || Has(path, "decode step ");
      }
    };
    for (const auto& p : m.primary) look(p.kernel, p.path);
    for (const auto& x : m.shadow) look(x.kernel, x.path);
  }
  uint64_t other_kernels = 0, other_shape = 0, inserted = 0, deleted = 0, regions_kernels = 0, regions_shape = 0;
  const DivergenceRegion *first_kernels = nullptr, *first_shape = nullptr, *first_inserted = nullptr,
                         *first_deleted = nullptr;
  for (const auto& r : m.divergences) {
    if (r.other_kernels)
      other_kernels += r.other_kernels, ++regions_kernels, first_kernels = first_kernels ? first_kernels : &r;
    if (r.other_shape) other_shape += r.other_shape, ++regions_shape, first_shape = first_shape ? first_shape : &r;
    if (r.inserted > r.other_kernels || (r.inserted && !r.other_kernels))
      first_inserted = first_inserted ? first_inserted : &r;
    if (r.deleted) first_deleted = first_deleted ? first_deleted : &r;
    inserted += r.inserted, deleted += r.deleted;
  }
  if (other_kernels) {
    DivergenceReason r{"autotuning", "", ""};
    const bool early = first_kernels->first_primary * 10 <= std::max<size_t>(m.primary.size(), 1) ||
                       first_kernels->first_seq * 10 <= std::max<size_t>(m.shadow.size(), 1);
    r.text = std::to_string(other_kernels) + " launches in " + std::to_string(regions_kernels) +
             " places are of kernels the other run did not launch there (first " + Where(*first_kernels) + ")" +
             (early ? ", early in the run" : "") + ": an autotuner timed candidates and chose differently in each run";
    std::vector<std::string> how;
    if (xla)
      how.push_back(
          "XLA: give both runs one autotune cache (`twin` sets --xla_gpu_per_fusion_autotune_cache_dir; runs "
          "joined apart: XLA_FLAGS=--xla_gpu_per_fusion_autotune_cache_dir=DIR for both, the primary first)");
    if (inductor)
      how.push_back(
          "Inductor: share TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR (`twin` does), or compile without "
          "max-autotune for the comparison");
    else if (triton)
      how.push_back("Triton autotune: share TRITON_CACHE_DIR (`twin` does), or pin the kernel's config");
    if (cudnn)
      how.push_back("cuDNN: torch.backends.cudnn.benchmark = False (or deterministic algorithms) in both runs");
    if (how.empty())
      how.push_back("turn autotuning off for the comparison or share its cache between the runs (the primary first)");
    for (size_t i = 0; i < how.size(); ++i) r.remedy += (i ? "; " : "") + how[i];
    m.reasons.push_back(std::move(r));
  }
  if (other_shape) {
    DivergenceReason r{"batching", "", ""};
    r.text = std::to_string(other_shape) + " launches in " + std::to_string(regions_shape) +
             " places ran with another grid or block than the primary's launch at the same place (first " +
             Where(*first_shape) + ")";
    if (serving) {
      r.text += ": the server batched requests differently (a batch is packed by arrival, and the shadow is slower)";
      r.remedy =
          "run the shadow in lockstep with the primary (the demo server: `--follow`), or send the requests one at a "
          "time in a fixed order; otherwise compare only the exact launches";
    } else {
      r.text += ": the two runs' inputs differ (another batch, sequence length or data-dependent size)";
      r.remedy = "give both runs the same inputs, seed and batch size";
    }
    m.reasons.push_back(std::move(r));
  }
  // Same kernel and shape at the same place, under another range name: the context differs (a serving
  // step naming its batch's requests in another order or mix, or a name holding a per-run detail).
  uint64_t other_range = 0;
  const DivergenceRegion* first_range = nullptr;
  for (const auto& r : m.divergences)
    if (r.diverged > r.other_shape)
      other_range += r.diverged - r.other_shape, first_range = first_range ? first_range : &r;
  if (other_range) {
    DivergenceReason r{"context", "", ""};
    r.text = std::to_string(other_range) +
             " launches ran the same kernel with the same shape as the primary's at the same place, under another "
             "range name (first: the primary's \"" +
             first_range->primary_from + "\", the shadow's \"" + first_range->shadow_from + "\")";
    if (serving) {
      r.text += ": the server put other requests, or the same in another order, into those steps";
      r.remedy = "run the shadow in lockstep with the primary (the demo server: `--follow`)";
    } else {
      r.remedy =
          "if the names hold a per-run detail (an id, a counter, a pointer), ignore it: --normalize-range REGEX "
          "(docs/join.md)";
    }
    m.reasons.push_back(std::move(r));
  }
  // Step counts: top-level range instances with target launches on each side.
  {
    std::unordered_set<std::string> ps, ss;
    for (const auto& p : m.primary) ps.emplace(TopLevelRange(p.path));
    for (const auto& x : m.shadow) ss.emplace(TopLevelRange(x.path));
    const bool comparable = !s.alignment.sampled && m.shadow_side.stats.report.end == ReadEnd::kComplete;
    if (comparable && ps.size() != ss.size() && (ps.size() > 1 || ss.size() > 1)) {
      DivergenceReason r{"step_count", "", ""};
      r.text = "the primary ran " + std::to_string(ps.size()) +
               " top-level ranges (steps) with target launches, the shadow " + std::to_string(ss.size());
      r.remedy = serving ? "give every request a fixed max_tokens (no early stop) and the same requests to both"
                         : "run a fixed number of steps (iterations) in both";
      m.reasons.push_back(std::move(r));
    }
  }
  const uint64_t plain_inserted = inserted > other_kernels ? inserted : 0;
  if (first_inserted && plain_inserted) {
    m.reasons.push_back({"extra_work",
                         "the shadow made launches the primary did not make at that place (first " +
                             Where(*first_inserted) + ", " + std::to_string(first_inserted->inserted) + " launches)",
                         ""});
  }
  if (first_deleted && deleted) {
    m.reasons.push_back({"missing_work",
                         "the primary made " + std::to_string(deleted) +
                             " launches the shadow did not make at that place (first " + Where(*first_deleted) + ")",
                         ""});
  }
  if (m.shadow_side.stats.report.end != ReadEnd::kComplete && !m.shadow.empty()) {
    m.reasons.push_back({"shadow_cut",
                         "the shadow's trace ends early (no summary: the process was stopped): the primary's later "
                         "launches have no counterpart and are not counted as divergence",
                         "let the shadow finish (a longer --timeout, or fewer steps)"});
  }
}

}  // namespace twinscope::join
