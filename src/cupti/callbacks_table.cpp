#include <cctype>

#include "cupti/callbacks.h"

namespace twinscope::cupti {

LaunchApiInfo ClassifyLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
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

bool IsCopyApi(std::string_view n) {
  for (std::string_view p : {"cudaMemcpy", "cudaMemset", "cuMemcpy", "cuMemset"})
    if (n.substr(0, p.size()) == p) return true;
  return false;
}

std::string CleanApiName(std::string_view n) {
  size_t v = n.rfind("_v");
  if (v != std::string_view::npos && v + 2 < n.size()) {
    bool digits = true;
    for (size_t i = v + 2; i < n.size(); ++i) digits = digits && std::isdigit(static_cast<unsigned char>(n[i]));
    if (digits) n = n.substr(0, v);
  }
  return std::string(n);
}

}  // namespace twinscope::cupti
