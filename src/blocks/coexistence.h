// Explains why the block probe received nothing: on this stack CUPTI and the
// Compute Sanitizer cannot share a process (shared/FACTS.md), and when CUPTI
// got there first sanitizerSubscribe still returns SUCCESS but no callback
// ever arrives. These helpers name the likely holder of the seat from what
// the process shows. Pure functions (the inputs are passed in), thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace twinscope::blocks {

// Describes likely CUPTI users from the text of /proc/self/maps and a few
// environment values (CUDA_INJECTION64_PATH, LD_PRELOAD, NSYS_* presence), e.g.
// "libcupti.so.13 is loaded in the process; CUDA_INJECTION64_PATH names
// libtwinscope_cupti.so". Empty if nothing points at a holder.
std::string LikelySeatHolder(std::string_view proc_maps, std::string_view injection_path, std::string_view ld_preload,
                             bool nsight_env);

// Same, reading this process's /proc/self/maps and environment.
std::string LikelySeatHolderOfThisProcess();

// The full user-facing explanation for a probe that got no callbacks
// (`subscribe_failed`: sanitizerSubscribe returned an error `error`).
std::string SilentProbeMessage(bool subscribe_failed, std::string_view error, std::string_view holder);

}  // namespace twinscope::blocks
