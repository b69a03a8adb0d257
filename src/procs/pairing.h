// Pairs the processes of a primary run with those of its shadow run (docs/processes.md, "Pairing"):
// by launcher rank, else by position in the process tree. Pure logic over process descriptions;
// CUDA-free, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace twinscope::procs {

// One traced process of a run, as its trace header describes it.
struct ProcessRef {
  std::string path;  // its trace file
  uint32_t pid = 0, ppid = 0;
  std::vector<uint32_t> ancestors;    // parent first, as far as the header names them
  bool top = false;                   // the process the command started
  std::optional<int64_t> rank;        // from the launcher's environment (RANK, SLURM_PROCID, ...)
  std::optional<int64_t> local_rank;  // LOCAL_RANK and the like
  std::string host;                   // the host it ran on ("" where unknown)
  std::vector<std::string> command_line;
  uint64_t start_realtime_ns = 0;  // when its trace header was built: shown, never used to pair
  std::vector<uint32_t> devices;   // device ordinals it used (its last status block), where known
  uint64_t gpu_work = 0;           // launch records (primary) or traced launches (shadow)
};

// How two processes were paired.
enum class PairRule : uint8_t { kRank, kTree, kCommand, kOnly, kUser };
const char* PairRuleName(PairRule r);

struct ProcessPair {
  size_t primary = 0, shadow = 0;  // indices into the two lists
  PairRule rule = PairRule::kTree;
  std::string label;  // "rank 1", "python3 #2", for views and folder names
};

struct PairingOptions {
  // User overrides, "PRIMARY_PID=SHADOW_PID" each (twinscope join --pair); they win over every rule.
  std::vector<std::pair<uint32_t, uint32_t>> by_pid;
  bool ignore_ranks = false;  // --pair-by tree
};

struct Pairing {
  std::vector<ProcessPair> pairs;                            // primary's order
  std::vector<size_t> primary_unpaired, shadow_unpaired;     // with GPU work, no counterpart
  size_t primary_without_work = 0, shadow_without_work = 0;  // skipped: no GPU work
  std::vector<std::string> notes;  // one line each: overrides not found, ranks on one side only, ...
};

// Processes without GPU work are left out (counted). Hosts are mapped first: equal names, else (as
// many hosts on each side) by sorted name, else ignored (a note each). Then, in order: the user's pid
// pairs (a pid held by several processes: the first free holder, on the mapped host where known);
// equal ranks (where both sides have ranks, each rank once); the process tree: same command line
// (numbers in it, such as file descriptors and ports, ignored), same depth below the run's top, same
// mapped host, same ordinal in a stable order (rank, local rank, device, then pid: the launcher's
// spawn order, never the race of when each trace header was built); then same command line at any
// depth; then, when one process is left on each side, those two (kOnly). A group with unequal
// numbers on the two sides pairs by best match (each process's share of the group's launches, its
// local rank; order kept) with a note naming the ones left. What is left is unpaired.
Pairing PairProcesses(const std::vector<ProcessRef>& primary, const std::vector<ProcessRef>& shadow,
                      const PairingOptions& options = {});

// The command line with runs of digits replaced by '#', joined by spaces (the pairing's signature).
std::string CommandSignature(const std::vector<std::string>& command_line);

// A short name for a process: its program's base name ("python3"), and for Python its script
// ("python3 train.py") or module ("python3 -m vllm.entrypoints..."), at most 48 characters.
std::string ShortName(const std::vector<std::string>& command_line);

}  // namespace twinscope::procs
