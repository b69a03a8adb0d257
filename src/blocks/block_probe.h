// The block probe's state and its parts (internal to libtwinscope_blocks.so).
//
// libtwinscope_blocks.so is the shadow collector on the Compute Sanitizer API,
// injected with CUDA_INJECTION64_PATH (and NVTX_INJECTION64_PATH for the NVTX
// ranges of the launch key). One BlockProbe object; its member functions live
// in one file per part:
//   block_probe.cpp     entry points: InitializeInjection, the callback
//                       dispatch, the trace's header and counters, exit
//   patch_control.cpp   which modules are patched, when: at load (always
//                       mode) or only around sampled launches (toggle mode)
//   launch_tracing.cpp  LAUNCH_BEGIN/END: selection, sampling, launch keys,
//                       device buffers (arena spans, the "off" buffer)
//   drain.cpp           copying buffers back, the decoder thread, teardown
// docs/block-probe.md describes what it does for a user.
//
// Threads: Sanitizer callbacks arrive on application threads; all state is
// under one mutex (mu_). A callback that arrives while this thread is already
// inside one of ours (the Sanitizer calls we make may launch work or report
// syncs) is ignored. Never holds mu_ across a blocking Sanitizer call (copy,
// stream sync, free): a callback the driver delivers on another thread while
// our call waits would deadlock on mu_. Never blocks in LAUNCH_BEGIN (a
// blocking copy there hung the H200).
// Every entry point is a firewall: on an internal error collection stops and
// the program continues; kernels of patched modules then get the context's
// "off" buffer (or, failing that, null userdata) and their patch returns at once.
#pragma once

#include <sanitizer.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "blocks/blocks_config.h"
#include "blocks/kernel_selector.h"
#include "blocks/sampler.h"
#include "blocks/span_arena.h"
#include "format/status_ticker.h"
#include "format/trace_writer.h"
#include "nvtx/nvtx_capture.h"
#include "twinscope/records.h"

namespace twinscope::blocks {

const char* ResultString(SanitizerResult r);

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
  bool table = false;     // a graph launch's table (patch/block_probe_abi.h): no launch of its own
};

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

// Launches copied out of the arena in one run, for the decoder thread.
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

// A loaded module, as patch control sees it.
struct ModuleState {
  CUcontext context = nullptr;
  bool target = false;   // holds a selected kernel (naive mode: every module): patched at load or toggled
  bool patched = false;  // the patch runs in its kernels now
  bool failed = false;   // patching failed: its launches are not traced (modules_patch_failed)
  bool ever_patched = false;
  bool pinned = false;  // unpatching failed, or a graph exec was made: it keeps its patch state for good
  // Toggle mode: every launch of its kernels bumps `epoch` and adds its stream
  // to `streams` (streams that may still run its kernels); a stream leaves
  // the set when the probe has synchronised it with no launch of the module
  // begun since.
  uint64_t epoch = 0;
  std::unordered_set<Sanitizer_StreamHandle> streams;
};

// What a launch's kernel is to the probe, memoised per thread and CUfunction.
// Entries of a graph launch's table for one function: its kernel nodes in that
// graph at most (a node past them is counted untraced).
inline constexpr uint32_t kGraphTableEntries = 512;

// A kernel node's graph launch: which graph exec, which of its launches.
struct GraphNodeRef {
  CUgraphExec exec = nullptr;
  uint32_t launch_id = 0;
};

// One function's table for one graph launch (patch/block_probe_abi.h): its
// span in the context's arena and the entries handed out so far.
struct GraphTable {
  CUfunction function = nullptr;
  CUcontext context = nullptr;
  void* device = nullptr;
  uint32_t entries = 0;
};

// The tables of the graph launch a thread is in the middle of.
struct GraphLaunchTables {
  GraphNodeRef launch;
  std::vector<GraphTable> tables;
};

struct LaunchClass {
  bool selected = false;  // a pattern selects its kernel
  bool target = false;    // its module is a target (patched, or toggled)
  bool tracked = false;   // toggle mode, and its module is a target: its launches are tracked
};

// Set by Shutdown; read first by every callback. Trivially destructible, so
// valid during all of exit.
extern std::atomic<bool> g_shut_down;
// Bumped when a module unloads: a CUfunction handle may then name another kernel.
extern std::atomic<uint64_t> g_module_generation;

// This thread is inside one of our callbacks (or our own Sanitizer calls).
extern thread_local bool tl_in_callback;
// TWINSCOPE_BLOCKS_GRAPH_DIAG=calls: one stderr line per callback (in and out)
// and per blocking Sanitizer call of a toggle or drain, to find where a run hangs.
// Use TWINSCOPE_CALL_LOG: off, it costs one relaxed load and evaluates no argument.
extern std::atomic<bool> g_call_log;
void CallLog(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
#define TWINSCOPE_CALL_LOG(...)                                                                \
  do {                                                                                         \
    if (::twinscope::blocks::g_call_log.load(std::memory_order_relaxed)) CallLog(__VA_ARGS__); \
  } while (0)
// Toggle mode: this thread is between the BEGIN and END of a launch of a
// target module / inside a graph launch with such nodes (open_target_launches_).
extern thread_local bool tl_target_launch_open;
extern thread_local bool tl_target_graph_open;

// Marks this thread as inside our own Sanitizer calls for a scope, so callbacks
// they trigger on this thread are ignored.
class OwnCalls {
 public:
  OwnCalls() : saved_(tl_in_callback) { tl_in_callback = true; }
  ~OwnCalls() { tl_in_callback = saved_; }

 private:
  bool saved_;
};

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
  using Pick = std::function<bool(const InFlight&)>;

  // ---- patch control (patch_control.cpp) ----
  void OnModuleLoaded(const Sanitizer_ResourceModuleData& m);
  void OnModuleUnloading(std::unique_lock<std::mutex>& lock, CUmodule m);
  // Patches (instructions, then the module) or unpatches `m` now; the caller
  // made sure none of its kernels can be in flight. Under mu_, which
  // serialises every patch call across threads as the Sanitizer requires.
  bool SetPatchedLocked(CUmodule m, ModuleState& s, bool patched);
  // A launch of a target module began (toggle mode): its stream may now run
  // the module's kernels, and it is open until its LAUNCH_END (a graph's
  // nodes: until GRAPHS_LAUNCH_END).
  void NoteTargetLaunchLocked(ModuleState& s, Sanitizer_StreamHandle stream, bool graph_node);
  // Makes sure no kernel of `m` is in flight and no launch of a target module
  // is being submitted: waits a little for open launches, synchronises the
  // streams that may run its kernels (without mu_). False: could not (a
  // launch kept coming), counted in patch_toggles_deferred.
  bool QuiesceLocked(std::unique_lock<std::mutex>& lock, CUmodule m);
  // Toggle mode, at a point where waiting is allowed (LAUNCH_END, graph
  // launch end, the program's syncs): finishes the traced launches in flight
  // (sync, drain, their cost to the sampler) and patches or unpatches the
  // target modules so that they are patched exactly when the sampler wants
  // the next matching launch.
  void SafePointLocked(std::unique_lock<std::mutex>& lock);
  // A graph exec is being instantiated (toggle mode): target modules patched
  // now stay patched for good, since its nodes may hold on to the patched code
  // (an exec instantiated while patched, replayed after an unpatch, is not
  // known to be safe: the toggle workload hung on the H200 where it did that).
  void OnGraphExecCreating();
  // A stream goes away (toggle mode): wait for the target modules' kernels on it.
  void ForgetStream(std::unique_lock<std::mutex>& lock, Sanitizer_StreamHandle h);

  // ---- launch tracing (launch_tracing.cpp) ----
  void OnLaunchBegin(const Sanitizer_LaunchData& d, const GraphNodeRef* graph);
  void OnLaunchEnd(const Sanitizer_LaunchData& d);
  void OnGraphLaunchEnd(CUstream stream);
  // Whether the end of a launch on `stream` is a point to toggle patching at (config_.toggle_at).
  bool ToggleAtEnd(CUstream stream) const;
  // The off buffer for a launch on `stream` of `ctx`, or null (counted).
  void* OffBufferLocked(CUcontext ctx, Sanitizer_StreamHandle stream);
  // Hands an untraced launch of a patched module the off buffer (null if none).
  // The n kernels no pattern selects that were launched most, with their launch counts.
  std::vector<std::pair<std::string, uint64_t>> MostLaunchedLocked(size_t n) const;
  void SetUntracedLocked(const Sanitizer_LaunchData& d, Sanitizer_StreamHandle stream, const GraphNodeRef* graph,
                         bool selected);
  // Hands a launch its buffer: eager launches as launch data; graph kernel
  // nodes of a selected kernel as an entry of their function's table for this
  // graph launch, other nodes of a patched module as the function's data.
  SanitizerResult HandOverLocked(const Sanitizer_LaunchData& d, Sanitizer_StreamHandle stream,
                                 const GraphNodeRef* graph, bool selected, void* buffer, bool off);
  // The function's table in this thread's current graph launch, made on first
  // use; null if the arena has no room. `exists` tells whether it was there before.
  GraphTable* GraphTableLocked(const Sanitizer_LaunchData& d, Sanitizer_StreamHandle stream, const GraphNodeRef& graph,
                               bool* exists);
  // Waits for the header copies of new off buffers (LAUNCH_END only), then marks them ready.
  void MakeOffBuffersReady(std::unique_lock<std::mutex>& lock);
  // After a launch was submitted (LAUNCH_END, graph LAUNCH_END): the drains
  // that LAUNCH_BEGIN may not do (ring full, memory cap, naive mode), and in
  // toggle mode the safe point for patching (unless `safe_point` is false).
  // `closed`: the launch was one of a target module, open since its BEGIN.
  void AfterLaunch(uint64_t traced_seq, uint64_t grid_id, bool closed, bool safe_point = true);
  // The context's arena, allocated on first use; null if that failed.
  ContextArena* ArenaLocked(CUcontext ctx);
  // Does a pattern select this launch's kernel, is its module tracked? Memoised per thread.
  LaunchClass Classify(const Sanitizer_LaunchData& d);
  uint32_t StreamIdLocked(Sanitizer_StreamHandle h);

  // ---- drain (drain.cpp) ----
  // Drains the in-flight launches for which `pick` is true, oldest first.
  // Called with `lock` held; releases it around each copy.
  void Drain(std::unique_lock<std::mutex>& lock, const Pick& pick);
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

  // ---- entry points, trace (block_probe.cpp) ----
  void PublishCountersLocked();
  void SanitizerError(const char* what, SanitizerResult r);

  std::mutex mu_;
  BlocksConfig config_;
  std::unique_ptr<KernelSelector> selector_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<TraceWriter> writer_;
  std::unique_ptr<StatusTicker> ticker_;  // counters into the trace every flush period (crash-true accounting)
  Sanitizer_SubscriberHandle subscriber_ = nullptr;
  bool initialized_ = false;
  bool subscribe_failed_ = false;
  std::string subscribe_error_;
  bool disabled_ = false;
  bool shut_down_ = false;
  // Toggle mode: a graph exec was created, so target modules stay patched for
  // good, also those loaded later (patch_control.cpp, OnGraphExecCreating).
  bool graphs_seen_ = false;

  std::unordered_set<CUcontext> patch_loaded_;  // contexts with our patch image
  std::unordered_map<CUmodule, ModuleState> modules_;
  std::vector<CUmodule> targets_;  // modules_ with `target` (toggle mode walks these)
  // Toggle mode: launches of target modules between BEGIN and END (a graph
  // launch with target nodes: its first such node to GRAPHS_LAUNCH_END), all threads.
  uint64_t open_target_launches_ = 0;
  std::condition_variable open_cv_;  // open_target_launches_ fell
  uint64_t unpaid_toggle_ns_ = 0;    // toggle time not yet charged to a sample (the sampler's budget)
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
  std::unordered_map<CUcontext, OffBuffer> off_;                  // never freed: launches may use it until exit
  std::unordered_map<uint32_t, GraphLaunchTables> graph_tables_;  // by thread id, under mu_
  std::unordered_map<CUfunction, std::string> function_names_;    // unselected kernels seen, under mu_
  std::unordered_map<CUfunction, uint64_t> function_off_;  // functions whose data is the off buffer (module generation)
  std::atomic<bool> off_sync_wanted_{false};
  std::atomic<uint64_t> next_seq_{0};      // process-wide launch ordinal (LaunchRecord.seq)
  std::atomic<bool> drain_wanted_{false};  // ring full or arena 3/4 used: AfterLaunch drains

  std::atomic<uint64_t> callbacks_{0};
  std::atomic<uint64_t> launches_seen_{0};
  std::atomic<uint64_t> graph_node_launches_{0};
  std::map<std::string, uint64_t> counts_;  // under mu_
};

}  // namespace twinscope::blocks
