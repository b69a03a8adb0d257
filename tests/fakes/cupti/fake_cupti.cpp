// Fake libcupti.so.13 for CPU tests (see fakecupti.h). Implements the CUPTI
// functions the collector, the guard and the tests' programs call, with
// CUPTI's signatures and record layouts (the real 13.0 headers, and
// cupti/cupti_v2.h for 13.5's per-subscriber calls), and the fakecupti_*
// control functions.
//
// Built twice from this file: as CUPTI 13.0 (one subscriber; the legacy
// activity API is process-wide) and as CUPTI 13.5 (FAKE_CUPTI_VERSION=130500:
// multi-subscriber mode as measured on the H200, FACTS.md 2026-12-01: two
// cuptiSubscribe_v2 clients with allowMultipleSubscribers=1 both get every
// record and callback; after such a client, legacy v1 activity calls return
// CUPTI_ERROR_NOT_COMPATIBLE (14) and cuptiSubscribe returns 39; a legacy
// client first makes cuptiSubscribe_v2 return 39, and so does mixing
// allowMultipleSubscribers 0 and 1).
//
// Two copies of libcupti in one process fight over the driver, as they do on
// a GPU (FACTS.md, "torch.profiler beside the collector"): the copy that
// initializes first holds the fake driver's seat (fakecuda_cupti_seat in the
// fake libcuda), and launches made through any copy's control functions reach
// the holder's subscribers only. Like the real library the fake is linked
// -Bsymbolic, so a preloaded interposer never sees its internal calls.
//
// The fake's lock is never held while it calls into a client, because
// clients call back into the fake (timestamps, record iteration); the one
// exception is a client's timestamp callback (a clock read, as CUPTI uses it).
//
// Timestamps: records are stamped on cuptiGetTimestamp's clock (CLOCK_MONOTONIC),
// as CUPTI documents it (cupti_activity.h: cuptiGetTimestamp "returns a
// timestamp normalized to correspond with the start and end timestamps
// reported in the CUPTI activity records"); a record starts no earlier than
// the end of the one before it, so records never overlap and never go back.
// A client's timestamp callback (v1 registration, or
// the 13.5 attribute CUPTI_ACTIVITY_ATTR_TIMESTAMP_CALLBACK) moves its copies of
// the records into the callback's clock by the callback's offset at the time
// the record is made (exact for a clock that only differs by an offset). Like
// CUPTI 13.5 on the H200, the attribute is refused with
// CUPTI_ERROR_NOT_COMPATIBLE while another subscriber has activity enabled.
#include <cupti.h>
#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "abi/cupti_v2.h"
#include "fake_objects.h"
#include "fakecupti.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

#ifndef FAKE_CUPTI_VERSION
#define FAKE_CUPTI_VERSION CUPTI_API_VERSION
#endif

namespace v2 = twinscope::cupti::v2;

namespace {

constexpr bool kMulti = FAKE_CUPTI_VERSION >= 130500;
// CUPTI 13.3's release notes list the fix of seed 001's leak ("tracing graphs
// that contain memcpy/memset nodes"); 13.5 loses nothing there (FACTS.md).
constexpr bool kGraphLeak = FAKE_CUPTI_VERSION < 130300;

// One activity record until the next flush, stored inline (no allocation per
// record: bench/launch_path counts the application thread's allocations).
struct PendingRecord {
  uint32_t size;
  alignas(8) uint8_t bytes[256];
};

constexpr int kDomains = 8;
constexpr uint32_t kCbids = 1024;

// One CUPTI client: a subscriber (callbacks) and its activity state. The
// legacy client is the process-wide one of the v1 API (cuptiSubscribe and the
// activity calls without a subscriber); in single-subscriber mode a
// cuptiSubscribe_v2 client is the legacy client too.
struct Client {
  explicit Client(std::string n) : name(std::move(n)) {}
  std::string name;
  bool multi = false;       // subscribed with allowMultipleSubscribers=1
  bool subscribed = false;  // callbacks registered
  bool activity_used = false;
  // What Fire() reads on every API call, without the lock (CUPTI's own
  // dispatch is cheap; a lock here would be counted as the collector's cost by
  // bench/launch_path). Written under S().mu.
  std::atomic<bool> firing{false};  // subscribed with a callback
  std::atomic<CUpti_CallbackFunc> callback{nullptr};
  std::atomic<void*> userdata{nullptr};
  std::atomic<bool> enabled[kDomains][kCbids] = {};
  std::set<int> kinds;
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  v2::RequestFn request2 = nullptr;
  v2::CompleteFn complete2 = nullptr;
  std::vector<PendingRecord> pending;
  uint64_t dropped_to_report = 0;
  std::map<int, std::vector<uint64_t>> correlation;    // external correlation id stacks
  CUpti_TimestampCallbackFunc timestamp_fn = nullptr;  // the client's own clock
};

struct State {
  std::mutex mu;
  bool seat_held = false;  // another tool holds CUPTI (fakecupti_hold_seat)
  Client* legacy = nullptr;
  std::vector<Client*> v2_clients;  // cuptiSubscribe_v2 subscribers (13.5)
  std::vector<Client*> all;         // every client (legacy included): see Rebuild
  std::vector<Client*> retired;     // clients gone: never freed, Fire may still hold one
  int mode = -1;                    // -1: no client yet, 0: single subscriber, 1: multi-subscriber
  std::map<int, int64_t> attributes;
  uint64_t next_stamp = 0;  // the earliest start of the next record (the previous one's end)
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
// The legacy client's timestamp callback, read by cuptiGetTimestamp without the lock.
std::atomic<CUpti_TimestampCallbackFunc> g_legacy_timestamp_fn{nullptr};
std::atomic<uint64_t> g_buffers_completed{0};
// The clients Fire() walks, lock-free (published by RebuildLocked).
constexpr int kMaxClients = 8;
std::atomic<Client*> g_firing[kMaxClients];

uint64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// ---- The driver's seat (one per process, in the fake libcuda) -----------------

struct SeatTag {
  void* (*sym)(const char* name);
};

void* SelfSym(const char* name) {
  static void* self = [] {
    Dl_info info{};
    dladdr(reinterpret_cast<void*>(&SelfSym), &info);
    return info.dli_fname ? dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  }();
  return self ? dlsym(self, name) : nullptr;
}
const SeatTag kSelf{&SelfSym};

void ClaimSeat() { fakecuda_cupti_seat(const_cast<SeatTag*>(&kSelf)); }
// The holder's own control function `name` when another copy holds the seat.
template <typename F>
F Routed(const char* name) {
  auto* holder = static_cast<const SeatTag*>(fakecuda_cupti_seat(nullptr));
  if (!holder || holder == &kSelf) return nullptr;
  return reinterpret_cast<F>(holder->sym(name));
}
#define ROUTE(fn, ...) \
  if (auto _routed = Routed<decltype(&fn)>(#fn)) return _routed(__VA_ARGS__)

// ---- Clients ---------------------------------------------------------------------

// After any change of the client lists: S().all and the lock-free list.
void RebuildLocked() {
  State& s = S();
  s.all = s.v2_clients;
  if (s.legacy && std::find(s.all.begin(), s.all.end(), s.legacy) == s.all.end()) s.all.push_back(s.legacy);
  for (int i = 0; i < kMaxClients; ++i)
    g_firing[i].store(i < static_cast<int>(s.all.size()) ? s.all[i] : nullptr, std::memory_order_release);
}

Client* LegacyLocked() {
  State& s = S();
  if (!s.legacy) {
    s.legacy = new Client("legacy CUPTI client");
    RebuildLocked();
  }
  return s.legacy;
}

// A client stops getting callbacks (unsubscribe, finalize).
void MuteLocked(Client* c) {
  c->subscribed = false;
  c->firing.store(false, std::memory_order_release);
  for (auto& domain : c->enabled)
    for (auto& e : domain) e.store(false, std::memory_order_relaxed);
}

bool LegacyInUseLocked() {
  const Client* l = S().legacy;
  return l && (l->subscribed || l->activity_used);
}

const std::vector<Client*>& ClientsLocked() { return S().all; }

// The client behind a subscriber handle, or null.
Client* ClientLocked(CUpti_SubscriberHandle h) {
  for (Client* c : ClientsLocked())
    if (reinterpret_cast<CUpti_SubscriberHandle>(c) == h) return c;
  return nullptr;
}

// The client the legacy (v1) activity calls act on, or the error they return.
CUptiResult V1TargetLocked(Client** out) {
  State& s = S();
  if (s.seat_held) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  if (kMulti && s.mode == 1) return CUPTI_ERROR_NOT_COMPATIBLE;
  *out = LegacyLocked();
  return CUPTI_SUCCESS;
}

bool AnyClientHasKindLocked(int kind) {
  for (Client* c : ClientsLocked())
    if (c->kinds.count(kind)) return true;
  return false;
}

CUfunc_st* FuncLocked(const char* name) {
  std::string n = name ? name : "";
  auto& f = S().funcs[n];
  if (!f) f = new CUfunc_st{n};
  return f;
}

bool Enabled(const Client* c, int domain, uint32_t cbid) {
  return domain >= 0 && domain < kDomains && cbid < kCbids && c->firing.load(std::memory_order_acquire) &&
         c->enabled[domain][cbid].load(std::memory_order_acquire);
}

bool CallbackEnabled(int domain, uint32_t cbid) {
  std::lock_guard<std::mutex> lock(S().mu);
  for (Client* c : ClientsLocked())
    if (Enabled(c, domain, cbid)) return true;
  return false;
}

void Fire(CUpti_CallbackDomain domain, uint32_t cbid, const void* data) {
  for (auto& slot : g_firing) {
    Client* c = slot.load(std::memory_order_acquire);
    if (!c || !Enabled(c, static_cast<int>(domain), cbid)) continue;
    if (auto fn = c->callback.load(std::memory_order_acquire))
      fn(c->userdata.load(std::memory_order_acquire), domain, cbid, data);
  }
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

// The timestamp fields of each record type the fake makes, for clients with
// a clock of their own.
template <typename F>
void Restamp(CUpti_ActivityKernel10& r, F f) {
  for (uint64_t* t : {&r.start, &r.end, &r.completed, &r.queued, &r.submitted}) *t = f(*t);
}
template <typename T, typename F>
void Restamp(T& r, F f) {
  if constexpr (requires { r.start; }) {
    r.start = f(r.start);
    r.end = f(r.end);
  } else if constexpr (requires { r.deviceTimestamp; }) {
    r.deviceTimestamp = f(r.deviceTimestamp);
  } else if constexpr (requires { r.timestamp; }) {
    r.timestamp = f(r.timestamp);
  }
}

// Every client that enabled `kind` gets its own copy of the record.
template <typename T>
void PushRecordLocked(int kind, const T& rec) {
  static_assert(sizeof(T) <= sizeof(PendingRecord::bytes));
  for (Client* c : ClientsLocked()) {
    if (!c->kinds.count(kind)) continue;
    PendingRecord& p = c->pending.emplace_back();
    p.size = sizeof(T);
    if (!c->timestamp_fn) {
      std::memcpy(p.bytes, &rec, sizeof(T));
      continue;
    }
    T copy = rec;
    const uint64_t now = NowNs(), theirs = c->timestamp_fn();
    Restamp(copy, [&](uint64_t t) { return t ? t - now + theirs : 0; });
    std::memcpy(p.bytes, &copy, sizeof(T));
  }
}

// The start of the next record: now on cuptiGetTimestamp's clock, or the end of the previous record if that
// is later; the next one starts `advance` ns after it at the earliest.
uint64_t StampLocked(uint64_t advance) {
  State& s = S();
  const uint64_t t = std::max(NowNs(), s.next_stamp);
  s.next_stamp = t + advance;
  return t;
}

void KernelRecordLocked(CUfunc_st* f, const unsigned grid[3], const unsigned block[3], uint32_t corr, uint64_t node_id,
                        uint32_t graph_id, uint32_t stream) {
  State& s = S();
  if (!AnyClientHasKindLocked(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) return;
  if (s.lose_next) {
    s.lose_next--;
    return;
  }
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = StampLocked(2000);
  k.end = k.start + 1000;
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
  PushRecordLocked(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, k);
}

void CopyRecordLocked(bool memset, uint64_t bytes, uint32_t corr, uint64_t node_id, uint32_t graph_id) {
  uint64_t start = StampLocked(1000), end = start + 500;
  if (memset) {
    CUpti_ActivityMemset4 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m.value = 0;
    m.bytes = bytes;
    m.start = start;
    m.end = end;
    m.correlationId = corr;
    m.graphNodeId = node_id;
    m.graphId = graph_id;
    PushRecordLocked(CUPTI_ACTIVITY_KIND_MEMSET, m);
  } else {
    CUpti_ActivityMemcpy6 m{};
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    m.bytes = bytes;
    m.start = start;
    m.end = end;
    m.correlationId = corr;
    m.graphNodeId = node_id;
    m.graphId = graph_id;
    PushRecordLocked(CUPTI_ACTIVITY_KIND_MEMCPY, m);
  }
}

constexpr size_t kHeader = 8;
size_t Align8(size_t n) { return (n + 7) & ~size_t(7); }

// Hands a client's pending records to its buffer callbacks (v1 or v2).
void DeliverTo(Client* c) {
  State& s = S();
  std::vector<PendingRecord> records;
  CUpti_BuffersCallbackRequestFunc request;
  CUpti_BuffersCallbackCompleteFunc complete;
  v2::RequestFn request2;
  v2::CompleteFn complete2;
  CUcontext ctx;
  uint64_t dropped;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    request = c->request;
    complete = c->complete;
    request2 = c->request2;
    complete2 = c->complete2;
    if (!(request && complete) && !(request2 && complete2)) return;
    records.swap(c->pending);
    ctx = s.context;
    dropped = c->dropped_to_report;
  }
  auto get = [&](uint8_t** buffer, size_t* size) {
    size_t max_records = 0;
    if (request2) {
      v2::BufferRequestInfo info{sizeof info};
      request2(buffer, size, &max_records, &info);
    } else {
      request(buffer, size, &max_records);
    }
  };
  auto done = [&](uint8_t* buffer, size_t size, size_t used) {
    g_buffers_completed.fetch_add(1);
    if (complete2) {
      v2::BufferCompleteInfo info{sizeof info, 0, nullptr, 0};
      complete2(buffer, size, used, &info);
    } else {
      complete(ctx, 0, buffer, size, used);
    }
  };
  size_t i = 0;
  while (i < records.size()) {
    uint8_t* buffer = nullptr;
    size_t size = 0;
    get(&buffer, &size);
    if (!buffer || size < kHeader + records[i].size) {
      // CUPTI drops what it cannot place and reports it.
      std::lock_guard<std::mutex> lock(s.mu);
      c->dropped_to_report += records.size() - i;
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
    done(buffer, size, used);
  }
  if (records.empty() && dropped) {
    uint8_t* buffer = nullptr;
    size_t size = 0;
    get(&buffer, &size);
    done(buffer, size, 0);
  }
  records.clear();  // keep its capacity for the next records
  std::lock_guard<std::mutex> lock(s.mu);
  if (c->pending.empty()) c->pending.swap(records);
}

void Deliver() {
  std::vector<Client*> clients;
  {
    std::lock_guard<std::mutex> lock(S().mu);
    clients = ClientsLocked();
  }
  for (Client* c : clients) DeliverTo(c);
}

CUptiResult NextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
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

CUptiResult SetAttributeLocked(CUpti_ActivityAttribute attr, size_t* size, void* value) {
  if (!size || !value || *size == 0 || *size > sizeof(int64_t)) return CUPTI_ERROR_INVALID_PARAMETER;
  int64_t v = 0;
  std::memcpy(&v, value, *size);
  S().attributes[attr] = v;
  return CUPTI_SUCCESS;
}

// Subscribes one client; shared by cuptiSubscribe and cuptiSubscribe_v2.
CUptiResult SubscribeClient(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata,
                            bool v2_call, const v2::SubscriberParams* params, std::string* other) {
  State& s = S();
  CUptiResult r = CUPTI_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    const bool allow = kMulti && v2_call && params && params->structSize >= v2::kSubscriberParamsSize &&
                       params->allowMultipleSubscribers == 1;
    const std::string name = std::string("CUPTI for ") +
                             (v2_call && params && params->subscriberName ? params->subscriberName : "<not provided>");
    Client* c = nullptr;
    if (s.seat_held) {
      r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
      *other = "CUPTI for Nsight Systems (fake)";
    } else if (!kMulti || !v2_call) {
      // One subscriber: the legacy client's seat (13.0; and v1 on 13.5).
      if ((kMulti && !s.v2_clients.empty()) || (s.legacy && s.legacy->subscribed)) {
        r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
        *other = !s.v2_clients.empty() ? s.v2_clients.front()->name : s.legacy->name;
      } else {
        c = LegacyLocked();
        if (v2_call) c->name = name;
        if (kMulti) s.mode = 0;
      }
    } else if (LegacyInUseLocked() || s.mode == 0 || (s.mode == 1 && !allow)) {
      r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
      *other = LegacyInUseLocked() ? s.legacy->name : s.v2_clients.front()->name;
    } else {
      c = new Client(name);
      c->multi = allow;
      s.v2_clients.push_back(c);
      s.mode = allow ? 1 : 0;
      if (!allow) s.legacy = c;  // single-subscriber mode: the v1 activity calls act on it
      RebuildLocked();
    }
    if (c) {
      c->subscribed = true;
      c->callback.store(callback, std::memory_order_release);
      c->userdata.store(userdata, std::memory_order_release);
      c->firing.store(callback != nullptr, std::memory_order_release);
      *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(c);
    }
  }
  if (r == CUPTI_SUCCESS) ClaimSeat();
  return r;
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

// ---- CUPTI API (v1) ----------------------------------------------------------------

FAKE_EXPORT CUptiResult cuptiGetVersion(uint32_t* version) {
  *version = FAKE_CUPTI_VERSION;
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
    case CUPTI_ERROR_NOT_COMPATIBLE:
      *str = "CUPTI_ERROR_NOT_COMPATIBLE";
      break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
      break;
    case CUPTI_ERROR_MAX_LIMIT_REACHED:
      *str = "CUPTI_ERROR_MAX_LIMIT_REACHED";
      break;
    case CUPTI_ERROR_NOT_SUPPORTED:
      *str = "CUPTI_ERROR_NOT_SUPPORTED";
      break;
    default:
      *str = "CUPTI_ERROR_UNKNOWN";
      break;
  }
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                       void* userdata) {
  std::string other;
  return SubscribeClient(subscriber, callback, userdata, false, nullptr, &other);
}

// CUPTI_API_VERSION 13.0's prototype; on 13.5 the params are CUPTI 13.5's
// (cupti/cupti_v2.h) when structSize says so.
FAKE_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                          void* userdata, CUpti_SubscriberParams* params) {
  if (params && params->structSize == 0) return CUPTI_ERROR_INVALID_PARAMETER;
  std::string other;
  CUptiResult r = SubscribeClient(subscriber, callback, userdata, true,
                                  reinterpret_cast<const v2::SubscriberParams*>(params), &other);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && params && params->oldSubscriberName &&
      params->oldSubscriberSize > 0)
    std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", other.c_str());
  return r;
}

FAKE_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  Client* c = ClientLocked(subscriber);
  if (!c) return CUPTI_ERROR_INVALID_PARAMETER;
  MuteLocked(c);
  auto it = std::find(s.v2_clients.begin(), s.v2_clients.end(), c);
  if (it != s.v2_clients.end() && c != s.legacy) {  // a v2 subscriber goes with its activity
    s.v2_clients.erase(it);
    s.retired.push_back(c);
    RebuildLocked();
  }
  if (s.v2_clients.empty() && !LegacyInUseLocked()) s.mode = -1;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                            CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  std::lock_guard<std::mutex> lock(S().mu);
  Client* c = ClientLocked(subscriber);
  if (!c || !c->subscribed) return CUPTI_ERROR_INVALID_PARAMETER;
  if (domain < 0 || domain >= kDomains || cbid >= kCbids) return CUPTI_ERROR_INVALID_PARAMETER;
  c->enabled[domain][cbid].store(enable != 0, std::memory_order_release);
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
  CUptiResult r;
  {
    std::lock_guard<std::mutex> lock(S().mu);
    Client* c = nullptr;
    r = V1TargetLocked(&c);
    if (r != CUPTI_SUCCESS) return r;
    c->request = request;
    c->complete = complete;
    c->activity_used = true;
    if (kMulti && S().mode < 0) S().mode = 0;
  }
  ClaimSeat();
  return r;
}

FAKE_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  {
    std::lock_guard<std::mutex> lock(S().mu);
    Client* c = nullptr;
    CUptiResult r = V1TargetLocked(&c);
    if (r != CUPTI_SUCCESS) return r;
    c->kinds.insert(kind);
    c->activity_used = true;
    if (kMulti && S().mode < 0) S().mode = 0;
  }
  ClaimSeat();
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(S().mu);
  Client* c = nullptr;
  CUptiResult r = V1TargetLocked(&c);
  if (r == CUPTI_SUCCESS) c->kinds.erase(kind);
  return r;
}

FAKE_EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t* size, void* value) {
  std::lock_guard<std::mutex> lock(S().mu);
  Client* c = nullptr;
  if (CUptiResult r = V1TargetLocked(&c); r != CUPTI_SUCCESS) return r;
  if (!size || *size != sizeof(size_t)) return CUPTI_ERROR_INVALID_PARAMETER;
  return SetAttributeLocked(attr, size, value);
}

FAKE_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  if (kMulti) {
    std::lock_guard<std::mutex> lock(S().mu);
    if (S().mode == 1) return CUPTI_ERROR_NOT_COMPATIBLE;
  }
  return NextRecord(buffer, valid, record);
}

FAKE_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  std::lock_guard<std::mutex> lock(S().mu);
  Client* c = nullptr;
  if (CUptiResult r = V1TargetLocked(&c); r != CUPTI_SUCCESS) return r;
  *dropped = c->dropped_to_report;
  c->dropped_to_report = 0;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t) {
  Deliver();
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  std::lock_guard<std::mutex> lock(S().mu);
  Client* c = nullptr;
  if (CUptiResult r = V1TargetLocked(&c); r != CUPTI_SUCCESS) return r;
  c->correlation[kind].push_back(id);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t* last) {
  std::lock_guard<std::mutex> lock(S().mu);
  Client* c = nullptr;
  if (CUptiResult r = V1TargetLocked(&c); r != CUPTI_SUCCESS) return r;
  auto& stack = c->correlation[kind];
  if (stack.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (last) *last = stack.back();
  stack.pop_back();
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityEnableLatencyTimestamps(uint8_t enable) {
  std::lock_guard<std::mutex> lock(S().mu);
  Client* c = nullptr;
  if (CUptiResult r = V1TargetLocked(&c); r != CUPTI_SUCCESS) return r;
  S().attributes[v2::kAttrEnableKernelLatencyTimestamps] = enable;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn) {
  if (!fn) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(S().mu);
  Client* c = nullptr;
  if (CUptiResult r = V1TargetLocked(&c); r != CUPTI_SUCCESS) return r;
  c->timestamp_fn = fn;
  g_legacy_timestamp_fn.store(fn, std::memory_order_release);
  return CUPTI_SUCCESS;
}

// A legacy activity call no guard serves (the tests' uncovered entry point).
FAKE_EXPORT CUptiResult cuptiActivityConfigureUnifiedMemoryCounter(CUpti_ActivityUnifiedMemoryCounterConfig*,
                                                                   uint32_t) {
  std::lock_guard<std::mutex> lock(S().mu);
  Client* c = nullptr;
  return V1TargetLocked(&c);
}

// Detaches every client (the whole CUPTI session, as on a GPU).
FAKE_EXPORT CUptiResult cuptiFinalize(void) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  for (Client* c : ClientsLocked()) {
    MuteLocked(c);
    c->kinds.clear();
    c->activity_used = false;
    s.retired.push_back(c);
  }
  s.v2_clients.clear();
  s.legacy = nullptr;
  g_legacy_timestamp_fn.store(nullptr);
  s.mode = -1;
  RebuildLocked();
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetTimestamp(uint64_t* t) {
  CUpti_TimestampCallbackFunc fn = g_legacy_timestamp_fn.load(std::memory_order_acquire);
  *t = fn ? fn() : NowNs();
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

// ---- CUPTI 13.5's per-subscriber calls (cupti/cupti_v2.h) ----------------------------
#if FAKE_CUPTI_VERSION >= 130500

namespace {

// Runs `fn(client)` under the lock for a known subscriber handle.
template <typename Fn>
CUptiResult WithClient(CUpti_SubscriberHandle h, Fn fn) {
  std::lock_guard<std::mutex> lock(S().mu);
  Client* c = ClientLocked(h);
  if (!c) return CUPTI_ERROR_INVALID_PARAMETER;
  return fn(c);
}

}  // namespace

FAKE_EXPORT CUptiResult cuptiActivityEnable_v2(CUpti_SubscriberHandle h, CUpti_ActivityKind kind, void*) {
  CUptiResult r = WithClient(h, [&](Client* c) {
    c->kinds.insert(kind);
    c->activity_used = true;
    return CUPTI_SUCCESS;
  });
  if (r == CUPTI_SUCCESS) ClaimSeat();
  return r;
}

FAKE_EXPORT CUptiResult cuptiActivityEnableAndDump_v2(CUpti_SubscriberHandle h, CUpti_ActivityKind kind, void* cfg) {
  return cuptiActivityEnable_v2(h, kind, cfg);
}

FAKE_EXPORT CUptiResult cuptiActivityDisable_v2(CUpti_SubscriberHandle h, CUpti_ActivityKind kind, void*) {
  return WithClient(h, [&](Client* c) {
    c->kinds.erase(kind);
    return CUPTI_SUCCESS;
  });
}

FAKE_EXPORT CUptiResult cuptiActivityRegisterCallbacks_v2(CUpti_SubscriberHandle h, v2::RequestFn request,
                                                          v2::CompleteFn complete) {
  if (!request || !complete) return CUPTI_ERROR_INVALID_PARAMETER;
  CUptiResult r = WithClient(h, [&](Client* c) {
    c->request2 = request;
    c->complete2 = complete;
    c->activity_used = true;
    return CUPTI_SUCCESS;
  });
  if (r == CUPTI_SUCCESS) ClaimSeat();
  return r;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNextRecord_v2(CUpti_SubscriberHandle h, uint8_t* buffer, size_t valid,
                                                      CUpti_Activity** record) {
  {
    std::lock_guard<std::mutex> lock(S().mu);
    if (!ClientLocked(h)) return CUPTI_ERROR_INVALID_PARAMETER;
  }
  return NextRecord(buffer, valid, record);
}

FAKE_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords_v2(CUpti_SubscriberHandle h, CUcontext, uint32_t,
                                                             size_t* dropped) {
  if (!dropped) return CUPTI_ERROR_INVALID_PARAMETER;
  return WithClient(h, [&](Client* c) {
    *dropped = c->dropped_to_report;
    c->dropped_to_report = 0;
    return CUPTI_SUCCESS;
  });
}

FAKE_EXPORT CUptiResult cuptiActivitySetAttribute_v2(CUpti_SubscriberHandle h, CUpti_ActivityAttribute attr,
                                                     size_t* size, void* value) {
  return WithClient(h, [&](Client* c) {
    if (static_cast<int>(attr) != v2::kAttrTimestampCallback) return SetAttributeLocked(attr, size, value);
    if (!size || *size != sizeof(CUpti_TimestampCallbackFunc) || !value) return CUPTI_ERROR_INVALID_PARAMETER;
    for (const Client* other : ClientsLocked())
      if (other != c && !other->kinds.empty()) return CUPTI_ERROR_NOT_COMPATIBLE;  // as on the H200
    std::memcpy(&c->timestamp_fn, value, sizeof c->timestamp_fn);
    return CUPTI_SUCCESS;
  });
}

FAKE_EXPORT CUptiResult cuptiActivityGetAttribute_v2(CUpti_SubscriberHandle h, CUpti_ActivityAttribute attr,
                                                     size_t* size, void* value) {
  return WithClient(h, [&](Client*) {
    if (!size || !value || *size == 0 || *size > sizeof(int64_t)) return CUPTI_ERROR_INVALID_PARAMETER;
    int64_t v = S().attributes.count(attr) ? S().attributes[attr] : 0;
    if (static_cast<int>(attr) == v2::kAttrMultipleSubscriberState) v = S().mode < 0 ? 2 : S().mode;
    std::memcpy(value, &v, *size);
    return CUPTI_SUCCESS;
  });
}

FAKE_EXPORT CUptiResult cuptiGetTimestamp_v2(CUpti_SubscriberHandle h, uint64_t* t) {
  return WithClient(h, [&](Client* c) {
    *t = c->timestamp_fn ? c->timestamp_fn() : NowNs();
    return CUPTI_SUCCESS;
  });
}

FAKE_EXPORT CUptiResult cuptiActivityPushExternalCorrelationId_v2(CUpti_SubscriberHandle h,
                                                                  CUpti_ExternalCorrelationKind kind, uint64_t id) {
  return WithClient(h, [&](Client* c) {
    c->correlation[kind].push_back(id);
    return CUPTI_SUCCESS;
  });
}

FAKE_EXPORT CUptiResult cuptiActivityPopExternalCorrelationId_v2(CUpti_SubscriberHandle h,
                                                                 CUpti_ExternalCorrelationKind kind, uint64_t* last) {
  return WithClient(h, [&](Client* c) {
    auto& stack = c->correlation[kind];
    if (stack.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
    if (last) *last = stack.back();
    stack.pop_back();
    return CUPTI_SUCCESS;
  });
}

#endif  // FAKE_CUPTI_VERSION >= 130500

// ---- Control ---------------------------------------------------------------------

FAKE_EXPORT CUcontext fakecupti_create_context(int ordinal) {
  ROUTE(fakecupti_create_context, ordinal);
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
  ROUTE(fakecupti_create_stream);
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
  ROUTE(fakecupti_destroy_stream, stream);
  CUpti_ResourceData rd{};
  rd.context = S().context;
  rd.resourceHandle.stream = stream;
  Fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING, &rd);
  std::lock_guard<std::mutex> lock(S().mu);
  g_destroyed_streams.push_back(stream);
}

FAKE_EXPORT void fakecupti_set_capturing(CUstream stream, int capturing) {
  ROUTE(fakecupti_set_capturing, stream, capturing);
  stream->capturing = capturing != 0;
}

FAKE_EXPORT uint32_t fakecupti_launch(const FakeLaunch* l) {
  ROUTE(fakecupti_launch, l);
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
  ROUTE(fakecupti_launch_kernel, name, gx, gy, gz, bx, by, bz);
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

FAKE_EXPORT uint32_t fakecupti_memcpy(uint64_t bytes) {
  ROUTE(fakecupti_memcpy, bytes);
  return CopyApi(false, bytes);
}
FAKE_EXPORT uint32_t fakecupti_memset(uint64_t bytes) {
  ROUTE(fakecupti_memset, bytes);
  return CopyApi(true, bytes);
}

FAKE_EXPORT CUgraph fakecupti_graph_create(void) {
  ROUTE(fakecupti_graph_create);
  std::lock_guard<std::mutex> lock(S().mu);
  return new CUgraph_st{static_cast<uint32_t>(++S().uid), {}};
}

FAKE_EXPORT CUgraphNode fakecupti_graph_add_kernel(CUgraph g, const char* name, unsigned gx, unsigned gy, unsigned gz,
                                                   unsigned bx, unsigned by, unsigned bz) {
  ROUTE(fakecupti_graph_add_kernel, g, name, gx, gy, gz, bx, by, bz);
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
  ROUTE(fakecupti_graph_add_memcpy, g, bytes);
  CUgraphNode n = AddNode(g, CU_GRAPH_NODE_TYPE_MEMCPY);
  n->bytes = bytes;
  return n;
}

FAKE_EXPORT CUgraphNode fakecupti_graph_add_memset(CUgraph g, uint64_t bytes) {
  ROUTE(fakecupti_graph_add_memset, g, bytes);
  CUgraphNode n = AddNode(g, CU_GRAPH_NODE_TYPE_MEMSET);
  n->bytes = bytes;
  return n;
}

FAKE_EXPORT CUgraphNode fakecupti_graph_add_child(CUgraph g, CUgraph child) {
  ROUTE(fakecupti_graph_add_child, g, child);
  CUgraphNode n = AddNode(g, CU_GRAPH_NODE_TYPE_GRAPH);
  n->child = child;
  return n;
}

FAKE_EXPORT CUgraphExec fakecupti_graph_instantiate(CUgraph g, int clone_callbacks) {
  ROUTE(fakecupti_graph_instantiate, g, clone_callbacks);
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
  ROUTE(fakecupti_graph_exec_destroy, exec);
  CUpti_GraphData gd{};
  gd.graphExec = exec;
  CUpti_ResourceData rd{};
  rd.context = S().context;
  rd.resourceDescriptor = &gd;
  Fire(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, &rd);
}

FAKE_EXPORT uint32_t fakecupti_graph_launch(CUgraphExec exec, CUstream stream, int driver) {
  ROUTE(fakecupti_graph_launch, exec, stream, driver);
  int result = 0;
  bool capturing = stream && stream->capturing;
  uint32_t stream_id = stream ? stream->id : 7u;
  auto body = [&](uint32_t corr) {
    if (capturing) return;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    bool starving = kGraphLeak && ((exec->has_memcpy && !AnyClientHasKindLocked(CUPTI_ACTIVITY_KIND_MEMCPY)) ||
                                   (exec->has_memset && !AnyClientHasKindLocked(CUPTI_ACTIVITY_KIND_MEMSET)));
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
  ROUTE(fakecupti_set_graph_pool_units, units);
  std::lock_guard<std::mutex> lock(S().mu);
  S().pool_units = units;
}

FAKE_EXPORT void fakecupti_set_host_clock(int on) {
  ROUTE(fakecupti_set_host_clock, on);  // records are always on cuptiGetTimestamp's clock now
}

namespace {

// One record of type T for `kind`: its timestamps (a 500 ns interval, or one
// instant) from `start`, its correlation id, and what `fill` sets.
template <typename T, typename Fill>
void EmitLocked(int kind, uint64_t start, uint32_t corr, Fill fill) {
  T a{};
  a.kind = static_cast<CUpti_ActivityKind>(kind);
  if constexpr (requires { a.start; }) {
    a.start = start;
    a.end = start + 500;
  } else if constexpr (requires { a.deviceTimestamp; }) {
    a.deviceTimestamp = start;
  } else if constexpr (requires { a.timestamp; }) {
    a.timestamp = start;
  }
  if constexpr (requires { a.correlationId; }) a.correlationId = corr;
  fill(a);
  PushRecordLocked(kind, a);
}

}  // namespace

FAKE_EXPORT uint32_t fakecupti_emit(int kind) {
  ROUTE(fakecupti_emit, kind);
  const uint32_t corr = g_correlation.fetch_add(1);
  std::lock_guard<std::mutex> lock(S().mu);
  const uint64_t start = StampLocked(1000);
  const uint32_t ctx = S().context ? S().context->id : 1;
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      EmitLocked<CUpti_ActivityAPI>(kind, start, corr,
                                    [](auto& a) { a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000; });
      break;
    case CUPTI_ACTIVITY_KIND_DRIVER:
      EmitLocked<CUpti_ActivityAPI>(kind, start, corr,
                                    [](auto& a) { a.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel; });
      break;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      EmitLocked<CUpti_ActivitySynchronization2>(kind, start, corr, [&](auto& a) {
        a.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
        a.contextId = ctx;
      });
      break;
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      EmitLocked<CUpti_ActivityOverhead3>(kind, start, corr,
                                          [](auto& a) { a.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH; });
      break;
    case CUPTI_ACTIVITY_KIND_MARKER:
      EmitLocked<CUpti_ActivityMarker2>(kind, start, corr, [&](auto& a) {
        a.flags = CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS;
        a.id = corr;
      });
      break;
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT:
      EmitLocked<CUpti_ActivityCudaEvent2>(kind, start, corr, [&](auto& a) { a.contextId = ctx; });
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      EmitLocked<CUpti_ActivityMemcpyPtoP4>(kind, start, corr, [](auto& a) {
        a.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
        a.bytes = 4096;
      });
      break;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      EmitLocked<CUpti_ActivityExternalCorrelation>(kind, start, corr, [](auto& a) {
        a.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
        a.externalId = 42;
      });
      break;
    case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER:
      EmitLocked<CUpti_ActivityUnifiedMemoryCounter3>(kind, start, corr, [](auto& a) {
        a.counterKind = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD;
        a.value = 4096;
      });
      break;
    default:
      return 0;
  }
  return corr;
}

FAKE_EXPORT void fakecupti_set_invalid_timestamps(uint64_t every_nth, int mode) {
  ROUTE(fakecupti_set_invalid_timestamps, every_nth, mode);
  std::lock_guard<std::mutex> lock(S().mu);
  S().invalid_every = every_nth;
  S().invalid_mode = mode;
}

FAKE_EXPORT void fakecupti_lose_next(uint64_t n) {
  ROUTE(fakecupti_lose_next, n);
  std::lock_guard<std::mutex> lock(S().mu);
  S().lose_next += n;
}

FAKE_EXPORT void fakecupti_drop(uint64_t n) {
  ROUTE(fakecupti_drop, n);
  std::lock_guard<std::mutex> lock(S().mu);
  bool any = false;
  for (Client* c : ClientsLocked()) {
    if (!(c->request || c->request2)) continue;
    c->dropped_to_report += n;
    any = true;
  }
  if (!any) LegacyLocked()->dropped_to_report += n;
}

FAKE_EXPORT void fakecupti_hold_seat(void) {
  ROUTE(fakecupti_hold_seat);
  std::lock_guard<std::mutex> lock(S().mu);
  S().seat_held = true;
}

FAKE_EXPORT void fakecupti_flush(void) {
  ROUTE(fakecupti_flush);
  Deliver();
}

FAKE_EXPORT int fakecupti_activity_enabled(int kind) {
  ROUTE(fakecupti_activity_enabled, kind);
  std::lock_guard<std::mutex> lock(S().mu);
  return AnyClientHasKindLocked(kind) ? 1 : 0;
}

FAKE_EXPORT int fakecupti_callback_enabled(int domain, uint32_t cbid) {
  ROUTE(fakecupti_callback_enabled, domain, cbid);
  return CallbackEnabled(domain, cbid) ? 1 : 0;
}

FAKE_EXPORT int64_t fakecupti_attribute(int attr) {
  ROUTE(fakecupti_attribute, attr);
  std::lock_guard<std::mutex> lock(S().mu);
  auto it = S().attributes.find(attr);
  return it == S().attributes.end() ? -1 : it->second;
}

FAKE_EXPORT uint64_t fakecupti_pending_records(void) {
  ROUTE(fakecupti_pending_records);
  std::lock_guard<std::mutex> lock(S().mu);
  uint64_t n = 0;
  for (Client* c : ClientsLocked()) n += c->pending.size();
  return n;
}

FAKE_EXPORT uint64_t fakecupti_stream_id_calls(void) {
  ROUTE(fakecupti_stream_id_calls);
  return g_stream_id_calls.load();
}

FAKE_EXPORT uint64_t fakecupti_buffers_completed(void) {
  ROUTE(fakecupti_buffers_completed);
  return g_buffers_completed.load();
}
