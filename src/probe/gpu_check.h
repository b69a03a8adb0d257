// Whether this machine has a usable NVIDIA GPU, asked of the driver in a child process (libcuda loads,
// cuInit succeeds, devices are counted): what `record`, `blocks` and `twin` say before they run a
// program, and what `probe` says first. CUDA-free: libcuda is dlopened in the child only.
#pragma once

#include <string>

namespace twinscope::probe {

// The oldest driver the cu13 wheels (CUPTI, the Sanitizer API) run on: CUDA 13.0 (cuDriverGetVersion).
inline constexpr int kMinDriverVersion = 13000;

struct GpuCheck {
  bool usable = false;     // the driver loaded, initialized and counted at least one device
  bool finished = true;    // false: the check itself could not run or timed out (then `usable` is true:
                           // a check that cannot answer never stops a run)
  int devices = 0;         // devices the driver counted
  int driver_version = 0;  // cuDriverGetVersion, e.g. 13000; 0 if unknown
  std::string reason;      // why not usable, one phrase ("libcuda.so.1 cannot be loaded: ...")
};

// Runs the check in a forked child (a hung driver cannot hang the caller: killed after `timeout_s`).
// CUDA_VISIBLE_DEVICES set to "" counts as no device, without asking the driver.
GpuCheck CheckGpu(int timeout_s = 30);

// "CUDA 13.0" for 13000.
std::string DriverVersionText(int version);

}  // namespace twinscope::probe
