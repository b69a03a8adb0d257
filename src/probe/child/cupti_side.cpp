// The probe child's CUPTI side: kernel activity records and runtime launch
// callbacks, counted per client: the legacy (v1) client, and the two
// multi-subscriber clients A and B (CUPTI 13.5's v2 API, looked up at run time).
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "abi/cupti_v2.h"
#include "probe/child/sides.h"

namespace twinscope::probe_child {
namespace {

namespace v2 = twinscope::cupti::v2;

struct Counts {
  std::atomic<uint64_t> records{0}, callbacks{0};
};
Counts g_counts[3];  // CuptiClient order: v1, A, B
CUpti_SubscriberHandle g_subscriber = nullptr;
CUpti_SubscriberHandle g_v2[2] = {nullptr, nullptr};
v2::Api g_api;
bool g_activity = false;

constexpr size_t kBufferSize = 1 << 20;

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferSize));
  *size = *buffer ? kBufferSize : 0;
  *max_records = 0;
}

bool IsKernel(const CUpti_Activity* r) {
  return r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
    if (IsKernel(record)) g_counts[0].records.fetch_add(1);
  std::free(buffer);
}

// A v2 client's buffers: the records are counted for the client `I`.
template <int I>
void CUPTIAPI BufferRequestedV2(uint8_t** buffer, size_t* size, size_t* max_records, v2::BufferRequestInfo*) {
  BufferRequested(buffer, size, max_records);
}
template <int I>
void CUPTIAPI BufferCompletedV2(uint8_t* buffer, size_t, size_t valid, v2::BufferCompleteInfo*) {
  CUpti_Activity* record = nullptr;
  while (g_api.ActivityGetNextRecord(g_v2[I], buffer, valid, &record) == CUPTI_SUCCESS)
    if (IsKernel(record)) g_counts[1 + I].records.fetch_add(1);
  std::free(buffer);
}

void CUPTIAPI OnCallback(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite == CUPTI_API_ENTER && cb->functionName &&
      std::strncmp(cb->functionName, "cudaLaunchKernel", 16) == 0)
    static_cast<Counts*>(user)->callbacks.fetch_add(1);
}

}  // namespace

int CuptiActivityRegister() {
  g_activity = true;
  return cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
}

int CuptiActivityEnableKernel() { return cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); }

int CuptiSubscribe() {
  CUptiResult r = cuptiSubscribe(&g_subscriber, OnCallback, &g_counts[0]);
  if (r != CUPTI_SUCCESS) return r;
  return cuptiEnableDomain(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
}

int CuptiUnsubscribe() { return cuptiUnsubscribe(g_subscriber); }

int CuptiFinalize() { return cuptiFinalize(); }

void CuptiFlush() {
  if (g_activity) cuptiActivityFlushAll(1);
}

int CuptiV2Client(int client) {
  uint32_t version = 0;
  g_api.Resolve([](const char* name) { return dlsym(RTLD_DEFAULT, name); });
  if (cuptiGetVersion(&version) != CUPTI_SUCCESS || version < v2::kMinVersion || !g_api.complete())
    return kNotInThisCupti;
  char other[128] = {};
  v2::SubscriberParams params;
  v2::MultiSubscriberParams(&params, client == 0 ? "twinscope probe A" : "twinscope probe B", other, sizeof other);
  CUpti_SubscriberHandle* sub = &g_v2[client];
  CUptiResult r = g_api.Subscribe(sub, OnCallback, &g_counts[1 + client], &params);
  if (r == CUPTI_SUCCESS) r = cuptiEnableDomain(1, *sub, CUPTI_CB_DOMAIN_RUNTIME_API);
  if (r == CUPTI_SUCCESS)
    r = client == 0 ? g_api.ActivityRegisterCallbacks(*sub, BufferRequestedV2<0>, BufferCompletedV2<0>)
                    : g_api.ActivityRegisterCallbacks(*sub, BufferRequestedV2<1>, BufferCompletedV2<1>);
  if (r == CUPTI_SUCCESS) r = g_api.ActivityEnable(*sub, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, nullptr);
  if (r == CUPTI_SUCCESS) g_activity = true;
  return r;
}

uint64_t CuptiKernelRecords(CuptiClient c) { return g_counts[static_cast<int>(c)].records.load(); }
uint64_t CuptiLaunchCallbacks(CuptiClient c) { return g_counts[static_cast<int>(c)].callbacks.load(); }

std::string CuptiLibrary(uint32_t* version) {
  *version = 0;
  cuptiGetVersion(version);
  Dl_info info{};
  void* fn = dlsym(RTLD_DEFAULT, "cuptiGetVersion");
  return fn && dladdr(fn, &info) && info.dli_fname ? info.dli_fname : "";
}

std::string CuptiResultName(int code) {
  if (code == kNotInThisCupti) return "NOT_IN_THIS_CUPTI (multi-subscriber mode needs CUPTI 13.5)";
  const char* s = nullptr;
  if (cuptiGetResultString(static_cast<CUptiResult>(code), &s) != CUPTI_SUCCESS || !s)
    return "CUPTI_RESULT_" + std::to_string(code);
  return s;
}

}  // namespace twinscope::probe_child
