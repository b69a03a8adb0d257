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
  std::string out_dir;              // holds primary/ and shadow/ (a trace per process each)
  std::string primary_library;      // absolute path of libtwinscope_cupti.so
  std::string shadow_library;       // absolute path of libtwinscope_blocks.so
  EnvList primary_env, shadow_env;  // TWINSCOPE_* settings of each side
  bool concurrent = false;
  int shadow_device = -1;  // >= 0: CUDA_VISIBLE_DEVICES of the shadow
  bool progress = false;   // live line on stderr
};

struct TwinOutcome {
  std::string primary_dir, shadow_dir;  // the side folders
  ChildExit primary, shadow;
  bool shadow_skipped = false;  // sequential run stopped by a signal before the shadow started
  std::string error;            // set if nothing could be run (e.g. the folder cannot be made)
  nlohmann::json autotune;      // the shared autotune caches (twin/autotune_env.h), for twin.json
};

// The environment a side's child gets: injection paths, output (the side
// folder: a trace per process), control folder (SIDE/.control, for the stop
// request), role.
EnvList SideEnv(const std::string& library, const std::string& side_dir, const std::string& role, const EnvList& extra);

// Run folder layout (docs/trace-format.md, "Run folders"): DIR/primary, DIR/shadow.
std::string SideDir(const std::string& out_dir, const std::string& side);
std::string ControlDir(const std::string& side_dir);  // SIDE/.control

// Removes what an earlier run left at `output` so it cannot pass for this
// run's: a trace file P and the traces in P.d/, or the traces in a folder
// (a path ending in '/' or an existing folder) and its .control/.
bool RemoveStaleOutput(const std::string& output, std::string* error);
// The same for a twin folder: both side folders, the older primary.tsc and
// shadow.tsc; then makes the side folders.
bool PrepareTwinFolder(const std::string& out_dir, std::string* error);

TwinOutcome RunTwin(const TwinRequest& request);

// mkdir -p; false with *error set if a folder cannot be made.
bool MakeDirs(const std::string& dir, std::string* error);

}  // namespace twinscope::twin
