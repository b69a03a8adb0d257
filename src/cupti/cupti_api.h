// The CUPTI and CUDA driver functions the collector uses, resolved at run
// time with dlopen/dlsym so that a missing or mismatched libcupti (or a
// process without libcuda) is a state we report, not a load failure that the
// CUDA driver swallows. Loaded once at InitializeInjection; read-only after.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <string>

#include "abi/cupti_v2.h"

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
  decltype(&cuptiActivityDisable) ActivityDisable = nullptr;
  decltype(&cuptiActivitySetAttribute) ActivitySetAttribute = nullptr;
  decltype(&cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) ActivityGetNumDroppedRecords = nullptr;
  decltype(&cuptiActivityFlushAll) ActivityFlushAll = nullptr;
  decltype(&cuptiGetTimestamp) GetTimestamp = nullptr;
  decltype(&cuptiGetDeviceId) GetDeviceId = nullptr;
  decltype(&cuptiGetStreamIdEx) GetStreamIdEx = nullptr;
  decltype(&cuptiGetGraphNodeId) GetGraphNodeId = nullptr;
  decltype(&cuptiGetGraphExecId) GetGraphExecId = nullptr;
  v2::Api V2;            // CUPTI >= 13.5's per-subscriber calls (all null before 13.4)
  uint32_t version = 0;  // cuptiGetVersion
  // CUPTI >= 13.5 with every per-subscriber call: the collector subscribes in
  // multi-subscriber mode, so other CUPTI clients (the program's own) can
  // subscribe beside it.
  bool multi_subscriber = false;
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

// Loads libcupti (the one the guard already serves the program from, if the
// guard is preloaded; else the path in TWINSCOPE_CUPTI_LIBRARY if set, else
// libcupti.so.13 from the loader's search path, else CUDA's usual folders)
// and decides multi_subscriber.
// Returns false and sets *error (with what was tried) if it cannot.
bool LoadCupti(CuptiApi* api, std::string* loaded_from, std::string* error);
// Loads what it can of libcuda.so.1 (already mapped in a CUDA process).
void LoadDriver(DriverApi* api);

// The collector's tables (filled once by the collector at start).
// The activity calls below go to the per-subscriber v2 calls of the
// collector's subscriber in multi-subscriber mode, else to the process-wide
// v1 calls; they read Cupti() and the subscriber Subscribe() stored.
const CuptiApi& Cupti();
const DriverApi& Driver();
CuptiApi& MutableCupti();
DriverApi& MutableDriver();

// Subscribes `callback` as "twinscope": cuptiSubscribe_v2 with
// allowMultipleSubscribers=1 in multi-subscriber mode, else cuptiSubscribe_v2
// (single subscriber) or cuptiSubscribe. On CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_
// NOT_SUPPORTED, `*other` gets the name CUPTI gives the other subscriber.
CUptiResult Subscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata,
                      std::string* other);
CUptiResult ActivityEnable(CUpti_ActivityKind kind);
CUptiResult ActivityDisable(CUpti_ActivityKind kind);
CUptiResult ActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* size, void* value);
CUptiResult ActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                      CUpti_BuffersCallbackCompleteFunc completed);
CUptiResult CUPTIAPI ActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record);
CUptiResult ActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream_id, size_t* dropped);
CUptiResult GetTimestamp(uint64_t* timestamp);

// cuptiGetResultString, or the number if CUPTI is not loaded.
std::string ResultString(CUptiResult r);

}  // namespace twinscope::cupti
