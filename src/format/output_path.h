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

// mkdir -p; false with *error set if a folder cannot be made.
bool MakeFolders(const std::string& dir, std::string* error);

}  // namespace twinscope
