// Configuration of the block probe, read from the environment at
// InitializeInjection. The CLI sets the variables of src/base/env_names.h;
// the TWINSCOPE_BLOCKS_* tuning variables below are read only here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "blocks/kernel_selector.h"
#include "blocks/sampler.h"

namespace twinscope::blocks {

namespace env {
inline constexpr char kRing[] = "TWINSCOPE_BLOCKS_RING";           // traced launches in flight before a forced drain
inline constexpr char kMaxSlots[] = "TWINSCOPE_BLOCKS_MAX_SLOTS";  // blocks recorded per launch at most
inline constexpr char kDeviceMb[] = "TWINSCOPE_BLOCKS_DEVICE_MB";  // device arena per context, MiB
inline constexpr char kDecodeMb[] = "TWINSCOPE_BLOCKS_DECODE_MB";  // copies waiting for the decoder, MiB
// 1: the naive probe, as a benchmark baseline only: patch EVERY module and
// copy each traced launch's buffer right after the launch (a sync per launch).
inline constexpr char kNaive[] = "TWINSCOPE_BLOCKS_NAIVE";
// Diagnostics for CUDA-graph kernel nodes (tests/gpu/graph_nodes.cu): "log"
// prints a line per kernel-node callback and per table entry handed out;
// "calls" a line per callback and per blocking Sanitizer call (hangs).
inline constexpr char kGraphDiag[] = "TWINSCOPE_BLOCKS_GRAPH_DIAG";
inline constexpr char kToggleAt[] = "TWINSCOPE_BLOCKS_TOGGLE_AT";
}  // namespace env

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

// Reads and validates the environment. Errors name the variable and the value.
StatusOr<BlocksConfig> ConfigFromEnv();

}  // namespace twinscope::blocks
