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

constexpr LaunchApiInfo ClassifyLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
        return {LaunchApi::kRuntimeKernel, false};
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
        return {LaunchApi::kRuntimeKernel, true};
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
        return {LaunchApi::kRuntimeKernelEx, false};
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
        return {LaunchApi::kRuntimeKernelEx, true};
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
        return {LaunchApi::kRuntimeGraph, false};
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000:
        return {LaunchApi::kRuntimeGraph, true};
      default:
        return {};
    }
  }
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
        return {LaunchApi::kDriverKernel, false};
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
        return {LaunchApi::kDriverKernel, true};
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
        return {LaunchApi::kDriverKernelEx, false};
      case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
        return {LaunchApi::kDriverKernelEx, true};
      case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
        return {LaunchApi::kDriverGraph, false};
      case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
        return {LaunchApi::kDriverGraph, true};
      default:
        return {};
    }
  }
  return {};
}

// cudaMemcpy*, cudaMemset*, cuMemcpy*, cuMemset*: recorded as API calls only.
bool IsCopyApi(std::string_view name);

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" (keeps "_ptsz").
std::string CleanApiName(std::string_view name);

}  // namespace twinscope::cupti
