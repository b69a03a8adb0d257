// The probe child's Compute Sanitizer side: a subscriber that counts launch callbacks.
#include <sanitizer.h>

#include <atomic>

#include "probe/child/sides.h"

namespace twinscope::probe_child {
namespace {

std::atomic<uint64_t> g_launches{0};
Sanitizer_SubscriberHandle g_subscriber = nullptr;

void SANITIZERAPI OnCallback(void*, Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid, const void*) {
  if (domain == SANITIZER_CB_DOMAIN_LAUNCH && cbid == SANITIZER_CBID_LAUNCH_BEGIN) g_launches.fetch_add(1);
}

}  // namespace

int SanSubscribe() {
  SanitizerResult r = sanitizerSubscribe(&g_subscriber, OnCallback, nullptr);
  if (r != SANITIZER_SUCCESS) return r;
  return sanitizerEnableDomain(1, g_subscriber, SANITIZER_CB_DOMAIN_LAUNCH);
}

int SanUnsubscribe() { return sanitizerUnsubscribe(g_subscriber); }

uint64_t SanLaunchCallbacks() { return g_launches.load(); }

std::string SanResultName(int code) {
  const char* s = nullptr;
  if (sanitizerGetResultString(static_cast<SanitizerResult>(code), &s) != SANITIZER_SUCCESS || !s)
    return "SANITIZER_RESULT_" + std::to_string(code);
  return s;
}

}  // namespace twinscope::probe_child
