// The engine adapters' side of `twin --serve` (docs/engines.md): where the Python shim folder is, the
// environment each server gets (PYTHONPATH, TWINSCOPE_ENGINE_ADAPTER, the schedule, request trace and
// status file paths), and the adapters' status files read back for twin.json and the summary.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "twin/twin_runner.h"

namespace twinscope::twin {

struct EngineShim {
  std::string dir;    // the folder holding sitecustomize.py; "" when none was found
  std::string where;  // how it was found, or where it was looked for
};

// $TWINSCOPE_ENGINES_DIR/shim if set, else <exe_dir>/../engines/shim (the wheel), else the source tree's
// python/twinscope/engines/shim.
EngineShim FindEngineShim(const std::string& exe_dir);

struct EngineAdapterSetup {
  std::string mode = "auto";  // --engine-adapter: auto, off or an adapter's name
  std::string shim_dir;       // "" : adapters off (no shim found)
  double follow_step_timeout_s = 60;
};

// The environment of one side ("primary" or "shadow"): the shim first on PYTHONPATH (the user's after it),
// the adapter mode, the side's schedule, request trace and status file under `out_dir`; with `follow`, the
// shadow's TWINSCOPE_SCHEDULE_FOLLOW (the primary's schedule).
EnvList EngineAdapterEnv(const EngineAdapterSetup& setup, const std::string& role, const std::string& out_dir,
                         bool follow);

// out_dir/adapter-<role>.json, parsed; null when absent or not JSON.
nlohmann::json ReadAdapterStatus(const std::string& out_dir, const std::string& role);
// A line for the summary: what the side's adapter did ("no adapter status: ..." when none).
std::string DescribeAdapter(const nlohmann::json& status, const std::string& role);
// The primary recorded a schedule a shadow can be forced to follow.
bool AdapterRecorded(const nlohmann::json& primary_status);
// The warnings in a status file (its "warnings", capacity ones among them, and "errors"): one per line.
std::vector<std::string> AdapterWarnings(const nlohmann::json& status);

}  // namespace twinscope::twin
