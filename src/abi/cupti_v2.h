// CUPTI 13.5's multi-subscriber API (cuptiSubscribe_v2 with
// allowMultipleSubscribers, and the per-subscriber `_v2` activity calls),
// declared here because twinscope builds against the CUDA 13.0 toolkit's
// headers, which lack them. Everything that uses them (the collector, the
// guard, the probe child, the fake CUPTI) resolves the functions at run time
// with dlsym, so one header set serves CUPTI 13.0 and 13.5 alike. Layouts and
// values are copied from CUPTI 13.5.25's cupti_callbacks.h / cupti_activity.h.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "abi/cupti_versions.h"

namespace twinscope::cupti::v2 {

// cuptiGetVersion() from which multi-subscriber mode is used.
inline constexpr uint32_t kMinVersion = kCuptiMultiSubscriberVersion;

// CUpti_SubscriberParams of CUPTI 13.5 (13.0's ends at oldSubscriberSize).
struct SubscriberParams {
  size_t structSize;
  const char* subscriberName;
  char* oldSubscriberName;
  size_t oldSubscriberSize;
  uint8_t allowMultipleSubscribers;
  uint8_t padding[7];
};
static_assert(sizeof(SubscriberParams) == 40, "CUpti_SubscriberParams of CUPTI 13.5 is 40 bytes");
inline constexpr size_t kSubscriberParamsSize = 40;  // CUpti_SubscriberParams_STRUCT_SIZE in 13.5
inline constexpr size_t kOldSubscriberNameMinLen = 64;

// CUpti_BufferCallbackRequestInfo / CUpti_BufferCallbackCompleteInfo: only
// their first field is read here.
struct BufferRequestInfo {
  size_t structSize;
};
struct BufferCompleteInfo {
  size_t structSize;
  uint64_t threadId;
  void** ppRecordLayouts;
  size_t numRecordLayouts;
};

// CUpti_ActivityAttribute values new in 13.x (per subscriber with _v2).
enum Attribute : int {
  kAttrMultipleSubscriberState = 12,
  kAttrEnableAllocationSourceTracking = 14,
  kAttrEnableKernelLatencyTimestamps = 15,
  kAttrEnableAllSyncRecords = 16,
  kAttrEnableCudaEventDeviceTimestamps = 17,
  kAttrEnableKernelLaunchAttributes = 18,
  kAttrEnableDeviceGraphTrace = 19,
  kAttrThreadIdType = 21,
  kAttrTimestampCallback = 22,
};

using RequestFn = void(CUPTIAPI*)(uint8_t** buffer, size_t* size, size_t* max_records, BufferRequestInfo* info);
using CompleteFn = void(CUPTIAPI*)(uint8_t* buffer, size_t size, size_t valid, BufferCompleteInfo* info);

using SubscribeFn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*, SubscriberParams*);
using EnableFn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, CUpti_ActivityKind, void* config);
using RegisterCallbacksFn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, RequestFn, CompleteFn);
using GetNextRecordFn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, uint8_t*, size_t, CUpti_Activity**);
using GetNumDroppedRecordsFn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, CUcontext, uint32_t, size_t*);
using AttributeFn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, CUpti_ActivityAttribute, size_t*, void*);
using GetTimestampFn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, uint64_t*);
using PushCorrelationFn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, CUpti_ExternalCorrelationKind, uint64_t);
using PopCorrelationFn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, CUpti_ExternalCorrelationKind, uint64_t*);
using EnableApiFn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, CUpti_CallbackId, uint8_t);

// The per-subscriber calls, resolved from one libcupti. `complete()` says
// whether everything multi-subscriber mode needs is there.
struct Api {
  SubscribeFn Subscribe = nullptr;  // cuptiSubscribe_v2 (also in 12.9+, without allowMultipleSubscribers)
  EnableFn ActivityEnable = nullptr;
  EnableFn ActivityDisable = nullptr;
  EnableFn ActivityEnableAndDump = nullptr;
  RegisterCallbacksFn ActivityRegisterCallbacks = nullptr;
  GetNextRecordFn ActivityGetNextRecord = nullptr;
  GetNumDroppedRecordsFn ActivityGetNumDroppedRecords = nullptr;
  AttributeFn ActivitySetAttribute = nullptr;
  AttributeFn ActivityGetAttribute = nullptr;
  GetTimestampFn GetTimestamp = nullptr;
  PushCorrelationFn ActivityPushExternalCorrelationId = nullptr;
  PopCorrelationFn ActivityPopExternalCorrelationId = nullptr;
  EnableApiFn ActivityEnableDriverApi = nullptr;
  EnableApiFn ActivityEnableRuntimeApi = nullptr;

  // `sym` looks a name up in the library (dlsym on its handle).
  template <typename Sym>
  void Resolve(Sym&& sym) {
    auto get = [&](const char* name, auto* fn) {
      *fn = reinterpret_cast<std::remove_reference_t<decltype(*fn)>>(sym(name));
    };
    get("cuptiSubscribe_v2", &Subscribe);
    get("cuptiActivityEnable_v2", &ActivityEnable);
    get("cuptiActivityDisable_v2", &ActivityDisable);
    get("cuptiActivityEnableAndDump_v2", &ActivityEnableAndDump);
    get("cuptiActivityRegisterCallbacks_v2", &ActivityRegisterCallbacks);
    get("cuptiActivityGetNextRecord_v2", &ActivityGetNextRecord);
    get("cuptiActivityGetNumDroppedRecords_v2", &ActivityGetNumDroppedRecords);
    get("cuptiActivitySetAttribute_v2", &ActivitySetAttribute);
    get("cuptiActivityGetAttribute_v2", &ActivityGetAttribute);
    get("cuptiGetTimestamp_v2", &GetTimestamp);
    get("cuptiActivityPushExternalCorrelationId_v2", &ActivityPushExternalCorrelationId);
    get("cuptiActivityPopExternalCorrelationId_v2", &ActivityPopExternalCorrelationId);
    get("cuptiActivityEnableDriverApi_v2", &ActivityEnableDriverApi);
    get("cuptiActivityEnableRuntimeApi_v2", &ActivityEnableRuntimeApi);
  }
  // What multi-subscriber mode needs at the least (the collector's and the
  // probe's calls); the guard checks the rest call by call.
  bool complete() const {
    return Subscribe && ActivityEnable && ActivityDisable && ActivityRegisterCallbacks && ActivityGetNextRecord &&
           ActivityGetNumDroppedRecords && ActivitySetAttribute && GetTimestamp;
  }
};

// Fills `params` for a multi-subscriber subscription named `name`; CUPTI
// writes the first (or the incompatible) subscriber's name to `other`.
inline void MultiSubscriberParams(SubscriberParams* params, const char* name, char* other, size_t other_size) {
  *params = SubscriberParams{};
  params->structSize = kSubscriberParamsSize;
  params->subscriberName = name;
  params->oldSubscriberName = other;
  params->oldSubscriberSize = other_size;
  params->allowMultipleSubscribers = 1;
}

// Serves a v1 pair of buffer callbacks (the CUPTI 13.0 signatures) from a v2
// subscriber's callbacks, which carry no context, stream or user data. One
// pair per Tag (each library that uses it has its own, hidden); the pair may
// be replaced while CUPTI calls in.
template <typename Tag>
struct BufferBridge {
  static inline std::atomic<CUpti_BuffersCallbackRequestFunc> request{nullptr};
  static inline std::atomic<CUpti_BuffersCallbackCompleteFunc> complete{nullptr};

  static void CUPTIAPI Request(uint8_t** buffer, size_t* size, size_t* max_records, BufferRequestInfo*) {
    if (auto fn = request.load(std::memory_order_acquire)) {
      fn(buffer, size, max_records);
    } else {
      *buffer = nullptr;
      *size = 0;
      *max_records = 0;
    }
  }
  static void CUPTIAPI Complete(uint8_t* buffer, size_t size, size_t valid, BufferCompleteInfo*) {
    if (auto fn = complete.load(std::memory_order_acquire)) fn(nullptr, 0, buffer, size, valid);
  }
  static CUptiResult Register(const Api& api, CUpti_SubscriberHandle subscriber, CUpti_BuffersCallbackRequestFunc req,
                              CUpti_BuffersCallbackCompleteFunc done) {
    request.store(req, std::memory_order_release);
    complete.store(done, std::memory_order_release);
    return api.ActivityRegisterCallbacks(subscriber, &Request, &Complete);
  }
};

}  // namespace twinscope::cupti::v2
