// API and resource callbacks: API records, launch keys and LaunchRecords,
// graph instantiation. Runs on the application thread that made the call.
#include "cupti/callbacks.h"

#include <cupti.h>  // with the generated *_params structs of every API

#include <atomic>
#include <unordered_map>

#include "base/log.h"
#include "cupti/collector.h"
#include "cupti/cupti_api.h"
#include "cupti/cupti_check.h"
#include "format/header.h"
#include "launchkey/launch_key.h"

namespace twinscope::cupti {

namespace {

// The launch API call in progress on this thread. A runtime launch calls the
// driver's launch inside it; only the outermost call is the launch, the inner
// one's correlation id becomes an alias of it.
struct ThreadLaunch {
  int depth = 0;
  uint32_t correlation_id = 0;
  bool registered = false;  // keys added to PendingLaunches
  bool capturing = false;   // recorded into a graph under stream capture
  bool graph = false;
  bool unknown_graph = false;
  std::vector<LaunchRecord> records;
};
thread_local ThreadLaunch t_launch;

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

// Per-thread string caches in front of TraceWriter::Intern (which locks).
struct ThreadStrings {
  std::string path;
  StringId path_id = 0;
  bool have_path = false;
  std::unordered_map<std::string, StringId, StringViewHash, std::equal_to<>> names;
  CUcontext context = nullptr;
  uint32_t device = 0;
};
thread_local ThreadStrings t_strings;

// Per-thread memo of CUPTI stream ids: cuptiGetStreamIdEx on every launch
// cost ~0.6 us on the H200 (bench/RESULTS.md section 3, ablate). A CUstream
// handle names another stream only after its stream (or context) is
// destroyed, which bumps g_stream_generation and so empties every memo.
// Trivially destructible: valid during exit.
struct StreamMemo {
  CUcontext context;
  CUstream stream;
  uint64_t generation;  // 0: empty
  uint32_t id;
  uint8_t per_thread;
};
constexpr size_t kStreamMemoSlots = 16;
thread_local StreamMemo t_stream_memo[kStreamMemoSlots] = {};
std::atomic<uint64_t> g_stream_generation{1};

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
  std::string_view name;
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
  k->name = name ? name : "";
  return true;
}

}  // namespace

StringId Collector::InternCached(std::string_view s) {
  auto& names = t_strings.names;
  auto it = names.find(s);
  if (it != names.end()) return it->second;
  if (names.size() > 65536) names.clear();
  StringId id = writer_->Intern(s);
  names.emplace(std::string(s), id);
  return id;
}

void Collector::OnCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (!collecting() || !data) return;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    OnResource(cbid, static_cast<const CUpti_ResourceData*>(data));
  } else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    OnApi(domain, cbid, static_cast<const CUpti_CallbackData*>(data));
  }
}

void Collector::OnApi(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  const auto& names = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_names_ : driver_names_;
  if (cbid >= names.size() || names[cbid] == 0) return;
  bool launch = ClassifyLaunch(domain, cbid).api != LaunchApi::kNone;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    uint64_t now = Now();
    if (cb->correlationData) *cb->correlationData = now;
    if (launch) OnLaunchEnter(domain, cbid, cb);
    return;
  }
  if (cb->callbackSite != CUPTI_API_EXIT) return;
  if (config_.write_api) {
    ApiRecord r{};
    r.start_ns = cb->correlationData ? *cb->correlationData : 0;
    r.end_ns = Now();
    r.thread_id = CurrentThreadId();
    r.correlation_id = cb->correlationId;
    r.domain = static_cast<uint32_t>(domain == CUPTI_CB_DOMAIN_RUNTIME_API ? ApiDomain::kRuntime : ApiDomain::kDriver);
    r.cbid = cbid;
    r.name = names[cbid];
    writer_->Append(r);
    loss_.api_records.fetch_add(1, std::memory_order_relaxed);
  }
  if (launch) OnLaunchExit(cb);
}

void Collector::OnLaunchEnter(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  ThreadLaunch& t = t_launch;
  if (t.depth++ > 0) {
    if (t.registered) pending_->Alias(cb->correlationId, t.correlation_id);
    return;
  }
  t.correlation_id = cb->correlationId;
  t.registered = t.capturing = t.graph = t.unknown_graph = false;
  t.records.clear();

  LaunchApiInfo info = ClassifyLaunch(domain, cbid);
  uint64_t enter_ns = cb->correlationData ? *cb->correlationData : Now();

  LaunchRecord base{};
  base.cpu_ns = enter_ns;
  base.thread_id = CurrentThreadId();
  base.correlation_id = cb->correlationId;
  if (cb->context) {
    if (t_strings.context != cb->context) {
      uint32_t dev = 0;
      if (Cupti().GetDeviceId(cb->context, &dev) == CUPTI_SUCCESS) {
        t_strings.context = cb->context;
        t_strings.device = dev;
      }
    }
    if (t_strings.context == cb->context) base.device = t_strings.device;
  }

  auto make_key = [&](std::string_view kernel, Dim3 grid, Dim3 block) {
    if (config_.skip_key) return LaunchKey{};
    LaunchKeyParts p = ThreadRangeStack().NextLaunch(kernel, grid, block);
    if (!t_strings.have_path || t_strings.path != p.path) {
      t_strings.path = p.path;
      t_strings.path_id = p.path.empty() ? 0 : writer_->Intern(p.path);
      t_strings.have_path = true;
    }
    return LaunchKey{p.hash, t_strings.path_id, p.ordinal};
  };
  auto stream_id = [&](CUstream s) {
    uint32_t id = 0;
    if (!cb->context || config_.skip_stream) return id;
    const uint8_t per_thread = info.per_thread_stream ? 1 : 0;
    const uint64_t gen = g_stream_generation.load(std::memory_order_acquire);
    StreamMemo& m = t_stream_memo[(reinterpret_cast<uintptr_t>(s) >> 4) % kStreamMemoSlots];
    if (m.generation == gen && m.stream == s && m.context == cb->context && m.per_thread == per_thread) return m.id;
    if (Cupti().GetStreamIdEx(cb->context, s, per_thread, &id) == CUPTI_SUCCESS)
      m = StreamMemo{cb->context, s, gen, id, per_thread};
    return id;
  };

  if (info.api == LaunchApi::kRuntimeGraph || info.api == LaunchApi::kDriverGraph) {
    t.graph = true;
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
    std::shared_ptr<const GraphExecInfo> g = exec ? graphs_->Find(exec) : nullptr;
    if (!g || !g->complete) t.unknown_graph = true;
    if (!g) return;
    base.graph_exec_id = g->exec_id;
    base.stream = stream_id(stream);
    base.flags = kFlagGraph;
    std::vector<LaunchKey> keys;
    keys.reserve(g->kernels.size());
    for (const GraphKernelNode& node : g->kernels) {
      LaunchRecord r = base;
      r.key = make_key(node.name, node.grid, node.block);
      r.kernel = node.name_id;
      r.grid = node.grid;
      r.block = node.block;
      keys.push_back(r.key);
      t.records.push_back(r);
    }
    pending_->AddGraph(cb->correlationId, g, std::move(keys));
    t.registered = true;
    return;
  }

  KernelLaunch k;
  if (!ReadKernelLaunch(info.api, cb, &k)) k.name = cb->symbolName ? cb->symbolName : "";
  if (!config_.skip_capture && Capturing(k.stream, info.per_thread_stream)) {
    t.capturing = true;
    return;
  }
  LaunchRecord r = base;
  r.key = make_key(k.name, k.grid, k.block);
  r.kernel = k.name.empty() ? 0 : InternCached(k.name);
  r.stream = stream_id(k.stream);
  r.grid = k.grid;
  r.block = k.block;
  r.cluster = k.cluster;
  t.records.push_back(r);
  if (!config_.skip_pending) pending_->AddPlain(cb->correlationId, r.key, r.kernel);
  t.registered = true;
}

void Collector::OnLaunchExit(const CUpti_CallbackData* cb) {
  ThreadLaunch& t = t_launch;
  if (t.depth == 0) return;  // enter was not seen (collection started mid-call)
  if (--t.depth > 0) return;
  if (t.capturing) {
    loss_.launches_during_capture.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (ReturnValue(cb) != 0) {
    if (t.registered) pending_->Remove(t.correlation_id);
    loss_.launches_failed.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (t.graph) {
    loss_.graph_launches.fetch_add(1, std::memory_order_relaxed);
    if (t.unknown_graph) loss_.graph_launches_unknown_exec.fetch_add(1, std::memory_order_relaxed);
  }
  for (LaunchRecord& r : t.records) r.seq = launch_seq_.fetch_add(1, std::memory_order_relaxed);
  if (!t.records.empty()) writer_->AppendMany(t.records.data(), t.records.size());
  loss_.launches_seen.fetch_add(t.records.size(), std::memory_order_release);  // after: see ProcessBuffer
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
