// The CUPTI and CUDA driver functions the collector uses, resolved at run
// time with dlopen/dlsym so that a missing or mismatched libcupti (or a
// process without libcuda) is a state we report, not a load failure that the
// CUDA driver swallows. Loaded once at InitializeInjection; read-only after.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <string>

namespace twinscope::cupti {

struct CuptiApi {
  decltype(&cuptiGetVersion) GetVersion = nullptr;
  decltype(&cuptiGetResultString) GetResultString = nullptr;
  decltype(&cuptiSubscribe) Subscribe = nullptr;
  decltype(&cuptiSubscribe_v2) SubscribeV2 = nullptr;  // optional (CUPTI >= 12.9)
  decltype(&cuptiUnsubscribe) Unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) EnableCallback = nullptr;
  decltype(&cuptiEnableDomain) EnableDomain = nullptr;
  decltype(&cuptiGetCallbackName) GetCallbackName = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks = nullptr;
  decltype(&cuptiActivityEnable) ActivityEnable = nullptr;
  decltype(&cuptiActivitySetAttribute) ActivitySetAttribute = nullptr;
  decltype(&cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) ActivityGetNumDroppedRecords = nullptr;
  decltype(&cuptiActivityFlushAll) ActivityFlushAll = nullptr;
  decltype(&cuptiGetTimestamp) GetTimestamp = nullptr;
  decltype(&cuptiGetDeviceId) GetDeviceId = nullptr;
  decltype(&cuptiGetStreamIdEx) GetStreamIdEx = nullptr;
  decltype(&cuptiGetGraphNodeId) GetGraphNodeId = nullptr;
  decltype(&cuptiGetGraphExecId) GetGraphExecId = nullptr;
};

// Driver functions; every one may be null (then the feature that needs it
// degrades and says so).
struct DriverApi {
  CUresult (*DriverGetVersion)(int*) = nullptr;
  CUresult (*DeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*DeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*DeviceGetAttribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*DeviceGetUuid)(CUuuid*, CUdevice) = nullptr;
  CUresult (*StreamIsCapturing)(CUstream, CUstreamCaptureStatus*) = nullptr;
  CUresult (*GraphGetNodes)(CUgraph, CUgraphNode*, size_t*) = nullptr;
  CUresult (*GraphNodeGetType)(CUgraphNode, CUgraphNodeType*) = nullptr;
  CUresult (*GraphKernelNodeGetParams)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*) = nullptr;
  CUresult (*GraphChildGraphNodeGetGraph)(CUgraphNode, CUgraph*) = nullptr;
  CUresult (*FuncGetName)(const char**, CUfunction) = nullptr;
  CUresult (*KernelGetName)(const char**, CUkernel) = nullptr;
};

// Loads libcupti (the path in TWINSCOPE_CUPTI_LIBRARY if set, else
// libcupti.so.13 from the loader's search path, else CUDA's usual folders).
// Returns false and sets *error (with what was tried) if it cannot.
bool LoadCupti(CuptiApi* api, std::string* loaded_from, std::string* error);
// Loads what it can of libcuda.so.1 (already mapped in a CUDA process).
void LoadDriver(DriverApi* api);

// The collector's tables (filled once by the collector at start).
const CuptiApi& Cupti();
const DriverApi& Driver();
CuptiApi& MutableCupti();
DriverApi& MutableDriver();

// cuptiGetResultString, or the number if CUPTI is not loaded.
std::string ResultString(CUptiResult r);

}  // namespace twinscope::cupti
