// Who a traced process is (docs/trace-format.md, "process"): the header's
// "process" object (pid, parent chain, host, command line, top, rank from a
// launcher) and the per-process trace file name <comm>-<pid>.tsc.
// CUDA-free; called once per process at collector start.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace twinscope {

// The "process" object of the header. `top_pid_env` is the value of
// TWINSCOPE_TOP_PID (empty if unset).
nlohmann::json ProcessObject();

// The pid chain above `pid` from /proc/<pid>/stat: parent first, at most
// `max` entries, stopping after pid 1 or after `stop_at` (included).
std::vector<int> AncestorPids(int pid, int stop_at, size_t max = 16);

// The process's short name (/proc/self/comm, else argv[0]'s base name),
// reduced to [A-Za-z0-9._-] ("process" if nothing is left).
std::string ProcessShortName();

// `name` with every character outside [A-Za-z0-9._-] replaced by '_'.
std::string SanitizeFileName(const std::string& name);

}  // namespace twinscope
