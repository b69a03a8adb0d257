// Launch tracing: what the block probe does at LAUNCH_BEGIN and LAUNCH_END.
//
// - LAUNCH_BEGIN (and GRAPHS_NODE_LAUNCH_BEGIN for kernel nodes): a launch of
//   a kernel that no pattern selects, outside the target modules, only bumps
//   two atomic counters (its class is memoised per thread and CUfunction, no
//   lock). A selected one gets its launch key (the key's ordinal counts
//   launches of the same kernel name, so skipping other kernels leaves keys
//   equal to the CUPTI collector's); if the sampler takes it and its module is
//   patched, the patch gets a fresh device buffer.
// - Buffers: each context has one device arena (TWINSCOPE_BLOCKS_DEVICE_MB),
//   and a traced launch takes the next span of it (SpanArena). A span that
//   was used before is already zero, so the launch costs no device work of
//   its own: an all-zero buffer means "traced, one slot per block" (see
//   patch/block_probe_abi.h). Only fresh room gets a memset, and only a grid
//   over the slot cap a header copy.
// - Never blocks in LAUNCH_BEGIN: a synchronous copy (or free) there, while the
//   driver is in the middle of submitting a launch, hung the H200 (the 65th
//   traced launch of blocks_bench, the first one to find the ring full). A
//   launch that finds the ring over twice its size (graph nodes, which have no
//   LAUNCH_END) or no buffer within the memory cap is left untraced, counted in
//   launches_untraced_no_buffer and blocks_overflow. Drains and patch toggles
//   wait for LAUNCH_END.
// - A selected launch of a patched module that is not traced is never handed
//   null launch data: it gets the context's "off" buffer (block_probe.cpp, Exit).
#include <algorithm>
#include <optional>

#include "base/log.h"
#include "blocks/block_decode.h"
#include "blocks/block_probe.h"
#include "format/header.h"
#include "launchkey/launch_key.h"
#include "twinscope/counters.h"

namespace twinscope::blocks {

std::atomic<uint64_t> g_module_generation{1};

namespace {

thread_local uint64_t tl_open_launch_seq = UINT64_MAX;  // traced launch between BEGIN and END on this thread
thread_local bool tl_graph_tables_open = false;         // this thread's graph launch has tables (graph_tables_)

// Per-thread memo of what a CUfunction's launches are to the probe. Selection
// depends on the name only, and a CUfunction handle can name another kernel
// only after its module is unloaded, which bumps g_module_generation and so
// invalidates every memo. Trivially destructible: valid during exit.
struct ClassMemo {
  const void* function;
  uint64_t generation;
  bool selected;
  bool target;
  bool tracked;
};
constexpr size_t kMemoSlots = 64;
thread_local ClassMemo tl_memo[kMemoSlots] = {};

// Launches per kernel, for the kernels no pattern selects: so a run whose
// pattern matched nothing can name the kernels it saw (block_probe.cpp, at
// exit). A fixed open-addressed table of atomics: one relaxed increment per
// launch, no lock; a kernel that finds the table full goes uncounted.
struct LaunchCount {
  std::atomic<const void*> function{nullptr};
  std::atomic<uint64_t> launches{0};
};
constexpr size_t kCountSlots = 1024;
LaunchCount g_launch_counts[kCountSlots];

void CountLaunch(const void* function) {
  if (function == nullptr) return;
  size_t i = (reinterpret_cast<uintptr_t>(function) >> 4) % kCountSlots;
  for (size_t probe = 0; probe < 8; ++probe, i = (i + 1) % kCountSlots) {
    const void* seen = g_launch_counts[i].function.load(std::memory_order_relaxed);
    if (seen == nullptr &&
        g_launch_counts[i].function.compare_exchange_strong(seen, function, std::memory_order_relaxed))
      seen = function;
    if (seen == function) {
      g_launch_counts[i].launches.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
}

using counters::kLaunchesNoBuffer;
using counters::kLaunchesSelectedUnpatched;

uint32_t RecordFlags(uint32_t why, bool graph_node, bool toggled) {
  uint32_t f = graph_node ? uint32_t{kFlagGraph} : 0u;
  if (why & kSampleCatchUp) f |= kFlagSampleCatchUp;
  if (why & kSampleRate) f |= kFlagSampleRate;
  if (why & kSampleBudget) f |= kFlagSampleBudget;
  if (toggled) f |= kFlagPatchToggled;
  return f;
}

}  // namespace

LaunchClass BlockProbe::Classify(const Sanitizer_LaunchData& d) {
  const uint64_t gen = g_module_generation.load(std::memory_order_acquire);
  ClassMemo& m = tl_memo[(reinterpret_cast<uintptr_t>(d.function) >> 4) % kMemoSlots];
  if (m.function == d.function && m.generation == gen && d.function != nullptr)
    return {m.selected, m.target, m.tracked};
  LaunchClass c;
  bool known = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    c.selected = selector_->Matches(d.functionName ? d.functionName : "");
    auto it = modules_.find(d.module);
    known = it != modules_.end();
    c.target = known && it->second.target;
    c.tracked = c.target && config_.patch == PatchMode::kToggle;
  }
  // A module not (yet) reported loaded is asked about again next time.
  if (known) m = ClassMemo{d.function, gen, c.selected, c.target, c.tracked};
  if (!c.selected && d.function != nullptr && d.functionName != nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    if (function_names_.size() < kCountSlots) function_names_.emplace(d.function, d.functionName);
  }
  return c;
}

void BlockProbe::OnLaunchBegin(const Sanitizer_LaunchData& d, const GraphNodeRef* graph) {
  const bool graph_node = graph != nullptr;
  tl_open_launch_seq = UINT64_MAX;
  launches_seen_.fetch_add(1, std::memory_order_relaxed);
  if (graph_node) graph_node_launches_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
  const LaunchClass c = Classify(d);
  TWINSCOPE_CALL_LOG("launch %s stream %p%s: selected %d target %d", d.functionName ? d.functionName : "?",
                     static_cast<void*>(graph_node ? d.hApiStream : d.hStream), graph_node ? " (graph node)" : "",
                     c.selected, c.target);
  // The common case: no lock, no key. (Eager launches of another kernel of a
  // patched module run its patch with no launch data, which returns at once.)
  if (!c.selected) CountLaunch(d.function);
  if (!c.selected && !c.tracked && !(c.target && graph_node)) return;
  const Sanitizer_StreamHandle stream = graph_node ? d.hApiStream : d.hStream;
  if (!c.selected) {
    // Another kernel of a target module: in toggle mode it may be in flight
    // when we toggle. And it gets the off buffer where the patch runs: a
    // graph node of a patched module given no launch data crashed on the H200
    // ("misaligned address", bench/RESULTS.md section 10).
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    auto mod = modules_.find(d.module);
    if (mod == modules_.end()) return;
    if (c.tracked) NoteTargetLaunchLocked(mod->second, stream, graph_node);
    if (mod->second.patched) SetUntracedLocked(d, stream, graph, false);
    return;
  }

  const char* name = d.functionName ? d.functionName : "";
  const Dim3 grid{d.gridDim_x, d.gridDim_y, d.gridDim_z};
  const Dim3 block{d.blockDim_x, d.blockDim_y, d.blockDim_z};
  LaunchKeyParts key = ThreadRangeStack().NextLaunch(name, grid, block);
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  auto mod = modules_.find(d.module);
  if (mod == modules_.end() || !mod->second.target || mod->second.failed) {
    // Loaded before we subscribed, or patching failed: say so, once.
    if (++counts_[kLaunchesSelectedUnpatched] == 1)
      LogError(
          "block probe: kernel %s matches but its module is not patched (see modules_patch_failed); its "
          "launches are counted in %s, not traced",
          name, kLaunchesSelectedUnpatched);
    return;
  }
  ModuleState& ms = mod->second;
  if (c.tracked) NoteTargetLaunchLocked(ms, stream, graph_node);
  const uint32_t why = sampler_->OnLaunch(MonotonicNs(), ms.patched);
  if (!(why & kSampleTaken)) {
    ++counts_[counters::kLaunchesSkipped];
    if (ms.patched)
      SetUntracedLocked(d, stream, graph, true);  // an unpatched module runs no patch: nothing to hand over
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
  rec.flags = RecordFlags(why, graph_node, config_.patch == PatchMode::kToggle);
  rec.sample_index = static_cast<uint32_t>(sampler_->matching() - 1);

  if (graph_node && !ring_over) {
    // The table first, so spans and the ring stay in one order (one copy per drain).
    bool exists = false;
    GraphTableLocked(d, stream, *graph, &exists);
  }
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
    SetUntracedLocked(d, stream, graph, true);
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
  if (r == SANITIZER_SUCCESS) r = HandOverLocked(d, stream, graph, true, buffer, false);
  if (r != SANITIZER_SUCCESS) {
    SanitizerError("preparing a traced launch (memset, header copy, sanitizerSetLaunchCallbackData)", r);
    ++counts_[kLaunchesNoBuffer];
    counts_[counters::kBlocksOverflow] += blocks;
    SetUntracedLocked(d, stream, graph, true);
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
  const bool closed = tl_target_launch_open;
  tl_target_launch_open = false;
  AfterLaunch(seq, d.gridId, closed, ToggleAtEnd(d.stream));
}

bool BlockProbe::ToggleAtEnd(CUstream stream) const {
  switch (config_.toggle_at) {
    case ToggleAt::kEnd:
      return true;
    case ToggleAt::kDefaultStreamEnd:
      return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
    case ToggleAt::kSync:
      return false;
  }
  return false;
}

void BlockProbe::OnGraphLaunchEnd(CUstream stream) {
  const bool closed = tl_target_graph_open;
  tl_target_graph_open = false;
  if (tl_graph_tables_open) {
    tl_graph_tables_open = false;
    std::lock_guard<std::mutex> lock(mu_);
    graph_tables_.erase(CurrentThreadId());  // this thread's graph launch is submitted: its tables are done
  }
  AfterLaunch(UINT64_MAX, 0, closed, ToggleAtEnd(stream));
}

void BlockProbe::AfterLaunch(uint64_t traced_seq, uint64_t grid_id, bool closed, bool safe_point) {
  const bool naive = config_.naive && traced_seq != UINT64_MAX;
  if (traced_seq == UINT64_MAX && !closed && !drain_wanted_.load(std::memory_order_relaxed) &&
      !off_sync_wanted_.load(std::memory_order_relaxed))
    return;  // the common case
  std::unique_lock<std::mutex> lock(mu_);
  if (closed && open_target_launches_ > 0) {
    --open_target_launches_;
    open_cv_.notify_all();
  }
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
  if (drain_wanted_.exchange(false, std::memory_order_relaxed) && !ring_.empty()) {
    // Ring full or arena filling: drain everything in flight. A copy waits for
    // all work queued on its stream anyway, so draining less would not wait less.
    ++counts_[counters::kBlocksForcedDrains];
    Drain(lock, [](const InFlight&) { return true; });
  }
  if (closed && safe_point) SafePointLocked(lock);
}

SanitizerResult BlockProbe::HandOverLocked(const Sanitizer_LaunchData& d, Sanitizer_StreamHandle stream,
                                           const GraphNodeRef* graph, bool selected, void* buffer, bool off) {
  if (graph == nullptr) return sanitizerSetLaunchCallbackData(d.hLaunch, d.function, d.hStream, buffer);
  if (buffer == nullptr) return SANITIZER_ERROR_INVALID_PARAMETER;  // never an entry or data without a buffer
  if (!selected) {
    // Another kernel of a patched module: its function's data is the off
    // buffer, for every node of it in every graph (set once per module generation).
    const uint64_t gen = g_module_generation.load(std::memory_order_acquire);
    auto it = function_off_.find(d.function);
    if (it != function_off_.end() && it->second == gen) return SANITIZER_SUCCESS;
    SanitizerResult r = sanitizerSetCallbackData(d.function, buffer);
    if (r == SANITIZER_SUCCESS) function_off_[d.function] = gen;
    return r;
  }
  function_off_.erase(d.function);
  bool exists = false;
  GraphTable* t = GraphTableLocked(d, stream, *graph, &exists);
  if (t == nullptr || t->entries >= kGraphTableEntries) {
    // No table (arena full) or a full one: this node cannot be traced. With
    // no table yet, the function's data is the off buffer; a full table's
    // patch finds no entry for it and writes nothing.
    if (t == nullptr && !exists) {
      void* off_buffer = off ? buffer : OffBufferLocked(d.context, stream);
      if (off_buffer != nullptr) sanitizerSetCallbackData(d.function, off_buffer);
    }
    return off ? SANITIZER_SUCCESS : SANITIZER_ERROR_OUT_OF_MEMORY;
  }
  // The node's entry, in node order. The table's header went out with its
  // first entry; entries past the last one written are zero and end the
  // patch's search (block_probe_abi.h).
  struct {
    BlockProbeHeader h;
    BlockProbeTableEntry e;
  } first{};
  first.h.table = kGraphTableEntries;
  first.e.buffer = reinterpret_cast<uint64_t>(buffer);
  first.e.blocks = static_cast<uint32_t>(BlockCount(Dim3{d.gridDim_x, d.gridDim_y, d.gridDim_z}));
  first.e.threads = d.blockDim_x * d.blockDim_y * d.blockDim_z;
  static_assert(sizeof first == sizeof(BlockProbeHeader) + sizeof(BlockProbeTableEntry));
  auto* base = static_cast<unsigned char*>(t->device);
  SanitizerResult r = t->entries == 0 ? sanitizerMemcpyHostToDeviceAsync(base, &first, sizeof first, stream)
                                      : sanitizerMemcpyHostToDeviceAsync(base + BlockProbeTableBytes(t->entries),
                                                                         &first.e, sizeof first.e, stream);
  const bool first_entry = t->entries == 0;
  if (r == SANITIZER_SUCCESS) ++t->entries;
  if (r == SANITIZER_SUCCESS && first_entry) r = sanitizerSetCallbackData(d.function, t->device);
  if (config_.graph_log)
    LogInfo("graph diag: %s entry %u of table %p -> buffer %p (%s): %d", d.functionName ? d.functionName : "?",
            t->entries, t->device, buffer, off ? "off" : "traced", static_cast<int>(r));
  return r;
}

GraphTable* BlockProbe::GraphTableLocked(const Sanitizer_LaunchData& d, Sanitizer_StreamHandle stream,
                                         const GraphNodeRef& graph, bool* exists) {
  GraphLaunchTables& mine = graph_tables_[CurrentThreadId()];
  if (mine.launch.exec != graph.exec || mine.launch.launch_id != graph.launch_id) {
    mine.launch = graph;  // a new graph launch on this thread: its tables start afresh
    mine.tables.clear();
  }
  for (GraphTable& t : mine.tables)
    if (t.function == d.function) {
      *exists = true;
      return &t;
    }
  *exists = false;
  // A function has one callback data for the whole process: another thread's
  // graph launch with a table of this kernel, not yet submitted, may see ours
  // instead (its nodes would claim our entries of their shape). Counted.
  for (const auto& [tid, other] : graph_tables_) {
    if (&other == &mine) continue;
    for (const GraphTable& t : other.tables)
      if (t.function == d.function && ++counts_[counters::kGraphLaunchesOverlapping] == 1)
        LogError(
            "block probe: two threads launch CUDA graphs holding %s at the same time; their nodes share the "
            "kernel's callback data, so blocks of one may be recorded for a node of the same shape in the other "
            "(counted in %s)",
            d.functionName ? d.functionName : "a traced kernel", counters::kGraphLaunchesOverlapping);
  }
  tl_graph_tables_open = true;
  ContextArena* arena = ArenaLocked(d.context);
  if (arena == nullptr) return nullptr;
  const uint64_t bytes = BlockProbeTableBytes(kGraphTableEntries);
  std::optional<SpanArena::Span> span = arena->spans.Take(bytes);
  if (!span) {
    drain_wanted_.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  void* device = static_cast<unsigned char*>(arena->device) + span->offset;
  if (!span->known_zero && sanitizerMemset(device, 0, bytes, stream) != SANITIZER_SUCCESS) {
    arena->spans.Release(span->offset, false);
    return nullptr;
  }
  // The span goes back (zeroed) with the next drain; it holds no blocks.
  InFlight f;
  f.record.seq = UINT64_MAX - 1;  // never a launch's
  f.record.grid = Dim3{0, 0, 0};  // holds no blocks
  f.context = d.context;
  f.module = d.module;
  f.stream = stream;
  f.offset = span->offset;
  f.bytes = bytes;
  f.recorded = true;
  f.table = true;
  ring_.push_back(std::move(f));
  ++counts_[counters::kGraphTables];
  mine.tables.push_back(GraphTable{d.function, d.context, device, 0});
  return &mine.tables.back();
}

void BlockProbe::SetUntracedLocked(const Sanitizer_LaunchData& d, Sanitizer_StreamHandle stream,
                                   const GraphNodeRef* graph, bool selected) {
  void* off = OffBufferLocked(d.context, stream);
  SanitizerResult r = HandOverLocked(d, stream, graph, selected, off, true);
  if (r != SANITIZER_SUCCESS) SanitizerError("handing the off buffer to an untraced launch", r);
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

std::vector<std::pair<std::string, uint64_t>> BlockProbe::MostLaunchedLocked(size_t n) const {
  std::map<std::string, uint64_t> by_name;  // a name can have several CUfunctions (contexts, modules)
  for (const LaunchCount& c : g_launch_counts) {
    const void* f = c.function.load(std::memory_order_relaxed);
    if (f == nullptr) continue;
    auto it = function_names_.find(static_cast<CUfunction>(const_cast<void*>(f)));
    by_name[it != function_names_.end() ? Demangle(it->second) : "(unnamed)"] +=
        c.launches.load(std::memory_order_relaxed);
  }
  std::vector<std::pair<std::string, uint64_t>> v(by_name.begin(), by_name.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second > b.second || (a.second == b.second && a.first < b.first);
  });
  if (v.size() > n) v.resize(n);
  return v;
}

void BlockProbe::OnLaunchAfterShutdown(const Sanitizer_LaunchData& d, bool graph_node) {
  // No tables after exit: graph nodes get the off buffer as their function's data.
  std::lock_guard<std::mutex> lock(mu_);
  auto mod = modules_.find(d.module);
  if (mod == modules_.end() || !mod->second.patched) return;
  auto off = off_.find(d.context);
  if (off == off_.end() || !off->second.ready) return;  // no stream-ordered zeroing at exit: leave the default
  if (graph_node) {
    sanitizerSetCallbackData(d.function, off->second.device);
  } else {
    sanitizerSetLaunchCallbackData(d.hLaunch, d.function, d.hStream, off->second.device);
  }
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

uint32_t BlockProbe::StreamIdLocked(Sanitizer_StreamHandle h) {
  auto [it, inserted] = stream_ids_.emplace(h, static_cast<uint32_t>(stream_ids_.size() + 1));
  return it->second;
}

}  // namespace twinscope::blocks
