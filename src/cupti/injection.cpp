// Entry point of libtwinscope_cupti.so. The CUDA driver loads the library
// named by CUDA_INJECTION64_PATH during cuInit and calls InitializeInjection
// once. The same library is the NVTX injection (NVTX_INJECTION64_PATH): it
// links twinscope_nvtx whole, which exports InitializeInjectionNvtx2.
#include "base/log.h"
#include "cupti/collector.h"

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  twinscope::Firewall("InitializeInjection", [] { twinscope::cupti::Collector::Start(); });
  return 1;  // never fail the application's cuInit
}

// Benchmarks only: see Collector::SetBenchLevel (TWINSCOPE_BENCH_LEVELS=1). -1 when not enabled.
extern "C" __attribute__((visibility("default"))) int twinscope_bench_level(int level) {
  int r = -1;
  twinscope::Firewall("twinscope_bench_level", [&] {
    if (auto* c = twinscope::cupti::Collector::Instance()) r = c->SetBenchLevel(level);
  });
  return r;
}
