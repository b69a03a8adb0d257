// The floor for the block probe on kernels it does not trace: an injection
// library (CUDA_INJECTION64_PATH) that subscribes to the Compute Sanitizer with
// the same callbacks the probe enables (blocks/probe_callbacks.h) and returns
// from each at once. No
// patching, no buffers. Whatever a launch costs under it is what the
// Sanitizer's callbacks alone cost.
#include <sanitizer.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "blocks/probe_callbacks.h"

namespace {

std::atomic<unsigned long long> g_callbacks{0};

void SANITIZERAPI Callback(void*, Sanitizer_CallbackDomain, Sanitizer_CallbackId, const void*) {
  g_callbacks.fetch_add(1, std::memory_order_relaxed);
}

void AtExit() { std::fprintf(stderr, "bare_sanitizer: %llu callbacks\n", g_callbacks.load()); }

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  Sanitizer_SubscriberHandle subscriber = nullptr;
  if (sanitizerSubscribe(&subscriber, Callback, nullptr) != SANITIZER_SUCCESS) {
    std::fprintf(stderr, "bare_sanitizer: sanitizerSubscribe failed\n");
    return 1;
  }
  for (const auto& w : twinscope::blocks::kProbeCallbacks) sanitizerEnableCallback(1, subscriber, w.domain, w.cbid);
  std::atexit(AtExit);
  return 1;
}
