// The same autotune caches for both twins (docs/join.md, "Why they diverged"):
// an autotuner that times candidates in each run can choose other kernels in
// the slower shadow; pointing both runs at one cache, the primary first, lets
// the shadow reuse the primary's choices. CUDA-free.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace twinscope::twin {

struct AutotuneEnv {
  std::vector<std::pair<std::string, std::string>> env;  // to add to both sides' environments
  std::string note;                                      // one line for the user: what was set, what kept
  nlohmann::json json;  // for twin.json: {"dir", "set": {..}, "kept": [..], "warm": {..}, "warm_at_start", "at_once"}

  // Adds env to both sides' variables, json to *record, and says the note on stderr.
  void Apply(std::vector<std::pair<std::string, std::string>>* primary,
             std::vector<std::pair<std::string, std::string>>* shadow, nlohmann::json* record) const;
};

// Variables under `out_dir`/autotune-cache (made here): XLA_FLAGS gets
// --xla_gpu_per_fusion_autotune_cache_dir=DIR/xla appended unless it already
// names that flag; TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR are set unless
// the user set them, and TRITON_CACHE_AUTOTUNING=1 (Triton keeps @triton.autotune's
// choices in the cache, so the shadow runs the primary's config) unless the user set
// it. The cache folder survives reruns into the same `out_dir` (the same choices
// again); json "warm" says per cache whether it held entries at the start, and the
// note says so. `lookup` reads the current environment (getenv by
// default). A value the user set is never overridden. `at_once`: both sides start together (`twin --concurrent`,
// `twin --serve`), so the shadow reuses only what the primary has written by the time it tunes the same
// kernel; the note says so.
AutotuneEnv ShareAutotuneCaches(const std::string& out_dir,
                                const std::function<const char*(const char*)>& lookup = nullptr, bool at_once = false);

}  // namespace twinscope::twin
