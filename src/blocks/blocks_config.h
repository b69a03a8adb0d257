// Configuration of the block probe, read from the environment at
// InitializeInjection through the settings table (base/settings.h). The CLI
// sets the variables it has flags for; the TWINSCOPE_BLOCKS_* tuning
// variables are read only here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/env_names.h"
#include "base/status.h"
#include "blocks/kernel_selector.h"
#include "blocks/sampler.h"

namespace twinscope::blocks {

// The TWINSCOPE_BLOCKS_* tuning variables (TWINSCOPE_BLOCKS_RING, _MAX_SLOTS,
// _DEVICE_MB, _DECODE_MB, _NAIVE, _GRAPH_DIAG, _TOGGLE_AT) are in the settings
// table with the rest (base/settings_table.h; constants twinscope::env::k*).

// How target modules are patched. kAlways: at load, for good (every launch of
// their kernels pays the patch call). kToggle: only around sampled launches
// (docs/block-probe.md, "Patch modes").
enum class PatchMode { kAlways, kToggle };
// Where toggle mode may patch and unpatch, besides the program's syncs:
// kEnd at the end of every launch, kDefaultStreamEnd at the end of launches
// on a default stream only, kSync at syncs only (TWINSCOPE_BLOCKS_TOGGLE_AT
// end | default | sync).
enum class ToggleAt { kEnd, kDefaultStreamEnd, kSync };
const char* PatchModeName(PatchMode m);

struct BlocksConfig {
  std::string output;         // trace path
  std::string patterns_spec;  // TWINSCOPE_KERNELS as given
  std::vector<KernelPattern> patterns;
  SamplingOptions sampling;
  uint32_t ring = 512;
  uint32_t max_slots = 1u << 20;
  uint64_t max_device_bytes = 64ull << 20;  // each context's arena
  uint64_t max_buffered_bytes = 64ull << 20;
  uint64_t max_pending_decode_bytes = 256ull << 20;  // past it, a drain waits for the decoder thread
  bool naive = false;
  bool graph_log = false;                // kGraphDiag "log"
  bool call_log = false;                 // kGraphDiag "calls": every callback and blocking call (g_call_log)
  PatchMode patch = PatchMode::kAlways;  // from TWINSCOPE_BLOCKS_PATCH; default toggle when sampling
  ToggleAt toggle_at = ToggleAt::kDefaultStreamEnd;
};

// Reads the environment. A bad value is warned about and its default used
// (base/settings.h); errors: a kernel pattern that does not parse, and
// TWINSCOPE_BUDGET with TWINSCOPE_BLOCKS_PATCH=always.
StatusOr<BlocksConfig> ConfigFromEnv();

}  // namespace twinscope::blocks
