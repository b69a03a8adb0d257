// Where a traced process writes its trace (docs/trace-format.md, "Run
// folders"): TWINSCOPE_OUTPUT=P names a folder (P exists as one, or ends with
// '/') that gets P/<name>-<pid>.tsc, or a file that the first process claims;
// the others write P.d/<name>-<pid>.tsc. Files are always created with
// O_EXCL: no process ever truncates another's trace.
#pragma once

#include <string>

namespace twinscope {

struct ClaimedOutput {
  int fd = -1;
  std::string path;       // the file created
  bool fallback = false;  // P was a file another process had claimed: path is in P.d/
};

// Creates the trace file for `requested` (P above) for this process (`name`
// and `pid` make the per-process name). Returns false with *error set when
// no file can be created.
bool ClaimOutput(const std::string& requested, const std::string& name, int pid, ClaimedOutput* out,
                 std::string* error);

// Before a run writes to `output` (a folder if it ends with '/' or is one, else a trace file with
// its FILE.d/), removes the traces an earlier run left there, but only this host's: several hosts
// may write one shared run folder (docs/processes.md, "Several hosts"), and one host's run must not
// delete another's traces, finished or still being written. Removed: a trace whose header names
// `host` (or no host), a file that is not a trace; a trace being created (empty, or cut inside its
// header) only once older than a minute. Kept: the traces of other hosts (*kept_other_hosts counts
// them). False with *error set when a file cannot be removed.
bool RemoveStaleTraces(const std::string& output, const std::string& host, size_t* kept_other_hosts,
                       std::string* error);

// This machine's host name, as trace headers hold it.
std::string ThisHost();

// mkdir -p; false with *error set if a folder cannot be made.
bool MakeFolders(const std::string& dir, std::string* error);

}  // namespace twinscope
