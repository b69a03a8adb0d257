// The floor for any CUPTI-based tracer: an injection library (load it with
// CUDA_INJECTION64_PATH) that enables the activity kinds twinscope enables
// (CONCURRENT_KERNEL, MEMCPY, MEMSET; only the first with BARE_CUPTI_KERNELS_ONLY=1)
// and hands every buffer straight back unread. No callbacks, no parsing, no
// output beyond one line on stderr at exit.
// BARE_CUPTI_CALLBACKS=1 also subscribes to the API callbacks twinscope
// enables (every runtime and driver API whose name holds "Launch", "Memcpy"
// or "Memset") with a callback that returns at once: the floor for a tracer
// that ties each kernel to its API call, thread and NVTX range.
// BARE_CUPTI_CALLBACKS=launch: an empty callback on cudaLaunchKernel only (the
// cost of one callback per launch, against the whole set's).
// BARE_CUPTI_API_ACTIVITY=1 instead asks CUPTI for API activity records of the
// same APIs (cuptiActivityEnableRuntimeApi / DriverApi: no callback runs);
// =ext also enables EXTERNAL_CORRELATION records and pushes one external id
// on the initializing thread: the floor for a tracer that ties kernels to API
// calls and NVTX ranges through CUPTI's own records, not callbacks.
// twinscope_bench_level (bench_kernels --levels) switches between no CUPTI,
// the activity kinds alone and everything the environment asked for.
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 8u << 20;
std::mutex g_mu;
std::vector<uint8_t*> g_free;
std::atomic<unsigned long long> g_buffers{0};

void CUPTIAPI Requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_free.empty()) {
    *buffer = g_free.back();
    g_free.pop_back();
  } else {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  }
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

std::atomic<bool> g_count{false};  // with API activity: count the records, to show they come
std::atomic<unsigned long long> g_api_records{0}, g_ext_records{0};

void CUPTIAPI Completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  g_buffers.fetch_add(1);
  if (!buffer) return;
  if (g_count.load(std::memory_order_relaxed)) {
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME || rec->kind == CUPTI_ACTIVITY_KIND_DRIVER) g_api_records++;
      if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) g_ext_records++;
    }
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_free.push_back(buffer);
}

std::atomic<unsigned long long> g_callbacks{0};

void CUPTIAPI OnApi(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {
  g_callbacks.fetch_add(1, std::memory_order_relaxed);
}

void AtExit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::fprintf(stderr,
               "bare_cupti: %llu buffers discarded, %llu API callbacks, %llu API records, %llu external "
               "correlation records\n",
               g_buffers.load(), g_callbacks.load(), g_api_records.load(), g_ext_records.load());
}

bool Check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return true;
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::fprintf(stderr, "bare_cupti: %s failed: %s\n", what, s ? s : "?");
  return false;
}

// What the environment asks for, kept so twinscope_bench_level can switch it.
struct Setup {
  std::vector<CUpti_ActivityKind> kinds;
  CUpti_SubscriberHandle subscriber = nullptr;
  std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> callbacks, api_activity;
  bool ext = false;
} g_setup;

bool Traced(const char* name) {
  return std::strstr(name, "Launch") || std::strstr(name, "Memcpy") || std::strstr(name, "Memset");
}

// Every (domain, cbid) of the launch/copy APIs, in `domains` ("1": both, "driver", "runtime").
std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> TracedApis(const char* domains) {
  std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> out;
  for (CUpti_CallbackDomain domain : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
    if (std::strcmp(domains, "driver") == 0 && domain != CUPTI_CB_DOMAIN_DRIVER_API) continue;
    if (std::strcmp(domains, "runtime") == 0 && domain != CUPTI_CB_DOMAIN_RUNTIME_API) continue;
    const uint32_t size = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? uint32_t{CUPTI_RUNTIME_TRACE_CBID_SIZE}
                                                                : uint32_t{CUPTI_DRIVER_TRACE_CBID_SIZE};
    for (uint32_t id = 1; id < size; ++id) {
      const char* name = nullptr;
      if (cuptiGetCallbackName(domain, id, &name) == CUPTI_SUCCESS && name && Traced(name))
        out.emplace_back(domain, id);
    }
  }
  return out;
}

// 0: nothing enabled; 1: the activity kinds; 2: the kinds and what the environment adds.
int ApplyLevel(int level) {
  int failed = 0;
  for (CUpti_ActivityKind k : g_setup.kinds)
    failed += !Check(level >= 1 ? cuptiActivityEnable(k) : cuptiActivityDisable(k), "activity kind");
  const uint32_t on = level == 2 ? 1 : 0;
  for (const auto& [domain, id] : g_setup.callbacks)
    failed += !Check(cuptiEnableCallback(on, g_setup.subscriber, domain, id), "cuptiEnableCallback");
  // Looked up when used: the fake CUPTI of the CPU benchmarks does not have them.
  using EnableApi = CUptiResult(CUPTIAPI*)(CUpti_CallbackId, uint8_t);
  static auto runtime_api = reinterpret_cast<EnableApi>(dlsym(RTLD_DEFAULT, "cuptiActivityEnableRuntimeApi"));
  static auto driver_api = reinterpret_cast<EnableApi>(dlsym(RTLD_DEFAULT, "cuptiActivityEnableDriverApi"));
  for (const auto& [domain, id] : g_setup.api_activity) {
    EnableApi fn = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_api : driver_api;
    failed += !Check(fn ? fn(id, on) : CUPTI_ERROR_NOT_SUPPORTED, "API activity");
  }
  if (g_setup.ext)
    failed += !Check(on ? cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)
                        : cuptiActivityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION),
                     "EXTERNAL_CORRELATION");
  return failed;
}

}  // namespace

// bench_kernels --levels switches the floor between its levels in one process.
extern "C" __attribute__((visibility("default"))) int twinscope_bench_level(int level) {
  return level < 0 || level > 2 ? -1 : ApplyLevel(level);
}

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  if (!Check(cuptiActivityRegisterCallbacks(Requested, Completed), "cuptiActivityRegisterCallbacks")) return 1;
  g_setup.kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL};
  const char* k = std::getenv("BARE_CUPTI_KERNELS_ONLY");
  if (!(k && std::strcmp(k, "1") == 0))
    g_setup.kinds.insert(g_setup.kinds.end(), {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET});
  const char* cb = std::getenv("BARE_CUPTI_CALLBACKS");
  // "1": both domains, as the collector; "driver" / "runtime": one domain only (what each costs);
  // "launch": cudaLaunchKernel only.
  if (cb && (std::strcmp(cb, "1") == 0 || std::strcmp(cb, "driver") == 0 || std::strcmp(cb, "runtime") == 0 ||
             std::strcmp(cb, "launch") == 0)) {
    if (Check(cuptiSubscribe(&g_setup.subscriber, OnApi, nullptr), "cuptiSubscribe")) {
      if (std::strcmp(cb, "launch") == 0)
        g_setup.callbacks = {{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000}};
      else
        g_setup.callbacks = TracedApis(cb);
    }
  }
  const char* act = std::getenv("BARE_CUPTI_API_ACTIVITY");
  if (act && (std::strcmp(act, "1") == 0 || std::strcmp(act, "ext") == 0)) {
    g_count = true;
    g_setup.api_activity = TracedApis("1");
    g_setup.ext = std::strcmp(act, "ext") == 0;
  }
  const int failed = ApplyLevel(2);
  if (g_setup.ext)
    Check(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1),
          "cuptiActivityPushExternalCorrelationId");
  std::fprintf(stderr, "bare_cupti: %zu activity kinds, %zu callbacks, %zu APIs with activity records%s%s\n",
               g_setup.kinds.size(), g_setup.callbacks.size(), g_setup.api_activity.size(),
               g_setup.ext ? ", external correlation" : "", failed ? " (some calls failed: see above)" : "");
  std::atexit(AtExit);
  return 1;
}
