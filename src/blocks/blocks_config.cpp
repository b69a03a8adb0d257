#include "blocks/blocks_config.h"

#include <unistd.h>

#include <cstdlib>

#include "base/env_names.h"
#include "base/log.h"

namespace twinscope::blocks {
namespace {

StatusOr<uint64_t> Positive(const char* name, long long fallback, bool allow_zero) {
  long long v = EnvInt(name, fallback);
  if (v < 0 || (!allow_zero && v == 0))
    return Status::Error(std::string(name) + "=" + std::to_string(v) + " must be " + (allow_zero ? ">= 0" : "> 0"));
  return static_cast<uint64_t>(v);
}

// A non-negative decimal number (e.g. "2.5"), or `fallback` if unset.
StatusOr<double> NonNegativeReal(const char* name, double fallback) {
  const std::string text = EnvString(name);
  if (text.empty()) return fallback;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(v >= 0) || v > 1e12)
    return Status::Error(std::string(name) + "=" + text + " must be a number >= 0");
  return v;
}

}  // namespace

const char* PatchModeName(PatchMode m) { return m == PatchMode::kToggle ? "toggle" : "always"; }

StatusOr<BlocksConfig> ConfigFromEnv() {
  BlocksConfig c;
  c.output = EnvString(twinscope::env::kOutput, "twinscope-blocks-" + std::to_string(getpid()) + ".tsc");
  c.patterns_spec = EnvString(twinscope::env::kKernelPatterns);
  auto patterns = ParsePatterns(c.patterns_spec);
  if (!patterns.ok())
    return Status::Error(std::string(twinscope::env::kKernelPatterns) + ": " + patterns.status().message());
  c.patterns = std::move(*patterns);

  auto every = Positive(twinscope::env::kEvery, 1, false);
  if (!every.ok()) return every.status();
  auto max_launches = Positive(twinscope::env::kMaxLaunches, 0, true);
  if (!max_launches.ok()) return max_launches.status();
  auto ring = Positive(env::kRing, c.ring, false);
  if (!ring.ok()) return ring.status();
  auto slots = Positive(env::kMaxSlots, c.max_slots, false);
  if (!slots.ok()) return slots.status();
  auto device_mb = Positive(env::kDeviceMb, static_cast<long long>(c.max_device_bytes >> 20), false);
  if (!device_mb.ok()) return device_mb.status();
  auto decode_mb = Positive(env::kDecodeMb, static_cast<long long>(c.max_pending_decode_bytes >> 20), false);
  if (!decode_mb.ok()) return decode_mb.status();
  auto buffered_mb =
      Positive(twinscope::env::kMaxBufferedMb, static_cast<long long>(c.max_buffered_bytes >> 20), false);
  if (!buffered_mb.ok()) return buffered_mb.status();

  auto per_second = NonNegativeReal(twinscope::env::kPerSecond, 0);
  if (!per_second.ok()) return per_second.status();
  auto budget = NonNegativeReal(twinscope::env::kBudget, 0);
  if (!budget.ok()) return budget.status();
  if (*budget > 100) return Status::Error(std::string(twinscope::env::kBudget) + " must be a percentage <= 100");

  c.sampling.every = *every;
  c.sampling.max_launches = *max_launches;
  c.sampling.per_second = *per_second;
  c.sampling.budget_pct = *budget;
  c.ring = static_cast<uint32_t>(std::min<uint64_t>(*ring, 1u << 16));
  c.max_slots = static_cast<uint32_t>(std::min<uint64_t>(*slots, 0xffffffffu));
  c.max_device_bytes = *device_mb << 20;
  c.max_buffered_bytes = *buffered_mb << 20;
  c.max_pending_decode_bytes = *decode_mb << 20;
  c.naive = EnvInt(env::kNaive, 0) != 0;
  const std::string diag = EnvString(env::kGraphDiag);
  c.graph_log = diag.find("log") != std::string::npos;
  c.call_log = diag.find("calls") != std::string::npos;

  const std::string at = EnvString(env::kToggleAt, "default");
  if (at == "end") {
    c.toggle_at = ToggleAt::kEnd;
  } else if (at == "default") {
    c.toggle_at = ToggleAt::kDefaultStreamEnd;
  } else if (at == "sync") {
    c.toggle_at = ToggleAt::kSync;
  } else {
    return Status::Error(std::string(env::kToggleAt) + "=" + at + " must be \"end\", \"default\" or \"sync\"");
  }

  // Toggling pays two syncs and a re-patch per sample: worth it only when
  // launches are sampled out; tracing every launch keeps modules patched.
  const std::string patch = EnvString(twinscope::env::kBlocksPatch);
  if (patch.empty()) {
    c.patch = c.sampling.any() && !c.naive ? PatchMode::kToggle : PatchMode::kAlways;
  } else if (patch == "always") {
    c.patch = PatchMode::kAlways;
  } else if (patch == "toggle") {
    c.patch = PatchMode::kToggle;
  } else {
    return Status::Error(std::string(twinscope::env::kBlocksPatch) + "=" + patch + " must be \"always\" or \"toggle\"");
  }
  if (c.naive) c.patch = PatchMode::kAlways;  // the naive baseline patches everything for good
  if (c.sampling.budget_pct > 0 && c.patch == PatchMode::kAlways)
    return Status::Error(std::string(twinscope::env::kBudget) + " needs " + twinscope::env::kBlocksPatch +
                         "=toggle: with modules patched for good the probe cannot lower its cost by sampling");
  return c;
}

}  // namespace twinscope::blocks
