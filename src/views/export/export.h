// Exporters of twinscope traces: Chrome trace-event JSON (opens in Perfetto UI
// and chrome://tracing) and SQLite (docs/sqlite-schema.md). Both stream the
// trace with a TraceReader and never hold all records in memory. Each export
// call is self-contained and single-threaded.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/run_dir.h"
#include "twinscope/trace_reader.h"

namespace twinscope::exporters {

struct ExportResult {
  ReadReport report;     // how the read of the trace ended (damage included)
  uint64_t records = 0;  // records read
  uint64_t written = 0;  // chrome: trace events written; sqlite: rows inserted
  // Records that could not be placed on a timeline (invalid timestamps,
  // unclosed NVTX ranges exported as instants are not counted here).
  uint64_t skipped_invalid = 0;
  std::vector<std::string> warnings;  // one line each, for the user
};

// Writes `trace` as Chrome trace-event JSON to `out`. Reads the trace twice:
// once for the time base, tracks and flow counts, once to write events.
// Fails only if the trace cannot be opened or `out` cannot be written; a
// damaged trace exports what was readable and says so in the result.
StatusOr<ExportResult> ExportChrome(const std::string& trace, const std::string& out);

// Writes `trace` into a new SQLite database `out` (replaced if it exists).
// Fails with "built without SQLite" when TWINSCOPE_WITH_SQLITE was off.
StatusOr<ExportResult> ExportSqlite(const std::string& trace, const std::string& out);
bool SqliteAvailable();

// One traced process of a run (docs/processes.md, "Every process in one view").
struct RunProcess {
  std::string trace;  // its trace file
  std::string label;  // the process group's name: "python train.py (pid 12, rank 1, host a)"
  std::string role;   // the header's role ("primary", "shadow")
  std::string side;   // the run side ("primary"/"shadow" of a twin folder, else "")
  int64_t pid = 0, ppid = 0;
  // The id of its process group in a merged timeline: its pid, unless another process of the run
  // has that pid too (two hosts, or a pid reused): then host ordinal (or, on one host, its index)
  // x 10000000 + pid.
  int64_t group_pid = 0;
  std::string host;
  std::string command;  // the command line, joined by spaces
  std::optional<int64_t> rank, local_rank, world_size;
  bool top = false;
  uint64_t start_realtime_ns = 0;
  // The trace's clock to CLOCK_REALTIME (its header's clock pair): added to
  // every timestamp on the merged timeline. 0 with `aligned` false: no pair.
  int64_t to_realtime_ns = 0;
  bool aligned = false;
  // What it launched and lost (from the listing's counters and chunk headers).
  uint64_t launches = 0, kernel_records = 0, traced_launches = 0, block_records = 0;
  uint64_t kernel_records_missing = 0, cupti_dropped = 0, writer_dropped = 0;
  std::string end;  // the listing's end: "complete", "no-summary", "truncated", ...
};

// The processes of a run side (run_dir.h) with GPU work, in listing order,
// with their labels and clock alignment. *without_work (may be null) counts
// the traces left out for having no GPU work (a launcher, a process that
// only initialized CUDA); *unreadable (may be null) gets the error of each
// trace left out because its header cannot be read.
std::vector<RunProcess> RunProcesses(const RunSide& side, size_t* without_work,
                                     std::vector<std::string>* unreadable = nullptr);

// How a merged view placed the processes on one clock, one line: "CLOCK_REALTIME
// through each trace's clock pair (hosts a, b)" or why it could not.
std::string AlignmentText(const std::vector<RunProcess>& processes);

// Every process of a run in ONE Chrome trace-event JSON file: one process
// group (Chrome pid) per traced process holding its CPU threads, its GPU
// streams and (shadow) its blocks by SM; every timestamp moved onto
// CLOCK_REALTIME through its trace's clock pair. otherData.twinscope_run says
// which processes, hosts and alignment were used.
StatusOr<ExportResult> ExportChromeRun(const std::vector<RunProcess>& processes, const std::string& out);

// Every process of a run in ONE SQLite database: a `process` table and a
// `process_id` column in every per-process table (docs/sqlite-schema.md, "Runs
// of several processes"). Times stay as recorded; process.to_realtime_ns aligns them.
StatusOr<ExportResult> ExportSqliteRun(const std::vector<RunProcess>& processes, const std::string& out);
// The error of a SQLite export in a build without SQLite: rebuild with it, or
// `instead` ("" or advice ending in ", or ").
Status SqliteMissing(const std::string& instead);

}  // namespace twinscope::exporters
