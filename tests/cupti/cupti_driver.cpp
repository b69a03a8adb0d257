// Stand-in for a CUDA application in the collector's CPU end-to-end tests.
// Loads build/lib/libtwinscope_cupti.so the way the CUDA driver does (dlopen,
// InitializeInjection), then drives the fake CUPTI through one scenario and
// exits. NVTX calls are real nvtx3 calls, reaching the collector through
// NVTX_INJECTION64_PATH. The gtest (cupti_e2e_test.cpp) reads the trace.
//
// Usage: cupti_driver <collector.so|none> <scenario> [fake-state.json]
// ("none": no collector, the program alone).
//
// Scenarios own_client and own_v2_client make the program a CUPTI client of
// its own, as a program using torch.profiler is: own_client with the legacy
// (v1) API, the way Kineto calls it (OWN_UNCOVERED=1 adds an entry point the
// guard does not serve), own_v2_client with 13.5's multi-subscriber API.
// Scenario own_clock is such a client with a clock of its own, as Kineto
// registers its TSC: every kind of record it enabled must come in that clock
// (OWN_CLOCK=offset: CLOCK_MONOTONIC + 10^15; OWN_CLOCK=tsc: 3 ticks per ns;
// OWN_CLOCK_FIRST=1: the client starts before the collector is injected).
#include <cupti.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "abi/cupti_v2.h"
#include "fakecupti.h"
#include "load_injection.h"

namespace {

const char* g_injection = "none";  // argv[1]

volatile sig_atomic_t g_app_handler_called = 0;
void AppHandler(int) { g_app_handler_called = 1; }

void Launch(const char* name, unsigned g, unsigned b, int api = FAKE_API_RUNTIME, CUstream s = nullptr, int result = 0,
            int symbol_missing = 0) {
  FakeLaunch l{};
  l.name = name;
  l.grid[0] = g;
  l.grid[1] = l.grid[2] = 1;
  l.block[0] = b;
  l.block[1] = l.block[2] = 1;
  l.api = api;
  l.stream = s;
  l.result = result;
  l.symbol_name_missing = symbol_missing;
  fakecupti_launch(&l);
}

// ---- The program's own CUPTI client ---------------------------------------------------

namespace own {

std::atomic<uint64_t> g_records{0}, g_callbacks{0}, g_dropped{0};
constexpr size_t kBufferBytes = 1 << 16;

void CUPTIAPI Requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI Completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) g_records.fetch_add(1);
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) g_dropped.fetch_add(dropped);
  std::free(buffer);
}

void CUPTIAPI OnCallback(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (user == &g_callbacks && domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
      cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 && cb->callbackSite == CUPTI_API_ENTER)
    g_callbacks.fetch_add(1);
}

int Say(const char* call, CUptiResult r) {
  std::printf("OWN %s %d\n", call, static_cast<int>(r));
  return r;
}

CUpti_SubscriberHandle Start() {
  uint32_t version = 0;
  Say("cuptiGetVersion", cuptiGetVersion(&version));
  CUpti_SubscriberHandle sub = nullptr;
  Say("cuptiSubscribe", cuptiSubscribe(&sub, OnCallback, &g_callbacks));
  Say("cuptiEnableCallback",
      cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  size_t value = 4 << 20, size = sizeof value;
  Say("cuptiActivitySetAttribute", cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &size, &value));
  Say("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(Requested, Completed));
  Say("cuptiActivityEnable", cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  Say("cuptiActivityEnableLatencyTimestamps", cuptiActivityEnableLatencyTimestamps(1));
  Say("cuptiActivityPushExternalCorrelationId",
      cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 42));
  if (std::getenv("OWN_UNCOVERED"))
    Say("cuptiActivityConfigureUnifiedMemoryCounter", cuptiActivityConfigureUnifiedMemoryCounter(nullptr, 0));
  return sub;
}

void Stop(CUpti_SubscriberHandle sub) {
  uint64_t id = 0, t = 0;
  Say("cuptiActivityPopExternalCorrelationId",
      cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id));
  Say("cuptiGetTimestamp", cuptiGetTimestamp(&t));
  Say("cuptiActivityFlushAll", cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  std::printf("OWN_RECORDS %llu OWN_CALLBACKS %llu OWN_DROPPED %llu\n",
              static_cast<unsigned long long>(g_records.load()), static_cast<unsigned long long>(g_callbacks.load()),
              static_cast<unsigned long long>(g_dropped.load()));
  Say("cuptiActivityDisable", cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  Say("cuptiUnsubscribe", cuptiUnsubscribe(sub));
  if (!std::getenv("OWN_NO_FINALIZE")) Say("cuptiFinalize", cuptiFinalize());  // as Kineto does with TEARDOWN_CUPTI=1
}

// 13.5's multi-subscriber API, looked up at run time like the collector does.
struct V2Client {
  twinscope::cupti::v2::Api api;
  CUpti_SubscriberHandle sub = nullptr;
  static inline CUpti_SubscriberHandle the_sub = nullptr;

  static void CUPTIAPI Requested(uint8_t** b, size_t* s, size_t* m, twinscope::cupti::v2::BufferRequestInfo*) {
    own::Requested(b, s, m);
  }
  static void CUPTIAPI Completed(uint8_t* buffer, size_t, size_t valid, twinscope::cupti::v2::BufferCompleteInfo*);

  bool Start() {
    api.Resolve([](const char* name) { return dlsym(RTLD_DEFAULT, name); });
    if (!api.complete()) {
      std::printf("OWN_V2 missing\n");
      return false;
    }
    char other[128] = {};
    twinscope::cupti::v2::SubscriberParams params;
    twinscope::cupti::v2::MultiSubscriberParams(&params, "own v2 client", other, sizeof other);
    Say("cuptiSubscribe_v2", api.Subscribe(&sub, OnCallback, &g_callbacks, &params));
    the_sub = sub;
    Say("cuptiEnableCallback",
        cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
    Say("cuptiActivityRegisterCallbacks_v2", api.ActivityRegisterCallbacks(sub, Requested, Completed));
    Say("cuptiActivityEnable_v2", api.ActivityEnable(sub, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, nullptr));
    return true;
  }
};

void CUPTIAPI V2Client::Completed(uint8_t* buffer, size_t, size_t valid, twinscope::cupti::v2::BufferCompleteInfo*) {
  CUpti_Activity* record = nullptr;
  auto next =
      reinterpret_cast<twinscope::cupti::v2::GetNextRecordFn>(dlsym(RTLD_DEFAULT, "cuptiActivityGetNextRecord_v2"));
  while (next(the_sub, buffer, valid, &record) == CUPTI_SUCCESS)
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) g_records.fetch_add(1);
  std::free(buffer);
}

}  // namespace own

// ---- A CUPTI client with its own clock ------------------------------------------------

namespace own_clock {

uint64_t g_scale = 1, g_offset = 1'000'000'000'000'000ull;

uint64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}
uint64_t CUPTIAPI Clock() { return g_scale * MonotonicNs() + g_offset; }

// The program's window, in its clock: every record it gets must lie inside
// (give or take the tolerance, see cli_cupti_test.cpp).
std::atomic<uint64_t> g_lo{0}, g_hi{0};
constexpr uint64_t kToleranceNs = 1'000'000;

struct Kind {
  CUpti_ActivityKind kind;
  const char* name;
  uint64_t duration_ns;  // what the fake CUPTI gives the kind (0: one timestamp)
  std::atomic<uint64_t> records{0}, in_clock{0}, durations_ok{0};
};
Kind g_kinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "concurrent_kernel", 1000},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy", 500},
    {CUPTI_ACTIVITY_KIND_MEMSET, "memset", 500},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "runtime", 500},
    {CUPTI_ACTIVITY_KIND_DRIVER, "driver", 500},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "synchronization", 500},
    {CUPTI_ACTIVITY_KIND_OVERHEAD, "overhead", 500},
    {CUPTI_ACTIVITY_KIND_MARKER, "marker", 0},
    {CUPTI_ACTIVITY_KIND_CUDA_EVENT, "cuda_event", 0},
    {CUPTI_ACTIVITY_KIND_MEMCPY2, "memcpy2", 500},
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "external_correlation", 0},
    {CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER, "unified_memory_counter", 500},
};

// start/end of a record as a client built against CUPTI 13.0 reads them.
bool Times(const CUpti_Activity* r, uint64_t* start, uint64_t* end) {
  auto both = [&](const auto* a) {
    *start = a->start;
    *end = a->end;
    return true;
  };
  switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return both(reinterpret_cast<const CUpti_ActivityKernel10*>(r));
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return both(reinterpret_cast<const CUpti_ActivityMemcpy6*>(r));
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return both(reinterpret_cast<const CUpti_ActivityMemset4*>(r));
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return both(reinterpret_cast<const CUpti_ActivityAPI*>(r));
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return both(reinterpret_cast<const CUpti_ActivitySynchronization2*>(r));
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      return both(reinterpret_cast<const CUpti_ActivityOverhead3*>(r));
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return both(reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(r));
    case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER:
      return both(reinterpret_cast<const CUpti_ActivityUnifiedMemoryCounter3*>(r));
    case CUPTI_ACTIVITY_KIND_MARKER:
      *start = *end = reinterpret_cast<const CUpti_ActivityMarker2*>(r)->timestamp;
      return true;
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT:
      *start = *end = reinterpret_cast<const CUpti_ActivityCudaEvent2*>(r)->deviceTimestamp;
      return true;
    default:
      return false;
  }
}

void CUPTIAPI Completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  const uint64_t tol = kToleranceNs * g_scale, lo = g_lo.load() - tol, hi = g_hi.load() + tol;
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    for (Kind& k : g_kinds) {
      if (k.kind != r->kind) continue;
      k.records.fetch_add(1);
      uint64_t start = 0, end = 0;
      if (!Times(r, &start, &end)) break;
      if (start >= lo && end <= hi && start <= end) k.in_clock.fetch_add(1);
      // The duration in the program's units, within 5%.
      const double d = static_cast<double>(end - start), want = static_cast<double>(k.duration_ns * g_scale);
      if (end >= start && d >= want * 0.95 && d <= want * 1.05) k.durations_ok.fetch_add(1);
    }
  }
  std::free(buffer);
}

void Start() {
  const char* clock = std::getenv("OWN_CLOCK");
  if (clock && std::string(clock) == "tsc") {
    g_scale = 3;  // a 3 GHz TSC: ticks, not ns
    g_offset = 12345;
  }
  own::Say("cuptiActivityRegisterTimestampCallback", cuptiActivityRegisterTimestampCallback(Clock));
  own::Say("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(own::Requested, Completed));
  for (Kind& k : g_kinds) own::Say("cuptiActivityEnable", cuptiActivityEnable(k.kind));
}

void Run() {
  fakecupti_set_host_clock(1);  // here: it goes to the copy of the fake that holds the driver by now
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a profile's setup, before its window
  g_lo.store(Clock());
  Launch("_Z5clockv", 2, 64);
  Launch("_Z5clockv", 2, 64);
  fakecupti_memcpy(4096);
  fakecupti_memset(4096);
  for (const Kind& k : g_kinds)
    if (k.kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && k.kind != CUPTI_ACTIVITY_KIND_MEMCPY &&
        k.kind != CUPTI_ACTIVITY_KIND_MEMSET)
      fakecupti_emit(k.kind);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // past every record's end
  g_hi.store(Clock());
  uint64_t t = 0;
  own::Say("cuptiGetTimestamp", cuptiGetTimestamp(&t));
  const uint64_t after = Clock();
  std::printf("OWN_TIMESTAMP_IN_CLOCK %d\n", t >= g_hi.load() && t <= after ? 1 : 0);
  own::Say("cuptiActivityFlushAll", cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  for (const Kind& k : g_kinds)
    std::printf("OWN_CLOCK %s records %llu in_clock %llu durations_ok %llu\n", k.name,
                static_cast<unsigned long long>(k.records.load()), static_cast<unsigned long long>(k.in_clock.load()),
                static_cast<unsigned long long>(k.durations_ok.load()));
  for (const Kind& k : g_kinds) own::Say("cuptiActivityDisable", cuptiActivityDisable(k.kind));
  own::Say("cuptiFinalize", cuptiFinalize());
}

}  // namespace own_clock

void WriteFakeState(const char* path) {
  if (!path) return;
  FILE* f = std::fopen(path, "w");
  if (!f) return;
  std::fprintf(f,
               "{\"kernel\": %d, \"concurrent_kernel\": %d, \"memcpy\": %d, \"memset\": %d, "
               "\"pool_limit\": %lld, \"device_buffer_size\": %lld, \"cb_launch\": %d, \"cb_graph\": %d, "
               "\"cb_memcpy\": %d, \"cb_malloc\": %d, \"cb_sync\": %d, \"cb_graphexec\": %d}\n",
               fakecupti_activity_enabled(CUPTI_ACTIVITY_KIND_KERNEL),
               fakecupti_activity_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
               fakecupti_activity_enabled(CUPTI_ACTIVITY_KIND_MEMCPY),
               fakecupti_activity_enabled(CUPTI_ACTIVITY_KIND_MEMSET),
               static_cast<long long>(fakecupti_attribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT)),
               static_cast<long long>(fakecupti_attribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE)),
               fakecupti_callback_enabled(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000),
               fakecupti_callback_enabled(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000),
               fakecupti_callback_enabled(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020),
               fakecupti_callback_enabled(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020),
               fakecupti_callback_enabled(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize),
               fakecupti_callback_enabled(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED));
  std::fclose(f);
}

// A graph [A(8), memcpy, A(16), child{C(2)}, memset] and its exec.
CUgraphExec MakeGraph(int clone_callbacks) {
  CUgraph g = fakecupti_graph_create();
  fakecupti_graph_add_kernel(g, "_Z7kernelAPf", 8, 1, 1, 128, 1, 1);
  fakecupti_graph_add_memcpy(g, 65536);
  fakecupti_graph_add_kernel(g, "_Z7kernelAPf", 16, 1, 1, 128, 1, 1);
  CUgraph child = fakecupti_graph_create();
  fakecupti_graph_add_kernel(child, "_Z7kernelCv", 2, 1, 1, 64, 1, 1);
  fakecupti_graph_add_child(g, child);
  fakecupti_graph_add_memset(g, 4096);
  return fakecupti_graph_instantiate(g, clone_callbacks);
}

enum class Phase { kBeforeInjection, kMain };

int Run(const std::string& scenario, Phase phase = Phase::kMain) {
  if (scenario == "plain") {
    Launch("_Z7kernelAPf", 1, 32);  // outside any range
    for (int i = 0; i < 3; ++i) {
      nvtxRangePushA("step");
      Launch("_Z7kernelAPf", 4, 256);
      Launch("_Z7kernelAPf", 4, 256);
      Launch("_Z7kernelBv", 2, 64, FAKE_API_DRIVER);
      nvtxRangePop();
    }
    fakecupti_memcpy(65536);
    fakecupti_memset(4096);
    fakecupti_flush();
  } else if (scenario == "apis") {
    CUstream captured = fakecupti_create_stream();
    fakecupti_set_capturing(captured, 1);
    nvtxRangePushA("apis");
    Launch("_Z6nestedv", 3, 32, FAKE_API_RUNTIME_NESTED);
    Launch("_Z5rtexv", 5, 32, FAKE_API_RUNTIME_EX);
    Launch("_Z5drexv", 6, 32, FAKE_API_DRIVER_EX);
    Launch("_Z7unnamedv", 7, 32, FAKE_API_DRIVER, nullptr, 0, /*symbol_missing=*/1);
    Launch("_Z6failedv", 8, 32, FAKE_API_RUNTIME, nullptr, /*result=*/1);
    Launch("_Z8capturedv", 9, 32, FAKE_API_RUNTIME, captured);
    Launch("_Z5plainv", 10, 32);
    nvtxRangePop();
    fakecupti_flush();
  } else if (scenario == "graph") {
    CUgraphExec exec = MakeGraph(1);
    for (int i = 0; i < 3; ++i) {
      nvtxRangePushA("step");
      fakecupti_graph_launch(exec, nullptr, 0);
      nvtxRangePop();
    }
    fakecupti_graph_launch(exec, nullptr, /*driver=*/1);
    CUgraphExec no_clones = MakeGraph(0);
    nvtxRangePushA("noclone");
    fakecupti_graph_launch(no_clones, nullptr, 0);
    nvtxRangePop();
    CUstream captured = fakecupti_create_stream();
    fakecupti_set_capturing(captured, 1);
    fakecupti_graph_launch(exec, captured, 0);
    fakecupti_graph_exec_destroy(no_clones);
    fakecupti_flush();
  } else if (scenario == "seed001") {
    // A graph of one DtoD copy and one tiny kernel, replayed 20 times, with
    // CUPTI's device buffers good for 5 replays when MEMCPY is not enabled.
    fakecupti_set_graph_pool_units(5);
    CUgraph g = fakecupti_graph_create();
    fakecupti_graph_add_memcpy(g, 65536);
    fakecupti_graph_add_kernel(g, "_Z4tinyv", 1, 1, 1, 32, 1, 1);
    CUgraphExec exec = fakecupti_graph_instantiate(g, 1);
    for (int i = 0; i < 20; ++i) fakecupti_graph_launch(exec, nullptr, 0);
    fakecupti_flush();
  } else if (scenario == "invalid") {
    fakecupti_set_invalid_timestamps(3, 1);
    for (int i = 0; i < 6; ++i) Launch("_Z1kv", 1, 32);
    fakecupti_set_invalid_timestamps(3, 0);
    for (int i = 0; i < 6; ++i) Launch("_Z1kv", 1, 32);
    fakecupti_set_invalid_timestamps(0, 0);
    fakecupti_flush();
  } else if (scenario == "drops") {
    for (int i = 0; i < 4; ++i) Launch("_Z1kv", 1, 32);
    fakecupti_drop(7);
    fakecupti_flush();
  } else if (scenario == "lose") {
    fakecupti_lose_next(2);
    for (int i = 0; i < 5; ++i) Launch("_Z1kv", 1, 32);
    fakecupti_flush();
  } else if (scenario == "evict") {
    for (int i = 0; i < 10; ++i) Launch("_Z1kv", 1, 32);
    fakecupti_flush();
  } else if (scenario == "unflushed") {
    // Records still inside "CUPTI" at exit: the collector's atexit flush must get them.
    for (int i = 0; i < 6; ++i) Launch("_Z1kv", 1, 32);
  } else if (scenario == "fork") {
    // A child forked after CUDA init that exits normally must neither hang
    // in our atexit nor touch the parent's trace.
    for (int i = 0; i < 2; ++i) Launch("_Z1kv", 1, 32);
    pid_t child = fork();
    if (child == 0) {
      Launch("_Z5childv", 1, 32);
      std::exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    std::printf("CHILD_EXIT %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    Launch("_Z1kv", 1, 32);
    fakecupti_flush();
  } else if (scenario == "throughput") {
    // Not a ctest: a manual check of the collector's record path on CPU.
    // FAKE_REPLAYS replays of a 100-kernel graph, flushed every 100 replays.
    long replays = std::atol(std::getenv("FAKE_REPLAYS") ? std::getenv("FAKE_REPLAYS") : "10000");
    CUgraph g = fakecupti_graph_create();
    for (int k = 0; k < 100; ++k) fakecupti_graph_add_kernel(g, "_Z4tinyPi", 1, 1, 1, 32, 1, 1);
    CUgraphExec exec = fakecupti_graph_instantiate(g, 1);
    auto t0 = std::chrono::steady_clock::now();
    for (long r = 0; r < replays; ++r) {
      nvtxRangePushA("step");
      fakecupti_graph_launch(exec, nullptr, 0);
      nvtxRangePop();
      if (r % 100 == 99) fakecupti_flush();
    }
    fakecupti_flush();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("THROUGHPUT %ld kernels in %.2f s: %.0f ns/kernel\n", replays * 100, s, s * 1e9 / (replays * 100.0));
  } else if (scenario == "streams") {
    // Stream ids: s1 x3, s2 x3, default x2, then s1 destroyed and its handle reused by s3 x2.
    CUstream s1 = fakecupti_create_stream(), s2 = fakecupti_create_stream();
    for (int i = 0; i < 3; ++i) Launch("_Z2k1v", 1, 32, FAKE_API_RUNTIME, s1);
    for (int i = 0; i < 3; ++i) Launch("_Z2k2v", 1, 32, FAKE_API_RUNTIME, s2);
    for (int i = 0; i < 2; ++i) Launch("_Z2k0v", 1, 32);
    fakecupti_destroy_stream(s1);
    CUstream s3 = fakecupti_create_stream();
    std::printf("SAME_HANDLE %d\n", s3 == s1 ? 1 : 0);
    for (int i = 0; i < 2; ++i) Launch("_Z2k3v", 1, 32, FAKE_API_RUNTIME, s3);
    fakecupti_flush();
    std::printf("STREAM_ID_CALLS %llu\n", static_cast<unsigned long long>(fakecupti_stream_id_calls()));
  } else if (scenario == "bench_levels") {
    // The collector's benchmark levels (TWINSCOPE_BENCH_LEVELS=1): launches at
    // level 2, 1, 0, then 2 again, each under its own kernel name.
    void* lib = dlopen(g_injection, RTLD_NOW | RTLD_NOLOAD);
    auto set = lib ? reinterpret_cast<int (*)(int)>(dlsym(lib, "twinscope_bench_level")) : nullptr;
    if (!set) {
      std::fprintf(stderr, "twinscope_bench_level not found in %s\n", g_injection);
      return 1;
    }
    const struct {
      int level, launches;
      const char* kernel;
    } phases[] = {{2, 3, "_Z2l2v"}, {1, 4, "_Z2l1v"}, {0, 5, "_Z2l0v"}, {2, 2, "_Z3l2bv"}};
    for (const auto& p : phases) {
      std::printf("LEVEL %d -> %d\n", p.level, set(p.level));
      nvtxRangePushA("phase");
      for (int i = 0; i < p.launches; ++i) Launch(p.kernel, 1, 32);
      nvtxRangePop();
      fakecupti_flush();
    }
    std::printf("LEVEL 9 -> %d\n", set(9));
  } else if (scenario == "eager_throughput") {
    // Not a ctest: the collector's eager launch path on CPU (for perf).
    // FAKE_LAUNCHES runtime launches of one kernel inside an NVTX range, flushed every 1000.
    long launches = std::atol(std::getenv("FAKE_LAUNCHES") ? std::getenv("FAKE_LAUNCHES") : "1000000");
    auto t0 = std::chrono::steady_clock::now();
    nvtxRangePushA("step");
    for (long i = 0; i < launches; ++i) {
      Launch("_Z4tinyPi", 1, 32);
      if (i % 1000 == 999) fakecupti_flush();
    }
    nvtxRangePop();
    fakecupti_flush();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("THROUGHPUT %ld launches in %.2f s: %.0f ns/launch\n", launches, s, s * 1e9 / launches);
  } else if (scenario == "threads") {
    // Four threads launch inside their own ranges and exit (their launch
    // rings are closed and freed), then the main thread launches again.
    nvtxMarkA("start");  // NVTX's own lazy initialisation, before threads race into it
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([t] {
        nvtxRangePushA(("worker" + std::to_string(t)).c_str());
        for (int i = 0; i < 50; ++i) Launch("_Z6workerv", 1 + t, 32);
        nvtxRangePop();
      });
    }
    for (auto& th : threads) th.join();
    nvtxRangePushA("main");
    Launch("_Z6workerv", 9, 32);
    nvtxRangePop();
    fakecupti_flush();
  } else if (scenario == "late") {
    // A launch from an atexit handler that runs after the main thread's
    // thread_local destructors (glibc runs those first) and before the
    // collector's own atexit flush (registered earlier, so it runs later).
    Launch("_Z1kv", 1, 32);
    std::atexit([] {
      Launch("_Z4latev", 3, 32);
      fakecupti_flush();
    });
  } else if (scenario == "held") {
    for (int i = 0; i < 3; ++i) Launch("_Z1kv", 1, 32);
    fakecupti_flush();
  } else if (scenario == "sigterm") {
    for (int i = 0; i < 4; ++i) Launch("_Z1kv", 1, 32);
    std::fflush(stdout);
    raise(SIGTERM);
    std::printf("NOT REACHED\n");
  } else if (scenario == "sigterm_handler") {
    for (int i = 0; i < 4; ++i) Launch("_Z1kv", 1, 32);
    raise(SIGTERM);
    if (g_app_handler_called) std::printf("APP_HANDLER_CALLED\n");
    Launch("_Z1kv", 1, 32);
  } else if (scenario == "periodic") {
    for (int i = 0; i < 3; ++i) Launch("_Z1kv", 1, 32);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    std::fflush(stdout);
    raise(SIGKILL);  // no atexit, no signal handler: only periodic flushes count
  } else if (scenario == "own_client" || scenario == "own_v2_client" || scenario == "own_first") {
    // 6 launches while the program's own client runs, 2 after it stopped
    // (own_first: the client started before the collector was injected).
    static CUpti_SubscriberHandle sub = nullptr;
    own::V2Client v2;
    if (scenario == "own_first") {
      if (!sub) sub = own::Start();
      if (phase == Phase::kBeforeInjection) return 0;
    } else if (scenario == "own_client") {
      sub = own::Start();
    } else if (!v2.Start()) {
      return 5;
    }
    nvtxRangePushA("step");
    for (int i = 0; i < 6; ++i) Launch("_Z3ownv", 2, 64);
    nvtxRangePop();
    if (scenario != "own_v2_client") {
      own::Stop(sub);
    } else {
      own::Say("cuptiActivityFlushAll", cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
      std::printf("OWN_RECORDS %llu OWN_CALLBACKS %llu\n", static_cast<unsigned long long>(own::g_records.load()),
                  static_cast<unsigned long long>(own::g_callbacks.load()));
    }
    for (int i = 0; i < 2; ++i) Launch("_Z5afterv", 1, 32);
    fakecupti_flush();
  } else if (scenario == "init_only") {
    // Initializes CUDA (the collector is injected) and launches nothing, as a compile worker does.
  } else if (scenario == "serve") {
    // A server: some work, then it waits to be stopped (SIGKILL in the stop-request tests).
    for (int i = 0; i < 3; ++i) Launch("_Z5servev", 1, 32);
    fakecupti_flush();
    std::printf("SERVING\n");
    std::fflush(stdout);
    for (;;) pause();
  } else if (scenario == "own_clock") {
    const bool first = std::getenv("OWN_CLOCK_FIRST") != nullptr;
    if (phase == Phase::kBeforeInjection) {
      if (first) own_clock::Start();
      return 0;
    }
    if (!first) own_clock::Start();
    own_clock::Run();
  } else {
    std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <collector.so> <scenario> [fake-state.json]\n", argv[0]);
    return 2;
  }
  std::string scenario = argv[2];
  if (scenario == "held") fakecupti_hold_seat();
  if (scenario == "sigterm_handler") signal(SIGTERM, AppHandler);
  if (scenario == "own_first" || scenario == "own_clock") Run(scenario, Phase::kBeforeInjection);
  // fork_plain: the process forks before CUDA is initialized and both run "plain" (a worker forked by
  // multiprocessing, which initializes CUDA itself).
  pid_t forked = -1;
  if (scenario == "fork_plain") {
    forked = fork();
    scenario = "plain";
  }
  g_injection = argv[1];
  if (std::string(argv[1]) != "none")
    if (int rc = LoadInjection(argv[1])) return rc;
  fakecupti_create_context(0);
  int rc = Run(scenario);
  WriteFakeState(argc > 3 ? argv[3] : nullptr);
  if (forked > 0) {
    int status = 0;
    waitpid(forked, &status, 0);
    std::printf("FORKED_CHILD_EXIT %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  std::printf("DRIVER_DONE %s\n", scenario.c_str());
  return rc;
}
