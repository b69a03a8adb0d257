// libtwinscope_blocks.so: the block probe (shadow collector) on the Compute
// Sanitizer API, injected with CUDA_INJECTION64_PATH (and NVTX_INJECTION64_PATH
// for the NVTX ranges of the launch key).
//
// What it does, per shared/DESIGN.md and shared/FACTS.md:
// - MODULE_LOADED: reads the module's kernel names from its cubin and patches
//   the module (BLOCK_ENTER/BLOCK_EXIT, patch fatbin embedded in this library)
//   only if it holds a selected kernel; other modules are never patched.
// - LAUNCH_BEGIN (and graph kernel-node launches): a launch of a kernel that
//   no pattern selects only bumps two atomic counters (its selection is
//   memoised per thread and CUfunction, no lock). A selected one gets its
//   launch key (the key's ordinal counts launches of the same kernel name, so
//   skipping other kernels leaves keys equal to the CUPTI collector's), and a
//   sampled launch of a patched module hands the patch a fresh device buffer.
// - Buffers: each context has one device arena (TWINSCOPE_BLOCKS_DEVICE_MB),
//   and a traced launch takes the next span of it (SpanArena). A span that
//   was used before is already zero, so the launch costs no device work of
//   its own: an all-zero buffer means "traced, one slot per block" (see
//   patch/block_probe_abi.h). Only fresh room gets a memset, and only a grid
//   over the slot cap a header copy.
// - Drained without a sync per launch: at the application's own
//   synchronisations (SYNCHRONIZE callbacks), before a stream/context/module
//   goes away, when the ring of in-flight launches is full or the arena 3/4
//   used (then, at the LAUNCH_END of the launch that filled it, everything in
//   flight is drained), and at exit. A drain copies each run of adjacent
//   spans with ONE copy, then zeroes the run (memset + stream sync) so its
//   room is ready again, and hands the copy (in pooled pinned host memory)
//   to the decoder thread: decoding
//   and writing block records never holds up the application (or the GPU,
//   idle while the application waits), unless the decoder falls more than
//   TWINSCOPE_BLOCKS_DECODE_MB behind (then the drain waits for it).
// - Never blocks in LAUNCH_BEGIN: a synchronous copy (or free) there, while the
//   driver is in the middle of submitting a launch, hung the H200 (the 65th
//   traced launch of blocks_bench, the first one to find the ring full). A
//   launch that finds the ring over twice its size (graph nodes, which have no
//   LAUNCH_END) or no buffer within the memory cap is left untraced, counted in
//   launches_untraced_no_buffer and blocks_overflow.
// - Never holds mu_ across a blocking Sanitizer call (copy, free): launches
//   are taken out of the ring under mu_, copied without it, and recorded under
//   it again, so a callback the driver delivers on another thread while our
//   copy waits cannot deadlock on mu_.
// - Writes a "shadow" trace: LaunchRecords, BlockRecords, NVTX records,
//   counters, and "tool_state" (ok / silent / subscribe_failed / disabled).
//
// Threads: Sanitizer callbacks arrive on application threads; all state is
// under one mutex. A callback that arrives while this thread is already inside
// one of ours (the Sanitizer calls we make may launch work or report syncs) is
// ignored.
// Every entry point is a firewall: on an internal error collection stops and
// the program continues; kernels of patched modules then get the context's
// "off" buffer (or, failing that, null userdata) and their patch returns at once.
//
// Exit (the H200 crashed at exit after ~1900 launches of a patched kernel were
// given null launch data and Shutdown had unsubscribed; see Shutdown):
// - A selected launch that is not traced (sampled out, no buffer) is never
//   handed null: it gets the context's "off" buffer, a zeroed header
//   (capacity 0) on which the patch returns at once, so the Sanitizer sees the
//   same kind of launch data as for traced launches.
// - Shutdown (atexit) does not unsubscribe and frees nothing handed to the
//   Sanitizer; the patch image is a static array. Callbacks that come later
//   (module unloads, context teardown, launches from static destructors)
//   return at once on an atomic flag, before touching any thread_local or
//   other object that exit may have destroyed; a late launch of a patched
//   module still gets the off buffer.
#include <sanitizer.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/env_names.h"
#include "base/log.h"
#include "blocks/block_decode.h"
#include "blocks/blocks_config.h"
#include "blocks/coexistence.h"
#include "blocks/cubin_symbols.h"
#include "blocks/kernel_selector.h"
#include "blocks/probe_callbacks.h"
#include "blocks/span_arena.h"
#include "format/header.h"
#include "format/status_ticker.h"
#include "format/trace_writer.h"
#include "launchkey/launch_key.h"
#include "nvtx/nvtx_capture.h"
#include "twinscope/counters.h"

namespace twinscope::embedded {
extern const unsigned char block_probe_patch[];
extern const std::size_t block_probe_patch_size;
}  // namespace twinscope::embedded

namespace twinscope::blocks {
namespace {

const char* ResultString(SanitizerResult r) {
  const char* s = nullptr;
  if (sanitizerGetResultString(r, &s) != SANITIZER_SUCCESS || s == nullptr) return "unknown Sanitizer error";
  return s;
}

// One traced launch whose buffer (a span of its context's arena) is still on the device.
struct InFlight {
  LaunchRecord record{};
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  Sanitizer_StreamHandle stream = nullptr;
  uint64_t offset = 0;  // of its span in the context's arena
  uint64_t bytes = 0;   // span size
  uint32_t threads_per_block = 0;
  bool recorded = false;  // the launch never got its span (already on record): copy and zero, don't decode
};

// Launches copied out of the arena in one run, for the decoder thread.
// Host memory a run is copied into: pinned (sanitizerAllocHost, pooled per
// context: the copy runs at full DMA speed and touches no fresh pages), or
// pageable when no pinned memory can be had.
struct HostBuffer {
  CUcontext context = nullptr;
  unsigned char* pinned = nullptr;
  uint64_t capacity = 0;                // of `pinned`
  std::vector<unsigned char> pageable;  // used when `pinned` is null
  unsigned char* data() { return pinned != nullptr ? pinned : pageable.data(); }
};

struct DecodeJob {
  std::vector<InFlight> launches;
  HostBuffer host;  // the run's bytes; launch i's span at host.data() + offset - start
  uint64_t bytes = 0;
  uint64_t blocks = 0;  // of its launches' grids
  uint64_t start = 0;
  SanitizerResult result = SANITIZER_SUCCESS;
};

// A context's device arena, handed out in spans.
struct ContextArena {
  explicit ContextArena(uint64_t bytes) : spans(bytes) {}
  void* device = nullptr;  // null: its allocation failed (no launch of this context is traced)
  SpanArena spans;
};

// A context's "off" buffer: a BlockProbeHeader with `off` set. Written by a
// copy on the stream of every launch that uses it until one copy is known
// complete (a stream sync after a launch), then `ready` for all streams.
struct OffBuffer {
  void* device = nullptr;
  bool ready = false;
  Sanitizer_StreamHandle pending_stream = nullptr;  // a stream whose memset makes it ready
};

// Set by Shutdown; read first by every callback. Trivially destructible, so
// valid during all of exit.
std::atomic<bool> g_shut_down{false};

class BlockProbe final : public NvtxListener {
 public:
  static BlockProbe& Get() {
    static BlockProbe* probe = new BlockProbe();  // never destroyed: callbacks may come late
    return *probe;
  }

  int Initialize();
  void OnCallback(Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid, const void* data);
  void Shutdown();
  void OnNvtx(const NvtxEvent& e) override;
  // After Shutdown: a launch only keeps a patched module's patch off.
  void OnLaunchAfterShutdown(const Sanitizer_LaunchData& d, bool graph_node);
  void OnContextDestroyAfterShutdown(CUcontext ctx);

 private:
  void OnModuleLoaded(const Sanitizer_ResourceModuleData& m);
  void OnLaunchBegin(const Sanitizer_LaunchData& d, bool graph_node);
  void OnLaunchEnd(const Sanitizer_LaunchData& d);
  // The off buffer for a launch on `stream` of `ctx`, or null (counted).
  void* OffBufferLocked(CUcontext ctx, Sanitizer_StreamHandle stream);
  // Hands an untraced launch of a patched module the off buffer (null if none).
  void SetUntracedLocked(const Sanitizer_LaunchData& d, Sanitizer_StreamHandle stream);
  // Waits for the header copies of new off buffers (LAUNCH_END only), then marks them ready.
  void MakeOffBuffersReady(std::unique_lock<std::mutex>& lock);
  // After a launch was submitted (LAUNCH_END, graph LAUNCH_END): the drains
  // that LAUNCH_BEGIN may not do (ring full, memory cap, naive mode).
  void AfterLaunch(uint64_t traced_seq, uint64_t grid_id);
  bool PatchModuleLocked(const Sanitizer_ResourceModuleData& m);
  // The context's arena, allocated on first use; null if that failed.
  ContextArena* ArenaLocked(CUcontext ctx);
  // Drains the in-flight launches for which `pick` is true, oldest first.
  // Called with `lock` held; releases it around each copy.
  template <typename Pick>
  void Drain(std::unique_lock<std::mutex>& lock, Pick pick);
  // Queues a copied run for the decoder thread (started on first use); waits
  // (without mu_) while the decoder is too far behind.
  void EnqueueDecode(std::unique_lock<std::mutex>& lock, DecodeJob job);
  void DecoderLoop();
  // Decodes a run's launches and writes their records (no lock held; takes
  // mu_ once for the counters).
  void DecodeAndWrite(DecodeJob& job);
  // Host memory for copying a run of `bytes` (no lock held: may allocate).
  HostBuffer AcquireHostBuffer(CUcontext ctx, uint64_t bytes);
  // Waits (without mu_) until every queued run is written; false on timeout.
  bool WaitForDecoder(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds timeout);
  void ReleaseContext(std::unique_lock<std::mutex>& lock, CUcontext ctx);
  uint32_t StreamIdLocked(Sanitizer_StreamHandle h);
  void PublishCountersLocked();
  void SanitizerError(const char* what, SanitizerResult r);

  std::mutex mu_;
  BlocksConfig config_;
  std::unique_ptr<KernelSelector> selector_;
  std::unique_ptr<TraceWriter> writer_;
  std::unique_ptr<StatusTicker> ticker_;  // counters into the trace every flush period (crash-true accounting)
  Sanitizer_SubscriberHandle subscriber_ = nullptr;
  bool initialized_ = false;
  bool subscribe_failed_ = false;
  std::string subscribe_error_;
  bool disabled_ = false;
  bool shut_down_ = false;

  std::unordered_set<CUcontext> patch_loaded_;  // contexts with our patch image
  std::unordered_map<CUmodule, bool> modules_;  // module -> patched
  std::unordered_map<Sanitizer_StreamHandle, uint32_t> stream_ids_;
  std::set<int> devices_;
  std::deque<InFlight> ring_;
  uint64_t in_transit_ = 0;         // launches taken out of ring_, being copied without mu_
  uint64_t in_transit_blocks_ = 0;  // their blocks
  std::condition_variable transit_cv_;
  // Decoder thread. Lock order: mu_ before jobs_mu_; the decoder never holds
  // jobs_mu_ while taking mu_.
  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;  // a job was queued / one finished
  std::deque<DecodeJob> jobs_;
  uint64_t jobs_bytes_ = 0;
  uint64_t jobs_blocks_ = 0;  // blocks of queued and running jobs
  bool decoder_busy_ = false;
  bool decoder_started_ = false;
  std::vector<HostBuffer> host_pool_;  // pinned buffers not in use (under jobs_mu_)
  uint64_t pinned_bytes_ = 0;          // all pinned buffers, in use or not (under jobs_mu_)
  std::unordered_map<CUcontext, std::unique_ptr<ContextArena>> arenas_;
  std::unordered_map<CUcontext, OffBuffer> off_;  // never freed: launches may use it until exit
  std::atomic<bool> off_sync_wanted_{false};
  std::atomic<uint64_t> next_seq_{0};      // process-wide launch ordinal (LaunchRecord.seq)
  std::atomic<bool> drain_wanted_{false};  // ring full or arena 3/4 used: AfterLaunch drains

  // Does a pattern select this launch's kernel? Memoised per thread.
  bool Selected(const Sanitizer_LaunchData& d);

  std::atomic<uint64_t> callbacks_{0};
  std::atomic<uint64_t> launches_seen_{0};
  std::atomic<uint64_t> graph_node_launches_{0};
  std::map<std::string, uint64_t> counts_;  // under mu_
};

thread_local bool tl_in_callback = false;

// Marks this thread as inside our own Sanitizer calls for a scope, so callbacks
// they trigger on this thread are ignored.
class OwnCalls {
 public:
  OwnCalls() : saved_(tl_in_callback) { tl_in_callback = true; }
  ~OwnCalls() { tl_in_callback = saved_; }

 private:
  bool saved_;
};
thread_local uint64_t tl_open_launch_seq = UINT64_MAX;  // traced launch between BEGIN and END on this thread

// Per-thread memo of "does a pattern select this CUfunction's kernel".
// Selection depends on the name only, and a CUfunction handle can name another
// kernel only after its module is unloaded, which bumps g_module_generation and
// so invalidates every memo. Trivially destructible: valid during exit.
struct SelectionMemo {
  const void* function;
  uint64_t generation;
  bool selected;
};
constexpr size_t kMemoSlots = 64;
thread_local SelectionMemo tl_memo[kMemoSlots] = {};
std::atomic<uint64_t> g_module_generation{1};

using counters::kBlocksBadBuffer;
using counters::kBlocksIncomplete;
using counters::kBlocksLost;
using counters::kBlocksMissing;
using counters::kGraphKernelNodeLaunches;
using counters::kLaunchesNoBuffer;
using counters::kLaunchesSelectedUnpatched;
using counters::kModulesPatchFailed;
using counters::kModulesUnparsed;
using counters::kSanitizerErrors;

void SANITIZERAPI Callback(void* userdata, Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid,
                           const void* data) {
  if (g_shut_down.load(std::memory_order_acquire)) {
    // After Shutdown (during exit): nothing but keeping patches off.
    if (data == nullptr) return;
    Firewall("block probe Sanitizer callback after exit", [&] {
      if (domain == SANITIZER_CB_DOMAIN_LAUNCH && cbid == SANITIZER_CBID_LAUNCH_BEGIN) {
        BlockProbe::Get().OnLaunchAfterShutdown(*static_cast<const Sanitizer_LaunchData*>(data), false);
      } else if (domain == SANITIZER_CB_DOMAIN_GRAPHS && cbid == SANITIZER_CBID_GRAPHS_NODE_LAUNCH_BEGIN) {
        const auto& g = *static_cast<const Sanitizer_GraphNodeLaunchData*>(data);
        if (g.nodeType == CU_GRAPH_NODE_TYPE_KERNEL && !g.isGraphUpload)
          BlockProbe::Get().OnLaunchAfterShutdown(g.launchData, true);
      } else if (domain == SANITIZER_CB_DOMAIN_RESOURCE && cbid == SANITIZER_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
        BlockProbe::Get().OnContextDestroyAfterShutdown(
            static_cast<const Sanitizer_ResourceContextData*>(data)->context);
      }
    });
    return;
  }
  if (tl_in_callback) {
    // Work we started ourselves (memset, copies): not the application's.
    return;
  }
  tl_in_callback = true;
  Firewall("block probe Sanitizer callback", [&] { BlockProbe::Get().OnCallback(domain, cbid, data); });
  tl_in_callback = false;
}

void AtExit() {
  Firewall("block probe exit", [] { BlockProbe::Get().Shutdown(); });
}

int BlockProbe::Initialize() {
  std::lock_guard<std::mutex> lock(mu_);
  if (initialized_) return 1;
  initialized_ = true;
  auto config = ConfigFromEnv();
  if (!config.ok()) {
    // Leave a trace that says why, so `twinscope join/stats` report it instead of a missing file.
    const std::string msg = "block probe disabled: " + config.status().message();
    LogError("%s", msg.c_str());
    disabled_ = true;
    WriterOptions wo;
    wo.path = EnvString(twinscope::env::kOutput, "twinscope-blocks-" + std::to_string(getpid()) + ".tsc");
    nlohmann::json header = BaseHeader("shadow");
    header["collector"] = "blocks";
    std::string error;
    if (auto w = TraceWriter::Open(wo, header, &error)) {
      w->SetMetadata("tool_state", "config_error");
      w->SetMetadata("tool_message", msg);
      w->Close(&error);
    }
    return 1;
  }
  config_ = std::move(*config);
  selector_ = std::make_unique<KernelSelector>(config_.patterns, config_.sampling);
  if (selector_->empty())
    LogError(
        "block probe: TWINSCOPE_KERNELS is empty, so no kernel is traced (give substrings or \"re:<regex>\", "
        "';'-separated)");

  nlohmann::json header = BaseHeader("shadow");
  header["collector"] = "blocks";
  header["kernels"] = config_.patterns_spec;
  header["every"] = config_.sampling.every;
  header["max_launches"] = config_.sampling.max_launches;
  header["ring"] = config_.ring;
  header["max_slots"] = config_.max_slots;
  if (config_.naive) header["naive"] = true;
  header["clock"] = {{"launch_cpu_ns", "CLOCK_MONOTONIC"}, {"block_ns", "GPU %globaltimer"}};
  const long long flush_ms = EnvInt(twinscope::env::kFlushMs, 500);  // period of the STATUS chunks (0: writer's own)
  header["flush_ms"] = flush_ms;
  WriterOptions wo;
  wo.path = config_.output;
  wo.max_buffered_bytes = config_.max_buffered_bytes;
  std::string error;
  writer_ = TraceWriter::Open(wo, header, &error);
  if (!writer_) {
    LogError("block probe disabled: %s", error.c_str());
    disabled_ = true;
    return 1;
  }
  writer_->SetMetadata("tool_state", "starting");

  SanitizerResult r = sanitizerSubscribe(&subscriber_, Callback, nullptr);
  if (r != SANITIZER_SUCCESS) {
    subscribe_failed_ = true;
    subscribe_error_ = std::string("sanitizerSubscribe returned ") + std::to_string(int(r)) + " " + ResultString(r);
    subscriber_ = nullptr;
  } else {
    for (const auto& w : kProbeCallbacks) {
      SanitizerResult e = sanitizerEnableCallback(1, subscriber_, w.domain, w.cbid);
      if (e != SANITIZER_SUCCESS) {
        LogError("block probe: sanitizerEnableCallback(domain %d, cbid %u) failed: %s", int(w.domain), w.cbid,
                 ResultString(e));
        ++counts_[kSanitizerErrors];
      }
    }
  }
  SetNvtxListener(this, MonotonicNs);
  ticker_ = std::make_unique<StatusTicker>(writer_.get(), std::chrono::milliseconds(flush_ms), [this] {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shut_down_) PublishCountersLocked();
  });
  std::atexit(AtExit);
  writer_->SetMetadata("tool_state", subscribe_failed_ ? "subscribe_failed" : "subscribed");
  if (subscribe_failed_) {
    std::string msg = SilentProbeMessage(true, subscribe_error_, LikelySeatHolderOfThisProcess());
    LogError("%s", msg.c_str());
    writer_->SetMetadata("tool_message", msg);
  } else {
    LogInfo("block probe on: kernels \"%s\", every %llu, max %llu launches; trace %s", config_.patterns_spec.c_str(),
            static_cast<unsigned long long>(config_.sampling.every),
            static_cast<unsigned long long>(config_.sampling.max_launches), config_.output.c_str());
  }
  return 1;
}

void BlockProbe::SanitizerError(const char* what, SanitizerResult r) {
  ++counts_[kSanitizerErrors];
  if (counts_[kSanitizerErrors] <= 5) LogError("block probe: %s failed: %s", what, ResultString(r));
}

void BlockProbe::OnCallback(Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid, const void* data) {
  callbacks_.fetch_add(1, std::memory_order_relaxed);
  if (disabled_ || data == nullptr) return;
  switch (domain) {
    case SANITIZER_CB_DOMAIN_LAUNCH: {
      const auto& d = *static_cast<const Sanitizer_LaunchData*>(data);
      if (cbid == SANITIZER_CBID_LAUNCH_BEGIN) OnLaunchBegin(d, false);
      if (cbid == SANITIZER_CBID_LAUNCH_END) OnLaunchEnd(d);
      return;
    }
    case SANITIZER_CB_DOMAIN_GRAPHS: {
      if (cbid == SANITIZER_CBID_GRAPHS_LAUNCH_END) {
        AfterLaunch(UINT64_MAX, 0);
        return;
      }
      if (cbid != SANITIZER_CBID_GRAPHS_NODE_LAUNCH_BEGIN) return;
      const auto& g = *static_cast<const Sanitizer_GraphNodeLaunchData*>(data);
      if (g.nodeType == CU_GRAPH_NODE_TYPE_KERNEL && !g.isGraphUpload) OnLaunchBegin(g.launchData, true);
      return;
    }
    case SANITIZER_CB_DOMAIN_RESOURCE: {
      std::unique_lock<std::mutex> lock(mu_);
      if (shut_down_) return;
      if (cbid == SANITIZER_CBID_RESOURCE_MODULE_LOADED) {
        OnModuleLoaded(*static_cast<const Sanitizer_ResourceModuleData*>(data));
      } else if (cbid == SANITIZER_CBID_RESOURCE_MODULE_UNLOAD_STARTING) {
        CUmodule m = static_cast<const Sanitizer_ResourceModuleData*>(data)->module;
        Drain(lock, [m](const InFlight& f) { return f.module == m; });
        modules_.erase(m);
        g_module_generation.fetch_add(1, std::memory_order_release);
      } else if (cbid == SANITIZER_CBID_RESOURCE_CONTEXT_CREATION_FINISHED) {
        const auto& c = *static_cast<const Sanitizer_ResourceContextData*>(data);
        if (devices_.insert(int(c.device)).second) writer_->SetMetadata("devices", devices_);
      } else if (cbid == SANITIZER_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
        ReleaseContext(lock, static_cast<const Sanitizer_ResourceContextData*>(data)->context);
      } else if (cbid == SANITIZER_CBID_RESOURCE_STREAM_DESTROY_STARTING) {
        Sanitizer_StreamHandle h = static_cast<const Sanitizer_ResourceStreamData*>(data)->hStream;
        Drain(lock, [h](const InFlight& f) { return f.stream == h; });
      }
      return;
    }
    case SANITIZER_CB_DOMAIN_SYNCHRONIZE: {
      const CUcontext ctx = static_cast<const Sanitizer_SynchronizeData*>(data)->context;
      const Sanitizer_StreamHandle stream = static_cast<const Sanitizer_SynchronizeData*>(data)->hStream;
      std::unique_lock<std::mutex> lock(mu_);
      if (shut_down_ || ring_.empty()) return;
      ++counts_[counters::kBlocksSyncDrains];
      if (cbid == SANITIZER_CBID_SYNCHRONIZE_CONTEXT_SYNCHRONIZED) {
        Drain(lock, [ctx](const InFlight& f) { return f.context == ctx; });
      } else if (cbid == SANITIZER_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED) {
        Drain(lock, [stream](const InFlight& f) { return f.stream == stream; });
      }
      PublishCountersLocked();
      return;
    }
    default:
      return;
  }
}

void BlockProbe::OnModuleLoaded(const Sanitizer_ResourceModuleData& m) {
  ++counts_[counters::kModulesLoaded];
  std::vector<std::string> names;
  auto parsed = CubinKernelNames(m.pCubin, m.cubinSize);
  if (parsed.ok()) {
    names = std::move(*parsed);
  } else {
    // Not an ELF cubin we can read: fall back to the names in its bytes, so a
    // target kernel is not missed (a false match only costs patching).
    ++counts_[kModulesUnparsed];
    if (counts_[kModulesUnparsed] == 1)
      LogInfo("block probe: %s; using the strings of the image instead", parsed.status().message().c_str());
    names = PrintableNames(m.pCubin, m.cubinSize);
  }
  bool patched = false;
  if (config_.naive || selector_->AnyMatches(names)) patched = PatchModuleLocked(m);
  modules_[m.module] = patched;
  PublishCountersLocked();
}

bool BlockProbe::PatchModuleLocked(const Sanitizer_ResourceModuleData& m) {
  if (!patch_loaded_.count(m.context)) {
    SanitizerResult r = sanitizerAddPatches(embedded::block_probe_patch, m.context);
    if (r != SANITIZER_SUCCESS) {
      SanitizerError("sanitizerAddPatches (embedded block probe patch)", r);
      ++counts_[kModulesPatchFailed];
      return false;
    }
    patch_loaded_.insert(m.context);
  }
  SanitizerResult r =
      sanitizerPatchInstructions(SANITIZER_INSTRUCTION_BLOCK_ENTER, m.module, TWINSCOPE_BLOCK_ENTER_PATCH);
  if (r == SANITIZER_SUCCESS)
    r = sanitizerPatchInstructions(SANITIZER_INSTRUCTION_BLOCK_EXIT, m.module, TWINSCOPE_BLOCK_EXIT_PATCH);
  if (r == SANITIZER_SUCCESS) r = sanitizerPatchModule(m.module);
  if (r != SANITIZER_SUCCESS) {
    SanitizerError("patching a module that holds a target kernel", r);
    ++counts_[kModulesPatchFailed];
    return false;
  }
  ++counts_[counters::kModulesPatched];
  return true;
}

bool BlockProbe::Selected(const Sanitizer_LaunchData& d) {
  const uint64_t gen = g_module_generation.load(std::memory_order_acquire);
  SelectionMemo& m = tl_memo[(reinterpret_cast<uintptr_t>(d.function) >> 4) % kMemoSlots];
  if (m.function == d.function && m.generation == gen && d.function != nullptr) return m.selected;
  bool selected = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    selected = selector_->Matches(d.functionName ? d.functionName : "");
  }
  m = SelectionMemo{d.function, gen, selected};
  return selected;
}

void BlockProbe::OnLaunchBegin(const Sanitizer_LaunchData& d, bool graph_node) {
  tl_open_launch_seq = UINT64_MAX;
  launches_seen_.fetch_add(1, std::memory_order_relaxed);
  if (graph_node) graph_node_launches_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  if (!Selected(d)) return;  // the common case: no lock, no key

  const char* name = d.functionName ? d.functionName : "";
  const Dim3 grid{d.gridDim_x, d.gridDim_y, d.gridDim_z};
  const Dim3 block{d.blockDim_x, d.blockDim_y, d.blockDim_z};
  LaunchKeyParts key = ThreadRangeStack().NextLaunch(name, grid, block);
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  auto mod = modules_.find(d.module);
  if (mod == modules_.end() || !mod->second) {
    // Loaded before we subscribed, or patching failed: say so, once.
    if (++counts_[kLaunchesSelectedUnpatched] == 1)
      LogError(
          "block probe: kernel %s matches but its module is not patched (see modules_patch_failed); its "
          "launches are counted in %s, not traced",
          name, kLaunchesSelectedUnpatched);
    return;
  }
  const Sanitizer_StreamHandle stream = graph_node ? d.hApiStream : d.hStream;
  if (selector_->DecideLaunch(name) != KernelSelector::Decision::kTrace) {
    ++counts_[counters::kLaunchesSkipped];
    SetUntracedLocked(d, stream);
    return;
  }
  const uint64_t blocks = BlockCount(grid);
  counts_[counters::kBlocksExpected] += blocks;
  const bool ring_over = ring_.size() + in_transit_ >= 2 * uint64_t{config_.ring};
  InFlight f;
  f.context = d.context;
  f.module = d.module;
  f.stream = stream;
  f.threads_per_block = block.x * block.y * block.z;
  LaunchRecord& rec = f.record;
  rec.seq = seq;
  rec.cpu_ns = MonotonicNs();
  rec.thread_id = CurrentThreadId();
  rec.grid_id = d.gridId;
  rec.key.hash = key.hash;
  rec.key.path = key.path.empty() ? 0 : writer_->Intern(key.path);
  rec.key.ordinal = key.ordinal;
  rec.device = static_cast<uint32_t>(d.device);
  rec.stream = StreamIdLocked(stream);
  rec.kernel = writer_->Intern(name);
  rec.grid = grid;
  rec.block = block;
  rec.cluster = Dim3{d.clusterDim_x, d.clusterDim_y, d.clusterDim_z};
  rec.flags = graph_node ? uint32_t{kFlagGraph} : 0u;

  ContextArena* arena = ring_over ? nullptr : ArenaLocked(d.context);
  std::optional<SpanArena::Span> span;
  uint32_t slots = 0;
  if (arena != nullptr) {
    // At most half the arena per launch, so one huge grid never starves the next launches.
    const uint64_t fit = (arena->spans.bytes() / 2 - sizeof(BlockProbeHeader)) / sizeof(BlockProbeSlot);
    slots = SlotsFor(grid, static_cast<uint32_t>(std::min<uint64_t>(config_.max_slots, fit)));
    span = arena->spans.Take(BlockProbeBufferBytes(slots));
  }
  if (!span) {
    // No room (ring over, arena full or not allocated): on record, untraced, counted.
    if (ring_over || (arena != nullptr && arena->spans.live_spans() > 0))
      drain_wanted_.store(true, std::memory_order_relaxed);
    SetUntracedLocked(d, stream);
    ++counts_[kLaunchesNoBuffer];
    counts_[counters::kBlocksOverflow] += blocks;
    writer_->Append(rec);  // the launch is still on record, with blocks_recorded = 0
    return;
  }
  f.offset = span->offset;
  f.bytes = BlockProbeBufferBytes(slots);
  void* buffer = static_cast<unsigned char*>(arena->device) + f.offset;
  // A span used before is zero already (zeroed when drained): nothing to do.
  // The naive baseline zeroes every launch's buffer, as a simple tool would.
  SanitizerResult r = SANITIZER_SUCCESS;
  if (!span->known_zero || config_.naive) r = sanitizerMemset(buffer, 0, f.bytes, stream);
  if (r == SANITIZER_SUCCESS && slots < blocks) {
    BlockProbeHeader h = MakeCappedHeader(slots);
    r = sanitizerMemcpyHostToDeviceAsync(buffer, &h, sizeof h, stream);
  }
  if (r == SANITIZER_SUCCESS) r = sanitizerSetLaunchCallbackData(d.hLaunch, d.function, stream, buffer);
  if (r != SANITIZER_SUCCESS) {
    SanitizerError("preparing a traced launch (memset, header copy, sanitizerSetLaunchCallbackData)", r);
    ++counts_[kLaunchesNoBuffer];
    counts_[counters::kBlocksOverflow] += blocks;
    SetUntracedLocked(d, stream);
    writer_->Append(rec);
    f.recorded = true;  // its span goes back through a drain, which zeroes it
    ring_.push_back(std::move(f));
    return;
  }
  ++counts_[counters::kLaunchesTraced];
  ring_.push_back(std::move(f));
  if (ring_.size() >= config_.ring || arena->spans.used() > arena->spans.bytes() / 4 * 3)
    drain_wanted_.store(true, std::memory_order_relaxed);
  tl_open_launch_seq = seq;
}

void BlockProbe::OnLaunchEnd(const Sanitizer_LaunchData& d) {
  const uint64_t seq = tl_open_launch_seq;
  tl_open_launch_seq = UINT64_MAX;
  AfterLaunch(seq, d.gridId);
}

void BlockProbe::AfterLaunch(uint64_t traced_seq, uint64_t grid_id) {
  const bool naive = config_.naive && traced_seq != UINT64_MAX;
  if (traced_seq == UINT64_MAX && !drain_wanted_.load(std::memory_order_relaxed) &&
      !off_sync_wanted_.load(std::memory_order_relaxed))
    return;  // the common case
  std::unique_lock<std::mutex> lock(mu_);
  if (shut_down_) return;
  if (off_sync_wanted_.exchange(false, std::memory_order_relaxed)) MakeOffBuffersReady(lock);
  if (traced_seq != UINT64_MAX) {
    for (auto it = ring_.rbegin(); it != ring_.rend(); ++it) {
      if (it->record.seq == traced_seq) {
        if (it->record.grid_id == 0) it->record.grid_id = grid_id;
        break;
      }
    }
  }
  if (naive) Drain(lock, [traced_seq](const InFlight& f) { return f.record.seq == traced_seq; });
  if (!drain_wanted_.exchange(false, std::memory_order_relaxed) || ring_.empty()) return;
  // Ring full or arena filling: drain everything in flight. A copy waits for
  // all work queued on its stream anyway, so draining less would not wait less.
  ++counts_[counters::kBlocksForcedDrains];
  Drain(lock, [](const InFlight&) { return true; });
}

void BlockProbe::SetUntracedLocked(const Sanitizer_LaunchData& d, Sanitizer_StreamHandle stream) {
  void* off = OffBufferLocked(d.context, stream);
  SanitizerResult r = sanitizerSetLaunchCallbackData(d.hLaunch, d.function, stream, off);
  if (r != SANITIZER_SUCCESS) SanitizerError("sanitizerSetLaunchCallbackData (untraced launch)", r);
}

void* BlockProbe::OffBufferLocked(CUcontext ctx, Sanitizer_StreamHandle stream) {
  auto it = off_.find(ctx);
  if (it != off_.end() && it->second.ready) return it->second.device;
  if (it == off_.end()) {
    void* p = nullptr;
    SanitizerResult r = sanitizerAlloc(ctx, &p, sizeof(BlockProbeHeader));
    if (r != SANITIZER_SUCCESS || p == nullptr) {
      SanitizerError("sanitizerAlloc (off buffer)", r);
      return nullptr;
    }
    it = off_.emplace(ctx, OffBuffer{p, false, stream}).first;
  }
  // Not known written yet: write it ahead of this launch on its own stream (all
  // such copies write the same header, so they cannot disturb each other).
  BlockProbeHeader h = MakeOffHeader();
  SanitizerResult r = sanitizerMemcpyHostToDeviceAsync(it->second.device, &h, sizeof h, stream);
  if (r != SANITIZER_SUCCESS) {
    SanitizerError("sanitizerMemcpyHostToDeviceAsync (off buffer)", r);
    return nullptr;
  }
  it->second.pending_stream = stream;
  off_sync_wanted_.store(true, std::memory_order_relaxed);
  return it->second.device;
}

void BlockProbe::MakeOffBuffersReady(std::unique_lock<std::mutex>& lock) {
  std::vector<std::pair<CUcontext, Sanitizer_StreamHandle>> pending;
  for (const auto& [ctx, off] : off_)
    if (!off.ready) pending.emplace_back(ctx, off.pending_stream);
  for (const auto& [ctx, stream] : pending) {
    lock.unlock();
    SanitizerResult r;
    {
      OwnCalls own;
      r = sanitizerStreamSynchronize(stream);
    }
    lock.lock();
    auto it = off_.find(ctx);
    if (it == off_.end()) continue;
    if (r == SANITIZER_SUCCESS && it->second.pending_stream == stream) {
      it->second.ready = true;
    } else if (r != SANITIZER_SUCCESS) {
      SanitizerError("sanitizerStreamSynchronize (off buffer)", r);  // stays per-launch zeroed
    } else {
      off_sync_wanted_.store(true, std::memory_order_relaxed);  // zeroed on another stream meanwhile: wait for that
    }
  }
}

void BlockProbe::OnLaunchAfterShutdown(const Sanitizer_LaunchData& d, bool graph_node) {
  std::lock_guard<std::mutex> lock(mu_);
  auto mod = modules_.find(d.module);
  if (mod == modules_.end() || !mod->second) return;
  auto off = off_.find(d.context);
  if (off == off_.end() || !off->second.ready) return;  // no stream-ordered zeroing at exit: leave the default
  sanitizerSetLaunchCallbackData(d.hLaunch, d.function, graph_node ? d.hApiStream : d.hStream, off->second.device);
}

void BlockProbe::OnContextDestroyAfterShutdown(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  off_.erase(ctx);  // the driver frees its memory with the context
}

ContextArena* BlockProbe::ArenaLocked(CUcontext ctx) {
  auto it = arenas_.find(ctx);
  if (it == arenas_.end()) {
    auto arena = std::make_unique<ContextArena>(config_.max_device_bytes);
    SanitizerResult r = sanitizerAlloc(ctx, &arena->device, config_.max_device_bytes);
    if (r != SANITIZER_SUCCESS || arena->device == nullptr) {
      arena->device = nullptr;
      SanitizerError("sanitizerAlloc (block buffer arena; a smaller TWINSCOPE_BLOCKS_DEVICE_MB may fit)", r);
    }
    it = arenas_.emplace(ctx, std::move(arena)).first;
  }
  return it->second->device != nullptr ? it->second.get() : nullptr;
}

template <typename Pick>
void BlockProbe::Drain(std::unique_lock<std::mutex>& lock, Pick pick) {
  std::vector<InFlight> taken;
  for (auto it = ring_.begin(); it != ring_.end();) {
    if (pick(*it)) {
      taken.push_back(std::move(*it));
      it = ring_.erase(it);
    } else {
      ++it;
    }
  }
  if (taken.empty()) return;
  in_transit_ += taken.size();
  for (const InFlight& f : taken) in_transit_blocks_ += BlockCount(f.record.grid);
  for (size_t i = 0; i < taken.size();) {
    // A run: launches of one context whose spans follow each other in its arena.
    size_t j = i + 1;
    while (j < taken.size() && taken[j].context == taken[i].context &&
           taken[j].offset == taken[j - 1].offset + taken[j - 1].bytes)
      ++j;
    const CUcontext ctx = taken[i].context;
    auto a = arenas_.find(ctx);
    unsigned char* base = a != arenas_.end() ? static_cast<unsigned char*>(a->second->device) : nullptr;
    const uint64_t start = taken[i].offset;
    const uint64_t bytes = taken[j - 1].offset + taken[j - 1].bytes - start;
    // One copy, ordered after the run's launches on its own stream; launches
    // of the run on other streams are waited for first.
    const Sanitizer_StreamHandle copy_stream = taken[j - 1].stream;
    std::vector<Sanitizer_StreamHandle> others;
    for (size_t k = i; k < j; ++k)
      if (taken[k].stream != copy_stream && std::find(others.begin(), others.end(), taken[k].stream) == others.end())
        others.push_back(taken[k].stream);
    lock.unlock();
    SanitizerResult r = base != nullptr ? SANITIZER_SUCCESS : SANITIZER_ERROR_INVALID_PARAMETER;
    bool zeroed = false;
    HostBuffer host;
    {
      OwnCalls own;
      host = AcquireHostBuffer(ctx, bytes);
      for (Sanitizer_StreamHandle s : others)
        if (r == SANITIZER_SUCCESS) r = sanitizerStreamSynchronize(s);
      if (r == SANITIZER_SUCCESS) r = sanitizerMemcpyDeviceToHost(host.data(), base + start, bytes, copy_stream);
      // Zero the run again, and wait for it, so its spans need no memset when reused.
      if (r == SANITIZER_SUCCESS && !config_.naive)
        zeroed = sanitizerMemset(base + start, 0, bytes, copy_stream) == SANITIZER_SUCCESS &&
                 sanitizerStreamSynchronize(copy_stream) == SANITIZER_SUCCESS;
    }
    lock.lock();
    a = arenas_.find(ctx);
    DecodeJob job;
    job.start = start;
    job.result = r;
    for (size_t k = i; k < j; ++k) {
      --in_transit_;
      in_transit_blocks_ -= BlockCount(taken[k].record.grid);
      if (a != arenas_.end()) a->second->spans.Release(taken[k].offset, zeroed);
      job.blocks += BlockCount(taken[k].record.grid);
      job.launches.push_back(std::move(taken[k]));
    }
    job.host = std::move(host);
    job.bytes = bytes;
    EnqueueDecode(lock, std::move(job));
    i = j;
  }
  transit_cv_.notify_all();
}

void BlockProbe::EnqueueDecode(std::unique_lock<std::mutex>& lock, DecodeJob job) {
  if (shut_down_) return;  // the trace is closed (counted as lost by Shutdown)
  {
    std::lock_guard<std::mutex> jl(jobs_mu_);
    jobs_bytes_ += job.bytes;
    jobs_blocks_ += job.blocks;
    jobs_.push_back(std::move(job));
    if (!decoder_started_) {
      decoder_started_ = true;
      std::thread([this] { DecoderLoop(); }).detach();  // lives until exit, like this object
    }
  }
  jobs_cv_.notify_all();
  // Backpressure: never let undecoded copies grow without bound.
  std::unique_lock<std::mutex> jl(jobs_mu_);
  const uint64_t cap = config_.max_pending_decode_bytes;
  if (jobs_bytes_ <= cap) return;
  ++counts_[counters::kBlocksDecoderWaits];
  lock.unlock();
  jobs_cv_.wait(jl, [this, cap] { return jobs_bytes_ <= cap; });
  jl.unlock();
  lock.lock();
}

void BlockProbe::DecoderLoop() {
  Firewall("block probe decoder thread", [this] {
    std::unique_lock<std::mutex> jl(jobs_mu_);
    for (;;) {
      jobs_cv_.wait(jl, [this] { return !jobs_.empty(); });
      DecodeJob job = std::move(jobs_.front());
      jobs_.pop_front();
      decoder_busy_ = true;
      jl.unlock();
      DecodeAndWrite(job);
      jl.lock();
      if (job.host.pinned != nullptr) host_pool_.push_back(std::move(job.host));
      decoder_busy_ = false;
      jobs_bytes_ -= job.bytes;
      jobs_blocks_ -= job.blocks;
      jobs_cv_.notify_all();
    }
  });
}

void BlockProbe::DecodeAndWrite(DecodeJob& job) {
  std::map<std::string, uint64_t> add;
  uint64_t sanitizer_errors = 0;
  for (InFlight& f : job.launches) {
    if (f.recorded) continue;  // never handed to its launch: on record already
    const uint64_t expected = BlockCount(f.record.grid);
    if (job.result != SANITIZER_SUCCESS) {
      ++sanitizer_errors;
      add[kBlocksLost] += expected;
      writer_->Append(f.record);
      continue;
    }
    DecodedLaunch d = DecodeLaunchBuffer(job.host.data() + (f.offset - job.start), f.bytes, f.record.seq, f.record.grid,
                                         f.threads_per_block);
    if (d.bad_header) {
      ++add[kBlocksBadBuffer];
      add[kBlocksLost] += expected;
    }
    f.record.blocks_recorded = static_cast<uint32_t>(d.blocks.size());
    writer_->Append(f.record);
    if (!d.blocks.empty()) writer_->AppendMany(d.blocks.data(), d.blocks.size());
    add[counters::kBlocksRecorded] += d.blocks.size();
    add[counters::kBlocksOverflow] += d.overflow;
    add[kBlocksMissing] += d.missing;
    add[kBlocksIncomplete] += d.incomplete;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (sanitizer_errors > 0) SanitizerError("sanitizerMemcpyDeviceToHost / stream sync (block buffers)", job.result);
  for (const auto& [name, value] : add) counts_[name] += value;
}

HostBuffer BlockProbe::AcquireHostBuffer(CUcontext ctx, uint64_t bytes) {
  {
    std::lock_guard<std::mutex> jl(jobs_mu_);
    auto best = host_pool_.end();
    for (auto it = host_pool_.begin(); it != host_pool_.end(); ++it)
      if (it->context == ctx && it->capacity >= bytes && (best == host_pool_.end() || it->capacity < best->capacity))
        best = it;
    if (best != host_pool_.end()) {
      HostBuffer b = std::move(*best);
      host_pool_.erase(best);
      return b;
    }
  }
  HostBuffer b;
  b.context = ctx;
  uint64_t capacity = 1ull << 20;  // powers of two from 1 MiB, so buffers are reused
  while (capacity < bytes) capacity <<= 1;
  const uint64_t limit = config_.max_pending_decode_bytes + config_.max_device_bytes;
  bool allowed = false;
  {
    std::lock_guard<std::mutex> jl(jobs_mu_);
    if (pinned_bytes_ + capacity <= limit) {
      pinned_bytes_ += capacity;
      allowed = true;
    }
  }
  void* p = nullptr;
  if (allowed && sanitizerAllocHost(ctx, &p, capacity) == SANITIZER_SUCCESS && p != nullptr) {
    b.pinned = static_cast<unsigned char*>(p);
    b.capacity = capacity;
    return b;
  }
  if (allowed) {
    std::lock_guard<std::mutex> jl(jobs_mu_);
    pinned_bytes_ -= capacity;
  }
  b.pageable.resize(bytes);
  return b;
}

bool BlockProbe::WaitForDecoder(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds timeout) {
  lock.unlock();
  bool done = false;
  {
    std::unique_lock<std::mutex> jl(jobs_mu_);
    done = jobs_cv_.wait_for(jl, timeout, [this] { return jobs_.empty() && !decoder_busy_; });
  }
  lock.lock();
  return done;
}

void BlockProbe::ReleaseContext(std::unique_lock<std::mutex>& lock, CUcontext ctx) {
  Drain(lock, [ctx](const InFlight& f) { return f.context == ctx; });
  // Another thread may still be copying out of this arena: wait a little. And
  // queued runs may sit in this context's pinned memory: write them first.
  transit_cv_.wait_for(lock, std::chrono::seconds(2), [this] { return in_transit_ == 0; });
  WaitForDecoder(lock, std::chrono::seconds(10));
  std::vector<void*> freeing_host;
  {
    std::lock_guard<std::mutex> jl(jobs_mu_);
    for (auto it = host_pool_.begin(); it != host_pool_.end();) {
      if (it->context == ctx) {
        freeing_host.push_back(it->pinned);
        pinned_bytes_ -= it->capacity;
        it = host_pool_.erase(it);
      } else {
        ++it;
      }
    }
  }
  std::vector<void*> freeing;
  if (auto a = arenas_.find(ctx); a != arenas_.end()) {
    if (a->second->device != nullptr) freeing.push_back(a->second->device);
    arenas_.erase(a);
  }
  if (auto off = off_.find(ctx); off != off_.end()) {
    freeing.push_back(off->second.device);
    off_.erase(off);
  }
  lock.unlock();
  {
    OwnCalls own;  // like cuMemFree, sanitizerFree may wait for the device
    for (void* p : freeing) sanitizerFree(ctx, p);
    for (void* p : freeing_host) sanitizerFreeHost(ctx, p);
  }
  lock.lock();
  patch_loaded_.erase(ctx);
  PublishCountersLocked();
}

uint32_t BlockProbe::StreamIdLocked(Sanitizer_StreamHandle h) {
  auto [it, inserted] = stream_ids_.emplace(h, static_cast<uint32_t>(stream_ids_.size() + 1));
  return it->second;
}

void BlockProbe::PublishCountersLocked() {
  if (!writer_) return;
  writer_->SetCounter(counters::kSanitizerCallbacks, callbacks_.load(std::memory_order_relaxed));
  writer_->SetCounter(counters::kLaunchesSeen, launches_seen_.load(std::memory_order_relaxed));
  if (const uint64_t g = graph_node_launches_.load(std::memory_order_relaxed))
    writer_->SetCounter(kGraphKernelNodeLaunches, g);
  writer_->SetCounter(counters::kNvtxUnbalancedPops, NvtxUnbalanced());
  for (const auto& [name, value] : counts_) writer_->SetCounter(name, value);
}

void BlockProbe::OnNvtx(const NvtxEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!writer_ || shut_down_) return;
  writer_->Append(ToNvtxRecord(e, [this](std::string_view s) { return writer_->Intern(s); }));
  ++counts_[counters::kNvtxRecords];
}

void BlockProbe::Shutdown() {
  if (ticker_) ticker_->Stop();  // the SUMMARY takes over
  FlushOpenNvtxRanges();
  std::unique_lock<std::mutex> lock(mu_);
  if (shut_down_ || !writer_) return;
  Drain(lock, [](const InFlight&) { return true; });
  // Drains of other threads still copying: wait for them a little, then count what they hold as lost.
  if (!transit_cv_.wait_for(lock, std::chrono::seconds(2), [this] { return in_transit_ == 0; }))
    counts_[kBlocksLost] += in_transit_blocks_;
  Drain(lock, [](const InFlight&) { return true; });
  // Everything copied is decoded and written before the trace closes.
  if (!WaitForDecoder(lock, std::chrono::seconds(10))) {
    std::lock_guard<std::mutex> jl(jobs_mu_);
    counts_[kBlocksLost] += jobs_blocks_;
    LogError("block probe: the decoder did not finish in 10 s at exit; %llu blocks counted as lost",
             static_cast<unsigned long long>(jobs_blocks_));
  }
  shut_down_ = true;
  PublishCountersLocked();
  const uint64_t callbacks = callbacks_.load();
  std::string state = "ok";
  if (subscribe_failed_) {
    state = "subscribe_failed";
  } else if (disabled_) {
    state = "disabled_internal_error";
  } else if (callbacks == 0) {
    state = "silent";
    std::string msg = SilentProbeMessage(false, "", LikelySeatHolderOfThisProcess());
    LogError("%s", msg.c_str());
    writer_->SetMetadata("tool_message", msg);
  }
  writer_->SetMetadata("tool_state", state);
  // No sanitizerUnsubscribe here: at exit the driver still tears down patched
  // modules and contexts (the H200 crashed at exit with it, see the top), and
  // from now on every callback returns at once on g_shut_down.
  g_shut_down.store(true, std::memory_order_release);
  std::string error;
  if (!writer_->Close(&error)) LogError("block probe: writing %s failed: %s", config_.output.c_str(), error.c_str());
  LogInfo("block probe: %llu launches traced, %llu blocks recorded, %llu overflow; trace %s",
          static_cast<unsigned long long>(counts_[counters::kLaunchesTraced]),
          static_cast<unsigned long long>(counts_[counters::kBlocksRecorded]),
          static_cast<unsigned long long>(counts_[counters::kBlocksOverflow]), config_.output.c_str());
}

}  // namespace
}  // namespace twinscope::blocks

// Called by the CUDA driver when it loads CUDA_INJECTION64_PATH.
extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  int rc = 1;
  twinscope::Firewall("block probe InitializeInjection",
                      [&] { rc = twinscope::blocks::BlockProbe::Get().Initialize(); });
  return rc;
}
