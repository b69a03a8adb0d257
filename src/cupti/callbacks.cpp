// API and resource callbacks. Runs on the application thread that made the
// call, so the launch path only captures facts into this thread's LaunchRing
// (launch_tracker.h): keys, LaunchRecords and API records are made on the
// collector's own thread. Graph instantiation is handled here.
#include "cupti/callbacks.h"

#include <cupti.h>  // with the generated *_params structs of every API

#include <array>
#include <atomic>
#include <cstring>

#include "base/log.h"
#include "cupti/collector.h"
#include "cupti/cupti_api.h"
#include "cupti/cupti_check.h"
#include "cupti/launch_tracker.h"
#include "format/header.h"
#include "launchkey/launch_key.h"

namespace twinscope::cupti {

// Everything the launch path keeps per application thread, reached through
// one trivially destructible thread_local pointer (one TLS lookup per
// callback). Only its own thread touches it.
struct ThreadState {
  LaunchRing* ring = nullptr;  // owned by the tracker
  // The launch API call in progress. A runtime launch calls the driver's
  // launch inside it; only the outermost call is the launch, the inner one's
  // correlation id becomes an alias of it.
  int depth = 0;
  bool registered = false;       // its enter op was queued
  bool capturing = false;        // recorded into a graph under stream capture
  uint64_t announced_frame = 0;  // RangeStack serial of the last PathOp queued (0: none)

  // Memo of CUPTI stream ids: cuptiGetStreamIdEx on every launch cost ~0.6 us
  // on the H200 (bench/RESULTS.md section 3, ablate). A CUstream handle names
  // another stream only after its stream (or context) is destroyed, which
  // bumps g_stream_generation and so empties every memo (the device memo too:
  // a context handle can be reused the same way).
  struct StreamMemo {
    CUcontext context;
    CUstream stream;
    uint64_t generation;  // 0: empty
    uint32_t id;
    uint8_t per_thread;
  };
  static constexpr size_t kStreamMemoSlots = 16;
  StreamMemo streams[kStreamMemoSlots] = {};
  CUcontext context = nullptr;
  uint64_t context_generation = 0;
  uint16_t device = 0;

  // Kernel names by the driver's pointer. A hit is checked against the
  // interned copy's bytes, so a pointer the driver reuses for another name
  // (module unloaded, another loaded) is a miss, never a wrong name.
  struct NameMemo {
    const char* ptr;
    const KernelName* name;
  };
  static constexpr size_t kNameMemoSlots = 256;
  NameMemo names[kNameMemoSlots] = {};

  // The last graph exec launched, while no exec is created or destroyed.
  struct {
    bool valid = false;
    CUgraphExec exec = nullptr;
    uint64_t generation = 0;
    std::shared_ptr<const GraphExecInfo> info;
  } graph;
};

namespace {

// This thread's state, freed (and its ring closed) by the thread's
// thread_local destructors; a call after those (process exit) makes a new one
// that lives until the end.
thread_local ThreadState* t_state = nullptr;
thread_local bool t_state_gone = false;
struct ThreadStateOwner {
  ~ThreadStateOwner() {
    if (t_state) {
      t_state->ring->Close();
      delete t_state;
    }
    t_state = nullptr;
    t_state_gone = true;
  }
};
thread_local ThreadStateOwner t_state_owner;

std::atomic<uint64_t> g_stream_generation{1};

// ClassifyLaunch for every callback id, computed at compile time.
template <CUpti_CallbackDomain D, size_t N>
constexpr std::array<LaunchApiInfo, N> LaunchTable() {
  std::array<LaunchApiInfo, N> t{};
  for (size_t i = 0; i < N; ++i) t[i] = ClassifyLaunch(D, static_cast<CUpti_CallbackId>(i));
  return t;
}
constexpr auto kRuntimeLaunches = LaunchTable<CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE>();
constexpr auto kDriverLaunches = LaunchTable<CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE>();

uint64_t Now() {
  uint64_t t = 0;
  if (Cupti().GetTimestamp(&t) == CUPTI_SUCCESS) return t;
  return MonotonicNs();
}

int ReturnValue(const CUpti_CallbackData* cb) {
  return cb->functionReturnValue ? *static_cast<const int*>(cb->functionReturnValue) : 0;
}

bool Capturing(CUstream stream, bool per_thread) {
  auto is_capturing = Driver().StreamIsCapturing;
  if (!is_capturing) return false;
  if (!stream && per_thread) stream = CU_STREAM_PER_THREAD;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (is_capturing(stream, &status) != CUDA_SUCCESS) return false;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

Dim3 ToDim3(dim3 d) { return {d.x, d.y, d.z}; }

Dim3 ClusterOf(const cudaLaunchAttribute* attrs, unsigned n) {
  for (unsigned i = 0; attrs && i < n; ++i)
    if (attrs[i].id == cudaLaunchAttributeClusterDimension)
      return {attrs[i].val.clusterDim.x, attrs[i].val.clusterDim.y, attrs[i].val.clusterDim.z};
  return {0, 0, 0};
}

Dim3 ClusterOf(const CUlaunchAttribute* attrs, unsigned n) {
  for (unsigned i = 0; attrs && i < n; ++i)
    if (attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
      return {attrs[i].value.clusterDim.x, attrs[i].value.clusterDim.y, attrs[i].value.clusterDim.z};
  return {0, 0, 0};
}

// What a kernel launch's parameters say.
struct KernelLaunch {
  const char* name = nullptr;
  Dim3 grid{}, block{}, cluster{};
  CUstream stream = nullptr;
};

bool ReadKernelLaunch(LaunchApi api, const CUpti_CallbackData* cb, KernelLaunch* k) {
  const void* params = cb->functionParams;
  if (!params) return false;
  CUfunction f = nullptr;
  switch (api) {
    case LaunchApi::kRuntimeKernel: {
      auto* p = static_cast<const cudaLaunchKernel_v7000_params*>(params);
      k->grid = ToDim3(p->gridDim);
      k->block = ToDim3(p->blockDim);
      k->stream = reinterpret_cast<CUstream>(p->stream);
      break;
    }
    case LaunchApi::kRuntimeKernelEx: {
      auto* p = static_cast<const cudaLaunchKernelExC_v11060_params*>(params);
      if (!p->config) return false;
      k->grid = ToDim3(p->config->gridDim);
      k->block = ToDim3(p->config->blockDim);
      k->cluster = ClusterOf(p->config->attrs, p->config->numAttrs);
      k->stream = reinterpret_cast<CUstream>(p->config->stream);
      break;
    }
    case LaunchApi::kDriverKernel: {
      auto* p = static_cast<const cuLaunchKernel_params*>(params);
      f = p->f;
      k->grid = {p->gridDimX, p->gridDimY, p->gridDimZ};
      k->block = {p->blockDimX, p->blockDimY, p->blockDimZ};
      k->stream = p->hStream;
      break;
    }
    case LaunchApi::kDriverKernelEx: {
      auto* p = static_cast<const cuLaunchKernelEx_params*>(params);
      if (!p->config) return false;
      f = p->f;
      const CUlaunchConfig* c = p->config;
      k->grid = {c->gridDimX, c->gridDimY, c->gridDimZ};
      k->block = {c->blockDimX, c->blockDimY, c->blockDimZ};
      k->cluster = ClusterOf(c->attrs, c->numAttrs);
      k->stream = c->hStream;
      break;
    }
    default:
      return false;
  }
  const char* name = cb->symbolName;
  if ((!name || !*name) && f && Driver().FuncGetName) Driver().FuncGetName(&name, f);
  k->name = name;
  return true;
}

}  // namespace

// Flattened: the launch path is a handful of small steps, and calls between
// them (prologues, register saves) were a fifth of its instructions.
[[gnu::flatten]] void Collector::OnCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (!collecting() || !data) return;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    OnResource(cbid, static_cast<const CUpti_ResourceData*>(data));
  } else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    OnApi(domain, cbid, static_cast<const CUpti_CallbackData*>(data));
  }
}

ThreadState& Collector::State() {
  if (ThreadState* s = t_state) return *s;
  // This thread's first launch (or API call): allocates once.
  auto* s = new ThreadState();
  s->ring = launches_->NewRing(CurrentThreadId());
  if (!t_state_gone) (void)&t_state_owner;  // odr-use: registers the owner's destructor for this thread
  t_state = s;
  return *s;
}

void Collector::OnApi(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const auto& names = runtime ? runtime_names_ : driver_names_;
  if (cbid >= names.size() || names[cbid] == 0) return;
  const LaunchApiInfo launch = runtime ? (cbid < kRuntimeLaunches.size() ? kRuntimeLaunches[cbid] : LaunchApiInfo{})
                                       : (cbid < kDriverLaunches.size() ? kDriverLaunches[cbid] : LaunchApiInfo{});
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (launch.api != LaunchApi::kNone) return OnLaunchEnter(launch, cb);  // times the call itself
    const uint64_t now = Now();
    if (cb->correlationData) *cb->correlationData = now;
    return;
  }
  if (cb->callbackSite != CUPTI_API_EXIT) return;
  if (launch.api == LaunchApi::kNone && !config_.write_api) return;
  ThreadState& t = State();
  uint8_t flags = 0;
  bool inner = false;  // the driver's launch inside a runtime launch
  if (launch.api != LaunchApi::kNone) {
    inner = t.depth > 1;
    flags = OnLaunchExit(t, cb);
  }
  if (!config_.write_api || (inner && !config_.api_nested)) {
    if (flags) launches_->PushWith<ExitOp>(t.ring, [&](ExitOp& e) { e.flags = flags; });
    return;
  }
  const uint64_t end_ns = Now();
  launches_->PushWith<ExitOp>(t.ring, [&](ExitOp& e) {
    e.flags = flags | kExitApiRecord;
    e.domain = static_cast<uint8_t>(runtime ? ApiDomain::kRuntime : ApiDomain::kDriver);
    e.cbid = cbid;
    e.correlation_id = cb->correlationId;
    e.name = names[cbid];
    e.start_ns = cb->correlationData ? *cb->correlationData : 0;
    e.end_ns = end_ns;
  });
}

void Collector::OnLaunchEnter(LaunchApiInfo info, const CUpti_CallbackData* cb) {
  ThreadState& t = State();
  if (t.depth++ > 0) {  // inside the outer launch call: its id is an alias; timed for its own API record
    if (cb->correlationData) *cb->correlationData = config_.api_nested ? Now() : 0;
    if (t.registered) {
      AliasOp a;
      a.alias = cb->correlationId;
      launches_->Push(t.ring, a);
    }
    return;
  }
  const uint64_t enter_ns = Now();
  if (cb->correlationData) *cb->correlationData = enter_ns;
  t.registered = t.capturing = false;

  // The device of the launch's context, memoised per thread.
  uint16_t device = 0;
  if (cb->context) {
    const uint64_t gen = g_stream_generation.load(std::memory_order_acquire);
    if (t.context != cb->context || t.context_generation != gen) {
      uint32_t dev = 0;
      t.context = nullptr;
      if (Cupti().GetDeviceId(cb->context, &dev) == CUPTI_SUCCESS) {
        t.context = cb->context;
        t.context_generation = gen;
        t.device = static_cast<uint16_t>(dev);
      }
    }
    if (t.context == cb->context) device = t.device;
  }
  auto stream_id = [&](CUstream s) {
    uint32_t id = 0;
    if (!cb->context || config_.skip_stream) return id;
    const uint8_t per_thread = info.per_thread_stream ? 1 : 0;
    const uint64_t gen = g_stream_generation.load(std::memory_order_acquire);
    ThreadState::StreamMemo& m = t.streams[(reinterpret_cast<uintptr_t>(s) >> 4) % ThreadState::kStreamMemoSlots];
    if (m.generation == gen && m.stream == s && m.context == cb->context && m.per_thread == per_thread) return m.id;
    if (Cupti().GetStreamIdEx(cb->context, s, per_thread, &id) == CUPTI_SUCCESS)
      m = ThreadState::StreamMemo{cb->context, s, gen, id, per_thread};
    return id;
  };
  // The range instance of this launch goes into the ring once per instance.
  auto announce_frame = [&] {
    if (!config_.skip_key) launches_->AnnounceFrame(t.ring, ThreadRangeStack(), &t.announced_frame);
  };

  if (info.api == LaunchApi::kRuntimeGraph || info.api == LaunchApi::kDriverGraph) {
    CUgraphExec exec = nullptr;
    CUstream stream = nullptr;
    if (cb->functionParams) {
      if (info.api == LaunchApi::kRuntimeGraph) {
        auto* p = static_cast<const cudaGraphLaunch_v10000_params*>(cb->functionParams);
        exec = reinterpret_cast<CUgraphExec>(p->graphExec);
        stream = reinterpret_cast<CUstream>(p->stream);
      } else {
        auto* p = static_cast<const cuGraphLaunch_params*>(cb->functionParams);
        exec = p->hGraph;
        stream = p->hStream;
      }
    }
    if (Capturing(stream, info.per_thread_stream)) {
      t.capturing = true;
      return;
    }
    // The exec, memoised per thread while no exec is created or destroyed.
    const uint64_t gen = graphs_->generation();
    if (!t.graph.valid || t.graph.exec != exec || t.graph.generation != gen) {
      t.graph.info = exec ? graphs_->Find(exec) : nullptr;
      t.graph.exec = exec;
      t.graph.generation = gen;
      t.graph.valid = true;
    }
    GraphOp op;
    op.device = device;
    op.correlation_id = cb->correlationId;
    op.cpu_ns = enter_ns;
    op.exec = t.graph.info;
    if (op.exec) {
      op.stream = stream_id(stream);
      announce_frame();
    }
    t.registered = op.exec != nullptr;
    launches_->PushGraph(t.ring, std::move(op));
    return;
  }

  KernelLaunch k;
  if (!ReadKernelLaunch(info.api, cb, &k)) k.name = cb->symbolName;
  if (!config_.skip_capture && Capturing(k.stream, info.per_thread_stream)) {
    t.capturing = true;
    return;
  }
  const KernelName* name = KernelNameOf(t, k.name);
  const uint32_t stream = stream_id(k.stream);
  announce_frame();
  launches_->PushWith<KernelOp>(t.ring, [&](KernelOp& op) {
    op.device = device;
    op.correlation_id = cb->correlationId;
    op.cpu_ns = enter_ns;
    op.name = name;
    op.stream = stream;
    op.grid = k.grid;
    op.block = k.block;
    op.cluster = k.cluster;
  });
  t.registered = true;
}

const KernelName* Collector::KernelNameOf(ThreadState& t, const char* name) {
  if (!name) name = "";
  ThreadState::NameMemo& m = t.names[(reinterpret_cast<uintptr_t>(name) >> 3) % ThreadState::kNameMemoSlots];
  if (m.ptr == name && std::strncmp(name, m.name->name.c_str(), m.name->name.size() + 1) == 0) return m.name;
  const KernelName* n = kernel_names_->Get(name);  // this thread's first launch of it: locks
  m = ThreadState::NameMemo{name, n};
  return n;
}

uint8_t Collector::OnLaunchExit(ThreadState& t, const CUpti_CallbackData* cb) {
  if (t.depth == 0) return 0;  // enter was not seen (collection started mid-call)
  if (--t.depth > 0) return 0;
  if (t.capturing) return kExitLaunchEnd | kExitCaptured;
  if (ReturnValue(cb) != 0) return kExitLaunchEnd | kExitFailed;
  return kExitLaunchEnd;
}

void Collector::OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* res) {
  auto* g = static_cast<const CUpti_GraphData*>(res->resourceDescriptor);
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_CONTEXT_CREATED:
      if (res->context) RecordDevice(res->context);
      break;
    case CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING:
    case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
      g_stream_generation.fetch_add(1, std::memory_order_release);  // stream id memos are stale
      break;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATE_STARTING:
      graphs_->OnExecCreateStarting();
      break;
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED:
      if (g) graphs_->OnNodeCloned(g->originalNode, g->node);
      break;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED: {
      if (!g) break;
      bool complete = false;
      auto info = graphs_->OnExecCreated(g->graph, g->graphExec, &complete);
      loss_.graph_execs.fetch_add(1, std::memory_order_relaxed);
      if (!complete) {
        loss_.graph_execs_incomplete.fetch_add(1, std::memory_order_relaxed);
        static std::atomic<int> reports{0};
        if (reports.fetch_add(1) < 3)
          LogError(
              "could not inspect every node of CUDA graph exec %llu (%zu kernel nodes found); its launches are "
              "counted in graph_launches_unknown_exec and their kernels may lack launch keys",
              static_cast<unsigned long long>(info->exec_id), info->kernels.size());
      }
      break;
    }
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING:
      if (g && g->graphExec) graphs_->OnExecDestroyStarting(g->graphExec);
      break;
    default:
      break;
  }
}

}  // namespace twinscope::cupti
