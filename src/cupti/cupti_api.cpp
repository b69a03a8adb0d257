#include "cupti/cupti_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include "abi/guard_abi.h"
#include "base/env_names.h"
#include "base/log.h"
#include "cupti/cupti_check.h"

namespace twinscope::cupti {

// Not in base/env_names.h: a collector-private override for unusual installs
// (e.g. the CUPTI of a Python wheel).
static constexpr const auto& kCuptiLibraryEnv = env::kCuptiLibrary;

namespace {

CuptiApi g_cupti;
DriverApi g_driver;
CUpti_SubscriberHandle g_subscriber = nullptr;  // set by Subscribe
struct CollectorBuffers {};                     // tag of the collector's v1->v2 buffer bridge

template <typename T>
bool Resolve(void* lib, const char* name, T* fn) {
  *fn = reinterpret_cast<T>(dlsym(lib, name));
  return *fn != nullptr;
}

}  // namespace

const CuptiApi& Cupti() { return g_cupti; }
const DriverApi& Driver() { return g_driver; }
CuptiApi& MutableCupti() { return g_cupti; }
DriverApi& MutableDriver() { return g_driver; }

bool LoadCupti(CuptiApi* api, std::string* loaded_from, std::string* error) {
  std::vector<std::string> candidates;
  // With the guard preloaded (src/guard), the program's CUPTI client and the
  // collector must use one libcupti: the one either side claimed first.
  auto claim = reinterpret_cast<TwinscopeGuardClaimFn>(dlsym(RTLD_DEFAULT, TWINSCOPE_GUARD_CLAIM_SYMBOL));
  if (const char* claimed = claim ? claim(nullptr) : nullptr) {
    candidates.push_back(claimed);
  } else if (const char* p = std::getenv(kCuptiLibraryEnv); p && *p) {
    candidates.push_back(p);
  } else {
    candidates.push_back("libcupti.so.13");
    if (const char* home = std::getenv("CUDA_HOME"); home && *home) {
      candidates.push_back(std::string(home) + "/lib64/libcupti.so.13");
      candidates.push_back(std::string(home) + "/extras/CUPTI/lib64/libcupti.so.13");
    }
    candidates.push_back("/usr/local/cuda/lib64/libcupti.so.13");
    candidates.push_back("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13");
  }
  void* lib = nullptr;
  std::string tried;
  for (const auto& c : candidates) {
    lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      *loaded_from = c;
      break;
    }
    const char* e = dlerror();
    tried += "\n  " + c + ": " + (e ? e : "not found");
  }
  if (lib && claim) {
    const char* used = claim(loaded_from->c_str());
    if (used && *loaded_from != used)  // the guard loaded another one meanwhile
      LogError(
          "the program's CUPTI client uses %s, twinscope %s: two copies of libcupti in one process may starve "
          "one of them",
          used, loaded_from->c_str());
  }
  if (!lib) {
    *error = std::string("could not load CUPTI (libcupti.so.13); tried:") + tried +
             "\n  install the CUDA toolkit's CUPTI, add its lib64 folder to LD_LIBRARY_PATH, or set " +
             kCuptiLibraryEnv + "=/path/to/libcupti.so.13";
    return false;
  }
  std::string missing;
  auto need = [&](const char* name, auto* fn) {
    if (!Resolve(lib, name, fn)) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  need("cuptiGetVersion", &api->GetVersion);
  need("cuptiGetResultString", &api->GetResultString);
  need("cuptiSubscribe", &api->Subscribe);
  need("cuptiUnsubscribe", &api->Unsubscribe);
  need("cuptiEnableCallback", &api->EnableCallback);
  need("cuptiEnableDomain", &api->EnableDomain);
  need("cuptiGetCallbackName", &api->GetCallbackName);
  need("cuptiActivityRegisterCallbacks", &api->ActivityRegisterCallbacks);
  need("cuptiActivityEnable", &api->ActivityEnable);
  need("cuptiActivityDisable", &api->ActivityDisable);
  need("cuptiActivitySetAttribute", &api->ActivitySetAttribute);
  need("cuptiActivityGetNextRecord", &api->ActivityGetNextRecord);
  need("cuptiActivityGetNumDroppedRecords", &api->ActivityGetNumDroppedRecords);
  need("cuptiActivityFlushAll", &api->ActivityFlushAll);
  need("cuptiGetTimestamp", &api->GetTimestamp);
  need("cuptiGetDeviceId", &api->GetDeviceId);
  need("cuptiGetStreamIdEx", &api->GetStreamIdEx);
  need("cuptiGetGraphNodeId", &api->GetGraphNodeId);
  need("cuptiGetGraphExecId", &api->GetGraphExecId);
  Resolve(lib, "cuptiSubscribe_v2", &api->SubscribeV2);
  if (!missing.empty()) {
    *error = "the CUPTI library at " + *loaded_from + " lacks " + missing +
             " (twinscope needs CUPTI 13 or newer; set " + kCuptiLibraryEnv + " to a newer libcupti.so)";
    *api = CuptiApi{};
    return false;
  }
  api->V2.Resolve([lib](const char* name) { return dlsym(lib, name); });
  if (api->GetVersion(&api->version) != CUPTI_SUCCESS) api->version = 0;
  api->multi_subscriber = api->version >= v2::kMinVersion && api->V2.complete();
  return true;
}

CUptiResult Subscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata,
                      std::string* other) {
  const CuptiApi& api = g_cupti;
  char name[v2::kOldSubscriberNameMinLen + 64] = {};
  CUptiResult r;
  if (api.multi_subscriber) {
    v2::SubscriberParams params;
    v2::MultiSubscriberParams(&params, "twinscope", name, sizeof name);
    r = api.V2.Subscribe(subscriber, callback, userdata, &params);
  } else if (api.SubscribeV2) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "twinscope";
    params.oldSubscriberName = name;
    params.oldSubscriberSize = sizeof name;
    r = api.SubscribeV2(subscriber, callback, userdata, &params);
  } else {
    r = api.Subscribe(subscriber, callback, userdata);
  }
  if (r == CUPTI_SUCCESS) g_subscriber = *subscriber;
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && other) *other = name;
  return r;
}

CUptiResult ActivityEnable(CUpti_ActivityKind kind) {
  if (g_cupti.multi_subscriber) return g_cupti.V2.ActivityEnable(g_subscriber, kind, nullptr);
  return g_cupti.ActivityEnable(kind);
}

CUptiResult ActivityDisable(CUpti_ActivityKind kind) {
  if (g_cupti.multi_subscriber) return g_cupti.V2.ActivityDisable(g_subscriber, kind, nullptr);
  return g_cupti.ActivityDisable(kind);
}

CUptiResult ActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* size, void* value) {
  if (g_cupti.multi_subscriber) return g_cupti.V2.ActivitySetAttribute(g_subscriber, attr, size, value);
  return g_cupti.ActivitySetAttribute(attr, size, value);
}

CUptiResult ActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                      CUpti_BuffersCallbackCompleteFunc completed) {
  if (g_cupti.multi_subscriber)
    return v2::BufferBridge<CollectorBuffers>::Register(g_cupti.V2, g_subscriber, requested, completed);
  return g_cupti.ActivityRegisterCallbacks(requested, completed);
}

CUptiResult CUPTIAPI ActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  if (g_cupti.multi_subscriber) return g_cupti.V2.ActivityGetNextRecord(g_subscriber, buffer, valid, record);
  return g_cupti.ActivityGetNextRecord(buffer, valid, record);
}

CUptiResult ActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream_id, size_t* dropped) {
  if (g_cupti.multi_subscriber) return g_cupti.V2.ActivityGetNumDroppedRecords(g_subscriber, ctx, stream_id, dropped);
  return g_cupti.ActivityGetNumDroppedRecords(ctx, stream_id, dropped);
}

CUptiResult GetTimestamp(uint64_t* timestamp) {
  if (g_cupti.multi_subscriber && g_subscriber) return g_cupti.V2.GetTimestamp(g_subscriber, timestamp);
  if (!g_cupti.GetTimestamp) return CUPTI_ERROR_NOT_INITIALIZED;
  return g_cupti.GetTimestamp(timestamp);
}

void LoadDriver(DriverApi* api) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  Resolve(lib, "cuDriverGetVersion", &api->DriverGetVersion);
  Resolve(lib, "cuDeviceGet", &api->DeviceGet);
  Resolve(lib, "cuDeviceGetName", &api->DeviceGetName);
  Resolve(lib, "cuDeviceGetAttribute", &api->DeviceGetAttribute);
  Resolve(lib, "cuDeviceGetUuid_v2", &api->DeviceGetUuid);
  Resolve(lib, "cuStreamIsCapturing", &api->StreamIsCapturing);
  Resolve(lib, "cuGraphGetNodes", &api->GraphGetNodes);
  Resolve(lib, "cuGraphNodeGetType", &api->GraphNodeGetType);
  Resolve(lib, "cuGraphKernelNodeGetParams_v2", &api->GraphKernelNodeGetParams);
  Resolve(lib, "cuGraphChildGraphNodeGetGraph", &api->GraphChildGraphNodeGetGraph);
  Resolve(lib, "cuFuncGetName", &api->FuncGetName);
  Resolve(lib, "cuKernelGetName", &api->KernelGetName);
}

std::string ResultString(CUptiResult r) {
  const char* s = nullptr;
  if (g_cupti.GetResultString && g_cupti.GetResultString(r, &s) == CUPTI_SUCCESS && s) return s;
  return "CUPTI error " + std::to_string(static_cast<int>(r));
}

std::string DescribeFailedCall(const char* call, const char* file, int line, CUptiResult r) {
  const char* base = file;
  for (const char* p = file; *p; ++p)
    if (*p == '/') base = p + 1;
  return std::string(call) + " failed at " + base + ":" + std::to_string(line) + ": " + ResultString(r) + " (" +
         std::to_string(static_cast<int>(r)) + ")";
}

}  // namespace twinscope::cupti
