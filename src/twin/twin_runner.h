// `twinscope twin`: runs one command twice, a primary under the CUPTI
// collector and a shadow under the block probe, sequentially (primary alone
// first: timings undisturbed) or concurrently, with a live progress line.
// CUDA-free: the collector libraries are given by path. Main thread only.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "twin/child_group.h"

namespace twinscope::twin {

using EnvList = std::vector<std::pair<std::string, std::string>>;

struct TwinRequest {
  std::vector<std::string> command;
  std::string out_dir;                     // holds primary.tsc and shadow.tsc
  std::string primary_library;             // absolute path of libtwinscope_cupti.so
  std::string shadow_library;              // absolute path of libtwinscope_blocks.so
  EnvList primary_env, shadow_env;         // TWINSCOPE_* settings of each side
  bool concurrent = false;
  int shadow_device = -1;                  // >= 0: CUDA_VISIBLE_DEVICES of the shadow
  bool progress = false;                   // live line on stderr
};

struct TwinOutcome {
  std::string primary_trace, shadow_trace;
  ChildExit primary, shadow;
  bool shadow_skipped = false;  // sequential run stopped by a signal before the shadow started
  std::string error;            // set if nothing could be run (e.g. the folder cannot be made)
  nlohmann::json autotune;      // the shared autotune caches (twin/autotune_env.h), for twin.json
};

// The environment a side's child gets: injection paths, output, role.
EnvList SideEnv(const std::string& library, const std::string& output, const std::string& role, const EnvList& extra);

TwinOutcome RunTwin(const TwinRequest& request);

// mkdir -p; false with *error set if a folder cannot be made.
bool MakeDirs(const std::string& dir, std::string* error);

}  // namespace twinscope::twin
