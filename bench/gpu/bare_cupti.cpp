// The floor for any CUPTI-based tracer: an injection library (load it with
// CUDA_INJECTION64_PATH) that enables the activity kinds twinscope enables
// (CONCURRENT_KERNEL, MEMCPY, MEMSET; only the first with BARE_CUPTI_KERNELS_ONLY=1)
// and hands every buffer straight back unread. No callbacks, no parsing, no
// output beyond one line on stderr at exit.
// BARE_CUPTI_CALLBACKS=1 also subscribes to the API callbacks twinscope
// enables (every runtime and driver API whose name holds "Launch", "Memcpy"
// or "Memset") with a callback that returns at once: the floor for a tracer
// that ties each kernel to its API call, thread and NVTX range.
#include <cupti.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
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

void CUPTIAPI Completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t) {
  g_buffers.fetch_add(1);
  if (!buffer) return;
  std::lock_guard<std::mutex> lock(g_mu);
  g_free.push_back(buffer);
}

std::atomic<unsigned long long> g_callbacks{0};

void CUPTIAPI OnApi(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {
  g_callbacks.fetch_add(1, std::memory_order_relaxed);
}

void AtExit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::fprintf(stderr, "bare_cupti: %llu buffers discarded, %llu API callbacks\n", g_buffers.load(),
               g_callbacks.load());
}

bool Check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return true;
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::fprintf(stderr, "bare_cupti: %s failed: %s\n", what, s ? s : "?");
  return false;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  if (!Check(cuptiActivityRegisterCallbacks(Requested, Completed), "cuptiActivityRegisterCallbacks")) return 1;
  Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable CONCURRENT_KERNEL");
  const char* k = std::getenv("BARE_CUPTI_KERNELS_ONLY");
  if (!(k && std::strcmp(k, "1") == 0)) {
    Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enable MEMCPY");
    Check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enable MEMSET");
  }
  const char* cb = std::getenv("BARE_CUPTI_CALLBACKS");
  // "1": both domains, as the collector; "driver" / "runtime": one domain only (what each costs).
  if (cb && (std::strcmp(cb, "1") == 0 || std::strcmp(cb, "driver") == 0 || std::strcmp(cb, "runtime") == 0)) {
    CUpti_SubscriberHandle subscriber = nullptr;
    if (Check(cuptiSubscribe(&subscriber, OnApi, nullptr), "cuptiSubscribe")) {
      const struct {
        CUpti_CallbackDomain domain;
        uint32_t size;
      } domains[] = {{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE},
                     {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE}};
      for (const auto& d : domains) {
        if (std::strcmp(cb, "driver") == 0 && d.domain != CUPTI_CB_DOMAIN_DRIVER_API) continue;
        if (std::strcmp(cb, "runtime") == 0 && d.domain != CUPTI_CB_DOMAIN_RUNTIME_API) continue;
        for (uint32_t id = 1; id < d.size; ++id) {
          const char* name = nullptr;
          if (cuptiGetCallbackName(d.domain, id, &name) != CUPTI_SUCCESS || !name) continue;
          if (std::strstr(name, "Launch") || std::strstr(name, "Memcpy") || std::strstr(name, "Memset"))
            cuptiEnableCallback(1, subscriber, d.domain, id);
        }
      }
    }
  }
  std::atexit(AtExit);
  return 1;
}
