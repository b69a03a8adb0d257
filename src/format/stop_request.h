// The stop request (docs/trace-format.md, "Stop request"): before the CLI
// stops a server it creates <TWINSCOPE_CONTROL_DIR>/stop; each collector's
// flush/status thread notices it (a stat at most every 100 ms), writes a
// SUMMARY marked "at_stop_request" and creates <dir>/flushed-<pid>. Nothing
// in the program's signal handling changes. CUDA-free; one thread per object.
#pragma once

#include <chrono>
#include <string>

namespace twinscope {

class StopRequest {
 public:
  // From TWINSCOPE_CONTROL_DIR (inactive when unset).
  StopRequest();
  explicit StopRequest(std::string dir) : dir_(std::move(dir)) {}

  bool active() const { return !dir_.empty(); }
  // True once: the first call that finds <dir>/stop. Stats at most every 100 ms.
  bool Due();
  // Creates <dir>/flushed-<pid> (its content: "ok" or "late", whether the summary reached the disk in time).
  void Acknowledge(bool on_disk) const;

  // The file names the CLI creates and waits for.
  static std::string StopFile(const std::string& dir) { return dir + "/stop"; }
  static std::string FlushedFile(const std::string& dir, int pid) { return dir + "/flushed-" + std::to_string(pid); }

 private:
  std::string dir_;
  bool done_ = false;
  std::chrono::steady_clock::time_point next_{};
};

}  // namespace twinscope
