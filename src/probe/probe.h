// `twinscope probe`: runs each coexistence experiment (probe_experiments.h)
// in a child process of its own (twinscope_probe_child), collects what each
// API returned and how much data each tool got, and says whether one process
// can hold CUPTI and the Compute Sanitizer together on this stack, and
// whether two CUPTI clients can (CUPTI 13.5's multi-subscriber mode).
// CUDA-free (it only starts the child). Not thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace twinscope::probe {

struct ProbeOptions {
  std::string child_path;  // twinscope_probe_child
  int launches = 10;
  int timeout_s = 60;             // per experiment
  std::vector<std::string> only;  // experiment ids; empty = all
  std::string cupti_library;      // the libcupti the children use (preloaded); empty = the one they link
};

struct StepResult {
  std::string call;
  int code = 0;
  std::string name;
};

struct ExperimentResult {
  std::string id;
  std::string order;
  bool uses_sanitizer = false;
  bool uses_cupti = false;
  bool two_cupti_clients = false;
  bool ran = false;     // the child printed a result after its launches
  std::string failure;  // why not (crash, timeout, bad output), or a launch error
  std::vector<StepResult> steps;
  int64_t cupti_kernel_records = -1;
  int64_t cupti_launch_callbacks = -1;
  int64_t cupti2_kernel_records = -1;  // the second CUPTI client (two_cupti_clients)
  int64_t cupti2_launch_callbacks = -1;
  int64_t sanitizer_launch_callbacks = -1;
  int launches = 0;
  std::string cupti_library;  // as the child saw it
  uint32_t cupti_version = 0;
  std::string missing_library;  // the library the child could not load (the loader's message), if so

  // Data arrived for every launch.
  bool CuptiGotData() const;
  bool Cupti2GotData() const;
  bool SanitizerGotData() const;
};

struct ProbeReport {
  bool gpu = true;
  std::string no_gpu_reason;
  std::vector<ExperimentResult> results;
  bool both_in_one_process = false;  // some order gave both tools data for every launch
  std::string summary;               // one line
  std::string cupti_library;         // the libcupti the children used, and its version
  uint32_t cupti_version = 0;
  bool cupti_clients_stack = false;  // two multi-subscriber clients both got data for every launch
  std::string cupti_summary;         // one line; empty if no two-client experiment ran
  bool all_ran = false;              // every experiment ran to the end
  std::string missing_library;       // a library the children could not load (then none ran)
  std::string sanitizer_line;        // which Sanitizer API the child loads, its version (and a warning)
};

// `twinscope probe`'s exit code (README, "Exit codes"): 0 every experiment ran to the
// end; 1 no usable GPU; 3 an experiment did not run to the end (a library the child cannot load, a
// crash, a timeout). 2 (the probe could not start) is the CLI's own.
int ProbeExitCode(const ProbeReport& report);

// Parses one child's stdout (its last JSON line), stderr and exit status into `r`.
void ParseChildOutput(const std::string& out, int exit_code, bool timed_out, ExperimentResult* r,
                      const std::string& err = "");
// Sets gpu/no_gpu_reason (from the results), both_in_one_process and summary.
void Conclude(ProbeReport* report);

StatusOr<ProbeReport> RunProbe(const ProbeOptions& options);

std::string FormatTable(const ProbeReport& report);
nlohmann::json ToJson(const ProbeReport& report);

}  // namespace twinscope::probe
