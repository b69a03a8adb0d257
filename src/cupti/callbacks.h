// Which CUDA API callbacks the collector handles, and how to read them.
// Pure functions over callback ids and names (no CUPTI calls), unit-tested.
#pragma once

#include <cupti.h>

#include <string>
#include <string_view>

namespace twinscope::cupti {

enum class LaunchApi {
  kNone,
  kRuntimeKernel,    // cudaLaunchKernel / cudaLaunchCooperativeKernel (+_ptsz): same parameter layout
  kRuntimeKernelEx,  // cudaLaunchKernelExC (+_ptsz)
  kRuntimeGraph,     // cudaGraphLaunch (+_ptsz)
  kDriverKernel,     // cuLaunchKernel / cuLaunchCooperativeKernel (+_ptsz)
  kDriverKernelEx,   // cuLaunchKernelEx (+_ptsz)
  kDriverGraph,      // cuGraphLaunch (+_ptsz)
};

struct LaunchApiInfo {
  LaunchApi api = LaunchApi::kNone;
  bool per_thread_stream = false;  // a _ptsz variant: stream 0 means the per-thread stream
};

LaunchApiInfo ClassifyLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

// cudaMemcpy*, cudaMemset*, cuMemcpy*, cuMemset*: recorded as API calls only.
bool IsCopyApi(std::string_view name);

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" (keeps "_ptsz").
std::string CleanApiName(std::string_view name);

}  // namespace twinscope::cupti
