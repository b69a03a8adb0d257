// The part `twinscope record` and `twinscope blocks` share: check the output
// path, find the collector library, run the program under it, report.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
}

namespace twinscope::cli {

struct RecordRequest {
  std::string library;                                   // collector file name, e.g. "libtwinscope_cupti.so"
  std::string output;                                    // trace path as the user gave it
  std::vector<std::pair<std::string, std::string>> env;  // TWINSCOPE_* settings
  std::vector<std::string> command;
  std::string label;  // for the live status line
};

// The environment of a primary (record, twin) for CUPTI: TWINSCOPE_CUPTI_LIBRARY
// set to the newest libcupti found (cuptilib; an explicit one wins), said on
// stderr, and the guard (src/guard) in front of LD_PRELOAD unless
// TWINSCOPE_GUARD=0, so the program's own CUPTI client is served from that
// same copy. `command` is the program (a Python interpreter is asked for its
// sys.path too).
std::vector<std::pair<std::string, std::string>> PrimaryCuptiEnv(const std::vector<std::string>& command);

// "" if `pattern` is a valid --kernel pattern (substring, or "re:" + regular
// expression), else what is wrong with it.
std::string CheckKernelPattern(const std::string& pattern);

// The block probe's sampling flags (twinscope blocks, twinscope twin), as given; 0 / "" = unset.
struct BlocksSampling {
  long long every = 0;
  long long max_launches = 0;
  double per_second = 0;
  double budget = 0;
  std::string patch;  // "always" | "toggle"
};

// Adds --every, --max-launches, --per-second, --budget and --patch to `sub`;
// `help_prefix` starts each help text (e.g. "Shadow: ").
void AddBlocksSamplingFlags(CLI::App* sub, BlocksSampling* sampling, const std::string& help_prefix);

// The block probe's environment for --kernel and the sampling flags.
std::vector<std::pair<std::string, std::string>> BlocksEnv(const std::vector<std::string>& patterns,
                                                           const BlocksSampling& sampling);

// Returns the program's exit code (128+signal if killed), 127/126 if it could
// not be started, 1 if the recording could not be set up.
int RecordCommand(const RecordRequest& request);

// Before a program runs: whether this machine has a usable NVIDIA GPU (probe/gpu_check.h, asked in a
// child process). Where it has none, says so on stderr first (`tool`: "twinscope record") with
// `then` (what the command does instead) and returns false. A check that cannot answer (it timed
// out) is said and counts as a GPU.
bool GpuUsableOrSay(const char* tool, const char* then);

// `twin` on a machine without a usable GPU: runs `command` once, plainly (no collector, no shadow),
// and returns its exit code, or 1 where it exited 0 (nothing was joined). -1 where there is a GPU
// (nothing run: the twin goes on).
int RunOnceWithoutGpu(const std::vector<std::string>& command);

}  // namespace twinscope::cli
