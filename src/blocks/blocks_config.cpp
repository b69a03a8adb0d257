// The block probe's configuration from the environment (blocks_config.h).
#include "blocks/blocks_config.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "base/env_names.h"
#include "base/log.h"
#include "base/settings.h"

namespace twinscope::blocks {

const char* PatchModeName(PatchMode m) { return m == PatchMode::kToggle ? "toggle" : "always"; }

StatusOr<BlocksConfig> ConfigFromEnv() {
  settings::WarnUnknown(environ);  // a misspelt TWINSCOPE_* variable is named, with the closest known one
  BlocksConfig c;
  c.output = EnvString(twinscope::env::kOutput, "twinscope-blocks-" + std::to_string(getpid()) + ".tsc");
  // Every other setting through the one table and policy (base/settings.h): a bad value is warned about
  // once and its default used. What stays an error (the probe then traces nothing and says why): a
  // pattern that does not parse, and settings that contradict each other.
  c.patterns_spec = settings::Text(twinscope::env::kKernelPatterns);
  auto patterns = ParsePatterns(c.patterns_spec);
  if (!patterns.ok())
    return Status::Error(std::string(twinscope::env::kKernelPatterns) + ": " + patterns.status().message());
  c.patterns = std::move(*patterns);

  c.sampling.every = static_cast<uint64_t>(settings::Int(twinscope::env::kEvery));
  c.sampling.max_launches = static_cast<uint64_t>(settings::Int(twinscope::env::kMaxLaunches));
  c.sampling.per_second = settings::Real(twinscope::env::kPerSecond);
  c.sampling.budget_pct = settings::Real(twinscope::env::kBudget);
  c.ring = static_cast<uint32_t>(settings::Int(env::kRing));
  c.max_slots = static_cast<uint32_t>(settings::Int(env::kMaxSlots));
  c.max_device_bytes = static_cast<uint64_t>(settings::Int(env::kDeviceMb)) << 20;
  c.max_buffered_bytes = static_cast<uint64_t>(settings::Int(twinscope::env::kMaxBufferedMb)) << 20;
  c.max_pending_decode_bytes = static_cast<uint64_t>(settings::Int(env::kDecodeMb)) << 20;
  c.naive = settings::Flag(env::kNaive);
  const std::vector<std::string> diag = settings::List(env::kGraphDiag);
  c.graph_log = std::find(diag.begin(), diag.end(), "log") != diag.end();
  c.call_log = std::find(diag.begin(), diag.end(), "calls") != diag.end();

  const std::string at = settings::Choice(env::kToggleAt);
  c.toggle_at = at == "end" ? ToggleAt::kEnd : at == "sync" ? ToggleAt::kSync : ToggleAt::kDefaultStreamEnd;

  // Toggling pays two syncs and a re-patch per sample: worth it only when
  // launches are sampled out; tracing every launch keeps modules patched.
  const std::string patch = settings::Choice(twinscope::env::kBlocksPatch);
  if (patch.empty()) {
    c.patch = c.sampling.any() && !c.naive ? PatchMode::kToggle : PatchMode::kAlways;
  } else {
    c.patch = patch == "toggle" ? PatchMode::kToggle : PatchMode::kAlways;
  }
  if (c.naive) c.patch = PatchMode::kAlways;  // the naive baseline patches everything for good
  if (c.sampling.budget_pct > 0 && c.patch == PatchMode::kAlways)
    return Status::Error(std::string(twinscope::env::kBudget) + " needs " + twinscope::env::kBlocksPatch +
                         "=toggle: with modules patched for good the probe cannot lower its cost by sampling");
  return c;
}

}  // namespace twinscope::blocks
