// The floor for the block probe on kernels it does not trace: an injection
// library (CUDA_INJECTION64_PATH) that subscribes to the Compute Sanitizer with
// the same callbacks the probe enables and returns from each at once. No
// patching, no buffers. Whatever a launch costs under it is what the
// Sanitizer's callbacks alone cost.
#include <sanitizer.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

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
  const struct {
    Sanitizer_CallbackDomain domain;
    Sanitizer_CallbackId cbid;
  } wanted[] = {
      {SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_CONTEXT_CREATION_FINISHED},
      {SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_CONTEXT_DESTROY_STARTING},
      {SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_STREAM_DESTROY_STARTING},
      {SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_MODULE_LOADED},
      {SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_MODULE_UNLOAD_STARTING},
      {SANITIZER_CB_DOMAIN_LAUNCH, SANITIZER_CBID_LAUNCH_BEGIN},
      {SANITIZER_CB_DOMAIN_LAUNCH, SANITIZER_CBID_LAUNCH_END},
      {SANITIZER_CB_DOMAIN_SYNCHRONIZE, SANITIZER_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED},
      {SANITIZER_CB_DOMAIN_SYNCHRONIZE, SANITIZER_CBID_SYNCHRONIZE_CONTEXT_SYNCHRONIZED},
      {SANITIZER_CB_DOMAIN_GRAPHS, SANITIZER_CBID_GRAPHS_NODE_LAUNCH_BEGIN},
      {SANITIZER_CB_DOMAIN_GRAPHS, SANITIZER_CBID_GRAPHS_LAUNCH_END},
  };
  for (const auto& w : wanted) sanitizerEnableCallback(1, subscriber, w.domain, w.cbid);
  std::atexit(AtExit);
  return 1;
}
