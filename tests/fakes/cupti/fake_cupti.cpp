// Fake libcupti.so.13 for CPU tests (see fakecupti.h). Implements the CUPTI
// functions the collector resolves, with CUPTI 13's signatures and record
// layouts (the real headers), and the fakecupti_* control functions.
//
// The fake's lock is never held while it calls into the collector, because
// the collector calls back into the fake (timestamps, record iteration).
#include <cupti.h>
#include <time.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fake_objects.h"
#include "fakecupti.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Subscriber {
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
};

// One activity record until the next flush, stored inline (no allocation per
// record: bench/launch_path counts the application thread's allocations).
struct PendingRecord {
  uint32_t size;
  alignas(8) uint8_t bytes[256];
};

struct State {
  std::mutex mu;
  bool subscribed = false;
  bool seat_held = false;
  Subscriber sub;
  std::set<std::pair<int, uint32_t>> enabled_callbacks;
  std::set<int> enabled_kinds;
  std::map<int, int64_t> attributes;
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  std::vector<PendingRecord> pending;
  uint64_t gpu_clock = 1'000'000'000;
  uint64_t kernel_records_made = 0;
  uint64_t invalid_every = 0;
  int invalid_mode = 0;
  uint64_t lose_next = 0;
  uint64_t pool_units = 0;  // 0: model off
  uint64_t pool_used = 0;
  uint64_t uid = 100;  // graph/node/exec ids
  std::map<std::string, CUfunc_st*> funcs;
  CUcontext context = nullptr;
};

State& S() {
  static State* s = new State();
  return *s;
}

std::atomic<uint32_t> g_correlation{1};

// What Fire() reads on every API call, without the lock (CUPTI's own
// dispatch is cheap; a locked set lookup here would be counted as the
// collector's cost by bench/launch_path): the subscriber while subscribed, and
// which callbacks are enabled. Written under S().mu.
std::atomic<const Subscriber*> g_subscriber{nullptr};
constexpr int kDomains = 8;
constexpr uint32_t kCbids = 1024;
std::atomic<bool> g_enabled[kDomains][kCbids];
bool EnabledFast(int domain, uint32_t cbid) {
  return domain >= 0 && domain < kDomains && cbid < kCbids && g_enabled[domain][cbid].load(std::memory_order_acquire);
}
std::atomic<uint64_t> g_dropped_to_report{0};
std::atomic<uint64_t> g_buffers_completed{0};

uint64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

CUfunc_st* FuncLocked(const char* name) {
  std::string n = name ? name : "";
  auto& f = S().funcs[n];
  if (!f) f = new CUfunc_st{n};
  return f;
}

bool CallbackEnabled(int domain, uint32_t cbid) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.subscribed && s.enabled_callbacks.count({domain, cbid});
}

void Fire(CUpti_CallbackDomain domain, uint32_t cbid, const void* data) {
  const Subscriber* sub = g_subscriber.load(std::memory_order_acquire);
  if (!sub || !EnabledFast(static_cast<int>(domain), cbid)) return;
  sub->callback(sub->userdata, domain, cbid, data);
}

// One API call: enter callback, body, exit callback; returns the correlation id.
template <typename Body>
uint32_t ApiCall(CUpti_CallbackDomain domain, uint32_t cbid, const char* fname, const void* params, const char* symbol,
                 int* result, Body body) {
  uint32_t corr = g_correlation.fetch_add(1);
  uint64_t corr_data = 0;
  CUpti_CallbackData cb{};
  cb.functionName = fname;
  cb.functionParams = params;
  cb.functionReturnValue = result;
  cb.symbolName = symbol;
  cb.context = S().context;
  cb.correlationId = corr;
  cb.correlationData = &corr_data;
  cb.callbackSite = CUPTI_API_ENTER;
  Fire(domain, cbid, &cb);
  body(corr);
  cb.callbackSite = CUPTI_API_EXIT;
  Fire(domain, cbid, &cb);
  return corr;
}

template <typename T>
void PushRecordLocked(const T& rec) {
  static_assert(sizeof(T) <= sizeof(PendingRecord::bytes));
  PendingRecord& p = S().pending.emplace_back();
  p.size = sizeof(T);
  std::memcpy(p.bytes, &rec, sizeof(T));
}

void KernelRecordLocked(CUfunc_st* f, const unsigned grid[3], const unsigned block[3], uint32_t corr, uint64_t node_id,
                        uint32_t graph_id, uint32_t stream) {
  State& s = S();
  if (!s.enabled_kinds.count(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) return;
  if (s.lose_next) {
    s.lose_next--;
    return;
  }
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = s.gpu_clock;
  k.end = s.gpu_clock + 1000;
  s.gpu_clock += 2000;
  s.kernel_records_made++;
  if (s.invalid_every && s.kernel_records_made % s.invalid_every == 0) {
    if (s.invalid_mode == 0)
      k.start = k.end = 0;
    else if (s.invalid_mode == 1)
      k.end = k.start - 500;
    else
      k.start = 0;
  }
  k.deviceId = s.context ? static_cast<uint32_t>(s.context->device) : 0;
  k.contextId = s.context ? s.context->id : 1;
  k.streamId = stream;
  k.gridX = static_cast<int32_t>(grid[0]);
  k.gridY = static_cast<int32_t>(grid[1]);
  k.gridZ = static_cast<int32_t>(grid[2]);
  k.blockX = static_cast<int32_t>(block[0]);
  k.blockY = static_cast<int32_t>(block[1]);
  k.blockZ = static_cast<int32_t>(block[2]);
  k.staticSharedMemory = 128;
  k.dynamicSharedMemory = 256;
  k.registersPerThread = 32;
  k.correlationId = corr;
  k.gridId = static_cast<int64_t>(s.kernel_records_made);
  k.name = f->name.c_str();
  k.graphNodeId = node_id;
  k.graphId = graph_id;
  PushRecordLocked(k);
}

void CopyRecordLocked(bool memset, uint64_t bytes, uint32_t corr, uint64_t node_id, uint32_t graph_id) {
  State& s = S();
  uint64_t start = s.gpu_clock, end = s.gpu_clock + 500;
  s.gpu_clock += 1000;
  if (memset) {
    if (!s.enabled_kinds.count(CUPTI_ACTIVITY_KIND_MEMSET)) return;
    CUpti_ActivityMemset4 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.value = 0;
    m.bytes = bytes;
    m.start = start;
    m.end = end;
    m.correlationId = corr;
    m.graphNodeId = node_id;
    m.graphId = graph_id;
    PushRecordLocked(m);
  } else {
    if (!s.enabled_kinds.count(CUPTI_ACTIVITY_KIND_MEMCPY)) return;
    CUpti_ActivityMemcpy6 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    m.bytes = bytes;
    m.start = start;
    m.end = end;
    m.correlationId = corr;
    m.graphNodeId = node_id;
    m.graphId = graph_id;
    PushRecordLocked(m);
  }
}

constexpr size_t kHeader = 8;
size_t Align8(size_t n) { return (n + 7) & ~size_t(7); }

void Deliver() {
  State& s = S();
  std::vector<PendingRecord> records;
  CUpti_BuffersCallbackRequestFunc request;
  CUpti_BuffersCallbackCompleteFunc complete;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    records.swap(s.pending);
    request = s.request;
    complete = s.complete;
  }
  if (!request || !complete) return;
  size_t i = 0;
  while (i < records.size()) {
    uint8_t* buffer = nullptr;
    size_t size = 0, max_records = 0;
    request(&buffer, &size, &max_records);
    if (!buffer || size < kHeader + records[i].size) {
      // CUPTI drops what it cannot place and reports it.
      g_dropped_to_report.fetch_add(records.size() - i);
      break;
    }
    size_t used = 0;
    while (i < records.size() && used + kHeader + Align8(records[i].size) <= size) {
      uint64_t n = records[i].size;
      std::memcpy(buffer + used, &n, sizeof n);
      std::memcpy(buffer + used + kHeader, records[i].bytes, n);
      used += kHeader + Align8(n);
      ++i;
    }
    g_buffers_completed.fetch_add(1);
    complete(s.context, 0, buffer, size, used);
  }
  if (records.empty() && g_dropped_to_report.load()) {
    uint8_t* buffer = nullptr;
    size_t size = 0, max_records = 0;
    request(&buffer, &size, &max_records);
    g_buffers_completed.fetch_add(1);
    complete(s.context, 0, buffer, size, 0);
  }
  records.clear();  // keep its capacity for the next records
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.pending.empty()) s.pending.swap(records);
}

struct CallbackName {
  int domain;
  uint32_t cbid;
  const char* name;
};
const CallbackName kNames[] = {
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, "cudaMalloc_v3020"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, "cudaMemcpyAsync_v3020"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, "cudaMemsetAsync_v3020"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel_v7000"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, "cudaLaunchKernel_ptsz_v7000"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, "cudaLaunchKernelExC_v11060"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch_v10000"},
    {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, "cudaStreamSynchronize_v3020"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2, "cuMemcpyDtoD_v2"},
    {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, "cuCtxSynchronize"},
};

void CloneInto(CUgraph g, CUgraphExec exec, bool fire_clones) {
  for (CUgraphNode_st* n : g->nodes) {
    uint64_t clone_id;
    CUgraphNode_st* clone;
    {
      std::lock_guard<std::mutex> lock(S().mu);
      clone = new CUgraphNode_st(*n);
      clone->id = clone_id = ++S().uid;
    }
    if (fire_clones) {
      CUpti_GraphData gd{};
      gd.graph = g;
      gd.node = clone;
      gd.originalNode = n;
      gd.nodeType = n->type;
      CUpti_ResourceData rd{};
      rd.context = S().context;
      rd.resourceDescriptor = &gd;
      Fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, &rd);
    }
    if (n->type == CU_GRAPH_NODE_TYPE_GRAPH) {
      CloneInto(n->child, exec, fire_clones);
      continue;
    }
    FakeExecOp op{
        n->type, clone_id, n->func, {n->grid[0], n->grid[1], n->grid[2]}, {n->block[0], n->block[1], n->block[2]},
        n->bytes};
    if (n->type == CU_GRAPH_NODE_TYPE_MEMCPY) exec->has_memcpy = true;
    if (n->type == CU_GRAPH_NODE_TYPE_MEMSET) exec->has_memset = true;
    exec->ops.push_back(op);
  }
}

CUgraphNode AddNode(CUgraph g, CUgraphNodeType type) {
  std::lock_guard<std::mutex> lock(S().mu);
  auto* n = new CUgraphNode_st{};
  n->type = type;
  n->id = ++S().uid;
  g->nodes.push_back(n);
  return n;
}

}  // namespace

// ---- CUPTI API -------------------------------------------------------------------

FAKE_EXPORT CUptiResult cuptiGetVersion(uint32_t* version) {
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  switch (result) {
    case CUPTI_SUCCESS:
      *str = "CUPTI_SUCCESS";
      break;
    case CUPTI_ERROR_INVALID_PARAMETER:
      *str = "CUPTI_ERROR_INVALID_PARAMETER";
      break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
      break;
    case CUPTI_ERROR_MAX_LIMIT_REACHED:
      *str = "CUPTI_ERROR_MAX_LIMIT_REACHED";
      break;
    default:
      *str = "CUPTI_ERROR_UNKNOWN";
      break;
  }
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                       void* userdata) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.seat_held || s.subscribed) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  s.subscribed = true;
  s.sub = {callback, userdata};
  g_subscriber.store(&s.sub, std::memory_order_release);
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&s.sub);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                          void* userdata, CUpti_SubscriberParams* params) {
  if (params && params->structSize == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  CUptiResult r = cuptiSubscribe(subscriber, callback, userdata);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && params && params->oldSubscriberName &&
      params->oldSubscriberSize > 0)
    std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", "CUPTI for Nsight Systems (fake)");
  return r;
}

FAKE_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().subscribed = false;
  g_subscriber.store(nullptr, std::memory_order_release);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                            CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (!S().subscribed || subscriber != reinterpret_cast<CUpti_SubscriberHandle>(&S().sub))
    return CUPTI_ERROR_INVALID_PARAMETER;
  if (enable)
    S().enabled_callbacks.insert({domain, cbid});
  else
    S().enabled_callbacks.erase({domain, cbid});
  if (domain >= 0 && domain < kDomains && cbid < kCbids)
    g_enabled[domain][cbid].store(enable != 0, std::memory_order_release);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiEnableDomain(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain) {
  return CUPTI_ERROR_NOT_SUPPORTED;  // the collector enables callbacks one by one
}

FAKE_EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  for (const auto& n : kNames)
    if (n.domain == domain && n.cbid == cbid) {
      *name = n.name;
      return CUPTI_SUCCESS;
    }
  return CUPTI_ERROR_INVALID_PARAMETER;
}

FAKE_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                       CUpti_BuffersCallbackCompleteFunc complete) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (S().seat_held) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  S().request = request;
  S().complete = complete;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (S().seat_held) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  S().enabled_kinds.insert(kind);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* size, void* value) {
  if (!size || !value || *size != sizeof(size_t)) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(S().mu);
  S().attributes[attr] = static_cast<int64_t>(*static_cast<size_t*>(value));
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  size_t offset = 0;
  if (*record) {
    uint8_t* prev = reinterpret_cast<uint8_t*>(*record) - kHeader;
    uint64_t n;
    std::memcpy(&n, prev, sizeof n);
    offset = static_cast<size_t>(prev - buffer) + kHeader + Align8(n);
  }
  if (offset + kHeader > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + offset + kHeader);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = g_dropped_to_report.exchange(0);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t) {
  Deliver();
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetTimestamp(uint64_t* t) {
  *t = NowNs();
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetDeviceId(CUcontext ctx, uint32_t* device) {
  if (!ctx) return CUPTI_ERROR_INVALID_PARAMETER;
  *device = static_cast<uint32_t>(ctx->device);
  return CUPTI_SUCCESS;
}

std::atomic<uint64_t> g_stream_id_calls{0};

FAKE_EXPORT CUptiResult cuptiGetStreamIdEx(CUcontext, CUstream stream, uint8_t per_thread, uint32_t* id) {
  g_stream_id_calls.fetch_add(1, std::memory_order_relaxed);
  *id = stream ? stream->id : (per_thread ? 2u : 7u);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT uint64_t fakecupti_stream_id_calls(void) { return g_stream_id_calls.load(); }

FAKE_EXPORT CUptiResult cuptiGetGraphNodeId(CUgraphNode node, uint64_t* id) {
  if (!node) return CUPTI_ERROR_INVALID_PARAMETER;
  *id = node->id;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetGraphExecId(CUgraphExec exec, uint32_t* id) {
  if (!exec) return CUPTI_ERROR_INVALID_PARAMETER;
  *id = exec->id;
  return CUPTI_SUCCESS;
}

// ---- Control ---------------------------------------------------------------------

FAKE_EXPORT CUcontext fakecupti_create_context(int ordinal) {
  CUcontext ctx;
  {
    std::lock_guard<std::mutex> lock(S().mu);
    ctx = new CUctx_st{static_cast<uint32_t>(++S().uid), ordinal};
    S().context = ctx;
  }
  CUpti_ResourceData rd{};
  rd.context = ctx;
  Fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, &rd);
  return ctx;
}

std::vector<CUstream> g_destroyed_streams;  // handles the driver may hand out again

FAKE_EXPORT CUstream fakecupti_create_stream(void) {
  std::lock_guard<std::mutex> lock(S().mu);
  if (!g_destroyed_streams.empty()) {  // like the driver, reuse a destroyed stream's handle
    CUstream s = g_destroyed_streams.back();
    g_destroyed_streams.pop_back();
    *s = CUstream_st{static_cast<uint32_t>(++S().uid), false};
    return s;
  }
  return new CUstream_st{static_cast<uint32_t>(++S().uid), false};
}

FAKE_EXPORT void fakecupti_destroy_stream(CUstream stream) {
  CUpti_ResourceData rd{};
  rd.context = S().context;
  rd.resourceHandle.stream = stream;
  Fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING, &rd);
  std::lock_guard<std::mutex> lock(S().mu);
  g_destroyed_streams.push_back(stream);
}

FAKE_EXPORT void fakecupti_set_capturing(CUstream stream, int capturing) { stream->capturing = capturing != 0; }

FAKE_EXPORT uint32_t fakecupti_launch(const FakeLaunch* l) {
  CUfunc_st* f;
  {
    std::lock_guard<std::mutex> lock(S().mu);
    f = FuncLocked(l->name);
  }
  int result = l->result;
  const char* symbol = l->symbol_name_missing ? nullptr : f->name.c_str();
  bool capturing = l->stream && l->stream->capturing;
  uint32_t stream_id = l->stream ? l->stream->id : 7u;
  uint32_t record_corr = 0;
  auto emit = [&](uint32_t corr) {
    record_corr = corr;
    if (result != 0 || capturing) return;
    std::lock_guard<std::mutex> lock(S().mu);
    KernelRecordLocked(f, l->grid, l->block, corr, 0, 0, stream_id);
  };
  dim3 grid(l->grid[0], l->grid[1], l->grid[2]), block(l->block[0], l->block[1], l->block[2]);
  cuLaunchKernel_params drv{};
  drv.f = f;
  drv.gridDimX = l->grid[0];
  drv.gridDimY = l->grid[1];
  drv.gridDimZ = l->grid[2];
  drv.blockDimX = l->block[0];
  drv.blockDimY = l->block[1];
  drv.blockDimZ = l->block[2];
  drv.hStream = l->stream;
  switch (l->api) {
    case FAKE_API_DRIVER:
      ApiCall(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", &drv, symbol,
              &result, emit);
      break;
    case FAKE_API_DRIVER_EX: {
      CUlaunchAttribute attr{};
      attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attr.value.clusterDim.x = 2;
      attr.value.clusterDim.y = 1;
      attr.value.clusterDim.z = 1;
      CUlaunchConfig cfg{};
      cfg.gridDimX = l->grid[0];
      cfg.gridDimY = l->grid[1];
      cfg.gridDimZ = l->grid[2];
      cfg.blockDimX = l->block[0];
      cfg.blockDimY = l->block[1];
      cfg.blockDimZ = l->block[2];
      cfg.hStream = l->stream;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      cuLaunchKernelEx_params p{&cfg, f, nullptr, nullptr};
      ApiCall(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx", &p, symbol,
              &result, emit);
      break;
    }
    case FAKE_API_RUNTIME_EX: {
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = grid;
      cfg.blockDim = block;
      cfg.stream = reinterpret_cast<cudaStream_t>(l->stream);
      cudaLaunchKernelExC_v11060_params p{&cfg, f, nullptr};
      ApiCall(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, "cudaLaunchKernelExC",
              &p, symbol, &result, emit);
      break;
    }
    case FAKE_API_RUNTIME_NESTED:
    case FAKE_API_RUNTIME:
    default: {
      cudaLaunchKernel_v7000_params p{f, grid, block, nullptr, 0, reinterpret_cast<cudaStream_t>(l->stream)};
      bool nested = l->api == FAKE_API_RUNTIME_NESTED;
      ApiCall(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel", &p,
              symbol, &result, [&](uint32_t corr) {
                if (!nested) return emit(corr);
                int inner = result;
                ApiCall(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", &drv,
                        symbol, &inner, emit);
              });
      break;
    }
  }
  return record_corr;
}

FAKE_EXPORT uint32_t fakecupti_launch_kernel(const char* name, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                             unsigned by, unsigned bz) {
  FakeLaunch l{};
  l.name = name;
  l.grid[0] = gx;
  l.grid[1] = gy;
  l.grid[2] = gz;
  l.block[0] = bx;
  l.block[1] = by;
  l.block[2] = bz;
  l.api = FAKE_API_RUNTIME;
  return fakecupti_launch(&l);
}

static uint32_t CopyApi(bool memset, uint64_t bytes) {
  int result = 0;
  uint32_t cbid =
      memset ? CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020 : CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020;
  return ApiCall(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, memset ? "cudaMemsetAsync" : "cudaMemcpyAsync", nullptr, nullptr,
                 &result, [&](uint32_t corr) {
                   std::lock_guard<std::mutex> lock(S().mu);
                   CopyRecordLocked(memset, bytes, corr, 0, 0);
                 });
}

FAKE_EXPORT uint32_t fakecupti_memcpy(uint64_t bytes) { return CopyApi(false, bytes); }
FAKE_EXPORT uint32_t fakecupti_memset(uint64_t bytes) { return CopyApi(true, bytes); }

FAKE_EXPORT CUgraph fakecupti_graph_create(void) {
  std::lock_guard<std::mutex> lock(S().mu);
  return new CUgraph_st{static_cast<uint32_t>(++S().uid), {}};
}

FAKE_EXPORT CUgraphNode fakecupti_graph_add_kernel(CUgraph g, const char* name, unsigned gx, unsigned gy, unsigned gz,
                                                   unsigned bx, unsigned by, unsigned bz) {
  CUgraphNode n = AddNode(g, CU_GRAPH_NODE_TYPE_KERNEL);
  std::lock_guard<std::mutex> lock(S().mu);
  n->func = FuncLocked(name);
  n->grid[0] = gx;
  n->grid[1] = gy;
  n->grid[2] = gz;
  n->block[0] = bx;
  n->block[1] = by;
  n->block[2] = bz;
  return n;
}

FAKE_EXPORT CUgraphNode fakecupti_graph_add_memcpy(CUgraph g, uint64_t bytes) {
  CUgraphNode n = AddNode(g, CU_GRAPH_NODE_TYPE_MEMCPY);
  n->bytes = bytes;
  return n;
}

FAKE_EXPORT CUgraphNode fakecupti_graph_add_memset(CUgraph g, uint64_t bytes) {
  CUgraphNode n = AddNode(g, CU_GRAPH_NODE_TYPE_MEMSET);
  n->bytes = bytes;
  return n;
}

FAKE_EXPORT CUgraphNode fakecupti_graph_add_child(CUgraph g, CUgraph child) {
  CUgraphNode n = AddNode(g, CU_GRAPH_NODE_TYPE_GRAPH);
  n->child = child;
  return n;
}

FAKE_EXPORT CUgraphExec fakecupti_graph_instantiate(CUgraph g, int clone_callbacks) {
  CUgraphExec exec;
  {
    std::lock_guard<std::mutex> lock(S().mu);
    exec = new CUgraphExec_st{};
    exec->id = static_cast<uint32_t>(++S().uid);
    exec->graph_id = g->id;
  }
  CUpti_GraphData gd{};
  gd.graph = g;
  CUpti_ResourceData rd{};
  rd.context = S().context;
  rd.resourceDescriptor = &gd;
  Fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATE_STARTING, &rd);
  CloneInto(g, exec, clone_callbacks != 0);
  gd.graphExec = exec;
  Fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, &rd);
  return exec;
}

FAKE_EXPORT void fakecupti_graph_exec_destroy(CUgraphExec exec) {
  CUpti_GraphData gd{};
  gd.graphExec = exec;
  CUpti_ResourceData rd{};
  rd.context = S().context;
  rd.resourceDescriptor = &gd;
  Fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, &rd);
}

FAKE_EXPORT uint32_t fakecupti_graph_launch(CUgraphExec exec, CUstream stream, int driver) {
  int result = 0;
  bool capturing = stream && stream->capturing;
  uint32_t stream_id = stream ? stream->id : 7u;
  auto body = [&](uint32_t corr) {
    if (capturing) return;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    bool starving = (exec->has_memcpy && !s.enabled_kinds.count(CUPTI_ACTIVITY_KIND_MEMCPY)) ||
                    (exec->has_memset && !s.enabled_kinds.count(CUPTI_ACTIVITY_KIND_MEMSET));
    bool stopped = false;
    if (starving && s.pool_units) stopped = ++s.pool_used > s.pool_units;
    for (const FakeExecOp& op : exec->ops) {
      if (op.type == CU_GRAPH_NODE_TYPE_KERNEL) {
        if (!stopped) KernelRecordLocked(op.func, op.grid, op.block, corr, op.node_id, exec->graph_id, stream_id);
      } else if (op.type == CU_GRAPH_NODE_TYPE_MEMCPY || op.type == CU_GRAPH_NODE_TYPE_MEMSET) {
        CopyRecordLocked(op.type == CU_GRAPH_NODE_TYPE_MEMSET, op.bytes, corr, op.node_id, exec->graph_id);
      }
    }
  };
  if (driver) {
    cuGraphLaunch_params p{exec, stream};
    return ApiCall(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch", &p, nullptr,
                   &result, body);
  }
  cudaGraphLaunch_v10000_params p{reinterpret_cast<cudaGraphExec_t>(exec), reinterpret_cast<cudaStream_t>(stream)};
  return ApiCall(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch", &p,
                 nullptr, &result, body);
}

FAKE_EXPORT void fakecupti_set_graph_pool_units(uint64_t units) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().pool_units = units;
}

FAKE_EXPORT void fakecupti_set_invalid_timestamps(uint64_t every_nth, int mode) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().invalid_every = every_nth;
  S().invalid_mode = mode;
}

FAKE_EXPORT void fakecupti_lose_next(uint64_t n) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().lose_next += n;
}

FAKE_EXPORT void fakecupti_drop(uint64_t n) { g_dropped_to_report.fetch_add(n); }

FAKE_EXPORT void fakecupti_hold_seat(void) {
  std::lock_guard<std::mutex> lock(S().mu);
  S().seat_held = true;
}

FAKE_EXPORT void fakecupti_flush(void) { Deliver(); }

FAKE_EXPORT int fakecupti_activity_enabled(int kind) {
  std::lock_guard<std::mutex> lock(S().mu);
  return S().enabled_kinds.count(kind) ? 1 : 0;
}

FAKE_EXPORT int fakecupti_callback_enabled(int domain, uint32_t cbid) { return CallbackEnabled(domain, cbid) ? 1 : 0; }

FAKE_EXPORT int64_t fakecupti_attribute(int attr) {
  std::lock_guard<std::mutex> lock(S().mu);
  auto it = S().attributes.find(attr);
  return it == S().attributes.end() ? -1 : it->second;
}

FAKE_EXPORT uint64_t fakecupti_pending_records(void) {
  std::lock_guard<std::mutex> lock(S().mu);
  return S().pending.size();
}

FAKE_EXPORT uint64_t fakecupti_buffers_completed(void) { return g_buffers_completed.load(); }
