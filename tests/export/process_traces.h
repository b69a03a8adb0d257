// Traces of the processes of a run (several processes, several hosts) for the
// merged views' tests, written with the real TraceWriter: each process's
// header names its pid, host, command line, rank and clock pair; its kernels
// are given in its own CUPTI clock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace twinscope::testing {

struct ProcessTraceSpec {
  int pid = 100;
  int ppid = 1;
  std::string host = "hosta";
  std::vector<std::string> command = {"python3", "train.py"};
  std::optional<int> rank;
  bool top = false;
  uint64_t start_realtime_ns = 0;
  // The header's clock pair: CUPTI clock `cupti_ns` was read with CLOCK_REALTIME `realtime_ns`.
  bool clock_pair = true;
  int64_t cupti_ns = 0, realtime_ns = 0;
  // Kernels (start, end) in the CUPTI clock: each with its API call (start - 500 .. start - 100, on
  // thread `pid`, same correlation id) and a launch record (cpu_ns start - 400).
  std::vector<std::pair<uint64_t, uint64_t>> kernels;
  std::string kernel = "work";
  uint64_t memcpys = 0;  // that many memcpys after the kernels, 100 ns each
};

// Writes `spec` to `path` (with a summary: launches_seen = kernel_records = kernels).
void WriteProcessTrace(const std::string& path, const ProcessTraceSpec& spec);

}  // namespace twinscope::testing
