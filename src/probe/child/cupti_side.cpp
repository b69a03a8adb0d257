// The probe child's CUPTI side: kernel activity records and runtime launch callbacks, counted.
#include <cupti.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "probe/child/sides.h"

namespace twinscope::probe_child {
namespace {

std::atomic<uint64_t> g_records{0};
std::atomic<uint64_t> g_callbacks{0};
CUpti_SubscriberHandle g_subscriber = nullptr;
bool g_activity = false;

constexpr size_t kBufferSize = 1 << 20;

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferSize));
  *size = *buffer ? kBufferSize : 0;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL)
      g_records.fetch_add(1);
  }
  std::free(buffer);
}

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite == CUPTI_API_ENTER && cb->functionName &&
      std::strncmp(cb->functionName, "cudaLaunchKernel", 16) == 0)
    g_callbacks.fetch_add(1);
}

}  // namespace

int CuptiActivityRegister() {
  g_activity = true;
  return cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted);
}

int CuptiActivityEnableKernel() { return cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); }

int CuptiSubscribe() {
  CUptiResult r = cuptiSubscribe(&g_subscriber, OnCallback, nullptr);
  if (r != CUPTI_SUCCESS) return r;
  return cuptiEnableDomain(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
}

int CuptiUnsubscribe() { return cuptiUnsubscribe(g_subscriber); }

int CuptiFinalize() { return cuptiFinalize(); }

void CuptiFlush() {
  if (g_activity) cuptiActivityFlushAll(1);
}

uint64_t CuptiKernelRecords() { return g_records.load(); }
uint64_t CuptiLaunchCallbacks() { return g_callbacks.load(); }

std::string CuptiResultName(int code) {
  const char* s = nullptr;
  if (cuptiGetResultString(static_cast<CUptiResult>(code), &s) != CUPTI_SUCCESS || !s)
    return "CUPTI_RESULT_" + std::to_string(code);
  return s;
}

}  // namespace twinscope::probe_child
