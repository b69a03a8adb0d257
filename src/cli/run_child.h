// Runs the watched program for `twinscope record` and `twinscope blocks`:
// finds the collector library, starts the command with the injection
// environment, forwards SIGINT/SIGTERM/SIGHUP, shows a live status line and
// returns the program's exit status. Called on the CLI's main thread only.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace twinscope::cli {

// Folder of the running executable (from /proc/self/exe), "" if unknown.
std::string ExecutableDir();

// Absolute path of collector library `file_name` (e.g. "libtwinscope_cupti.so"),
// looked for in $TWINSCOPE_LIB_DIR, <exe_dir>/../lib and <exe_dir>, in that
// order. The error names every place looked.
StatusOr<std::string> FindCollectorLibrary(const std::string& file_name);

// The site-packages folder of the Python wheel this twinscope came from
// (<exe_dir> is site-packages/twinscope/bin beside the package's __init__.py),
// where pip put the wheel's dependencies (nvidia-cuda-cupti: nvidia/cu13/lib);
// "" for any other install or the build tree (docs/python.md).
std::string WheelSiteDir();

struct ChildOptions {
  std::vector<std::string> argv;                         // argv[0] is looked up in PATH unless it contains '/'
  std::vector<std::pair<std::string, std::string>> env;  // set (overriding) in the child
  // Live status on stderr (caller decides, typically isatty(2)): elapsed time
  // and the size and growth rate of the run at `watch_file` (a trace file and
  // its .d/ folder, or a folder: format/trace_tail.h RunTail).
  bool live_status = false;
  std::string watch_file;
  std::string status_label = "recording";
};

struct ChildResult {
  bool started = false;  // exec succeeded
  int exit_code = 0;     // the program's code, 128+signal if killed, 127/126 if it could not run
  int term_signal = 0;   // signal that killed the program, 0 if it exited
  std::string error;     // why it could not run (started == false)
  double elapsed_s = 0;
};

// Runs the command, in a process group of its own, and waits for it. While it
// runs, SIGINT/SIGTERM/SIGHUP sent to twinscope are forwarded to that group,
// so they reach every process of the program's tree; the exit code is the
// command's own (the top process).
ChildResult RunChild(const ChildOptions& options);

// "12.3 MB" style size.
std::string HumanBytes(double bytes);

}  // namespace twinscope::cli
