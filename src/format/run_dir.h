// The run lister (docs/trace-format.md, "Run folders"): what a run path holds,
// per side, trace by trace, from each file's header, chunk headers and
// status blocks only (record payloads are skipped, not decompressed). A run
// path is a trace file (with its P.d/ folder of other processes' traces), a
// folder of traces, or a twin folder (primary/ and shadow/, or the older
// primary.tsc and shadow.tsc). A damaged trace is listed with its error,
// never dropped. CUDA-free; the base of stats/export/join on runs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace twinscope {

// The header's "process" object, parsed (older traces: pid and command only).
struct ProcessInfo {
  int pid = 0;
  int ppid = 0;
  std::vector<int> ancestors;  // parent first
  bool top = false;            // the process the CLI started
  std::string host;
  std::vector<std::string> command_line;
  uint64_t start_realtime_ns = 0;
  std::string name;  // short name (file name stem)
  // From a launcher's environment (RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK).
  std::optional<int64_t> rank, local_rank, world_size;
  std::string rank_source;      // the variable that gave the rank
  std::string Command() const;  // the command line joined by spaces
};

struct RunTrace {
  std::string path;
  std::string error;  // non-empty: the header cannot be read, or the file is damaged (what was read is kept)
  nlohmann::json header = nlohmann::json::object();
  ProcessInfo process;
  std::string role;  // "primary" | "shadow" | ""
  // Records on disk by type (from chunk headers).
  uint64_t kernel_records = 0, launch_records = 0, block_records = 0, memcpy_records = 0, memset_records = 0,
           records = 0, bytes = 0;
  std::string end = "complete";  // "complete" | "no-summary" | "truncated" | "corrupt" | "unreadable"
  bool has_summary = false;
  // The last summary was written at the stop request (status blocks may follow it: the process ran on
  // until it was killed; a clean exit would have written a later, final summary).
  bool summary_at_stop_request = false;
  nlohmann::json last_status = nlohmann::json::object();  // the last STATUS/SUMMARY object
  // Launches according to the counters (launches_seen, or launches_traced for a shadow), else the records.
  uint64_t Launches() const;
  // Any kernel, launch, block, memcpy or memset record, or a launch counted.
  bool gpu_work() const;
};

struct RunSide {
  std::string name;              // "primary" / "shadow" in a twin folder, "" otherwise
  std::string dir;               // where its traces are
  std::vector<RunTrace> traces;  // by start time, then pid
  size_t WithGpuWork() const;
};

struct RunListing {
  std::string path;
  bool twin = false;         // sides "primary" and "shadow"
  bool legacy = false;       // twin folder with primary.tsc / shadow.tsc
  bool single_file = false;  // path was a trace file
  std::vector<RunSide> sides;
  const RunSide* Side(const std::string& name) const;
};

// Lists `path`. Errors: the path does not exist, or is neither a trace nor a
// folder. A folder without traces is listed empty (callers say so).
StatusOr<RunListing> ListRun(const std::string& path);

// Reads one trace's summary as ListRun does.
RunTrace ScanTrace(const std::string& path);

// The side's main trace until processes are paired: the top process's trace
// if it has GPU work, else the one with the most launches. Null if no trace
// has GPU work. *why says which rule chose it.
const RunTrace* MainTrace(const RunSide& side, std::string* why);

}  // namespace twinscope
