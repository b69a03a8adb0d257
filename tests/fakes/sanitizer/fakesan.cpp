// The fake Compute Sanitizer: the Sanitizer API functions the block probe
// calls, over host memory, plus the control interface of fakesan.h. See
// fakesan.h for the model (deferred, stream-ordered launches; exact emulation
// of the block probe patch; event log).
#include "fakesan.h"

#include <dlfcn.h>
#include <sanitizer.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "blocks/patch/block_probe_abi.h"

namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50u;

struct Module {
  uintptr_t id = 0;
  std::vector<char> cubin;
  std::set<std::string> patched_instructions;  // "enter:<name>", "exit:<name>"; an unpatch drops them
  bool patched = false;
  bool in_patched_exec = false;  // a graph exec was instantiated while it was patched
};

struct Op {
  enum Kind { kLaunch, kMemset, kH2D } kind = kLaunch;
  // launch
  Module* module = nullptr;
  std::string name;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  void* userdata = nullptr;
  bool graph_node = false;
  CUfunction function = nullptr;
  uint64_t grid_key = 0;  // the launch's %gridid + 1, as the patch reads it
  FakesanPlan plan{};
  bool decided_patched = false;  // the module's patch state when the BEGIN callback returned
  bool run_patched = false;      // ... at submission: what the launch runs (patch and instructions in place)
  uintptr_t exec = 0;            // graph node: its exec (0: none instantiated)
  bool faulted = false;          // graph node whose exec was made with another patch state: runs nothing
  // memset / h2d
  void* dst = nullptr;
  int value = 0;
  std::vector<unsigned char> bytes;
  size_t count = 0;
};

// A launch recorded by a stream capture: a kernel node of the captured graph.
struct CapturedNode {
  uintptr_t module = 0;
  std::string name;
  uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  FakesanPlan plan{};
};

struct Stream {
  uintptr_t id = 0;
  std::deque<Op> pending;
  bool capturing = false;              // between fakesan_stream_begin_capture and _end_capture
  std::vector<CapturedNode> captured;  // the launches made on it since the capture began
};

// An instantiated graph exec: each module's patch state (HasPatches) when it was made.
struct GraphExec {
  std::map<uintptr_t, bool> patched;
};

struct State {
  // One lock over everything, never held while a callback runs (the probe
  // calls back into the fake from its callbacks, on any thread).
  std::mutex mu;
  int mode = FAKESAN_NORMAL;
  Sanitizer_CallbackFunc callback = nullptr;
  void* callback_userdata = nullptr;
  bool subscribed = false;
  std::set<std::pair<int, uint32_t>> enabled;
  std::set<int> enabled_domains;
  CUcontext context = reinterpret_cast<CUcontext>(uintptr_t{0xC0DE0001});
  bool context_alive = false;
  std::vector<std::vector<char>> patch_images;  // for the context
  std::map<uintptr_t, std::unique_ptr<Module>> modules;
  uintptr_t next_module = 1;
  std::map<uintptr_t, std::unique_ptr<Stream>> streams;
  uintptr_t next_stream = 1;
  std::map<uintptr_t, size_t> allocations;       // base -> size
  std::map<uintptr_t, size_t> host_allocations;  // pinned host memory: base -> size
  uint64_t next_grid_id = 1;
  std::map<CUfunction, void*> function_data;  // sanitizerSetCallbackData
  uint32_t graph_launch_id = 0;               // current graph launch (fakesan_graph_begin), 0 outside one
  uint32_t next_graph_launch_id = 1;
  std::map<uintptr_t, GraphExec> execs;  // fakesan_graph_exec_instantiate
  uintptr_t next_exec = 1, last_exec = 0;
  uintptr_t graph_exec = 0;  // the exec of the current graph launch, 0 outside one (or none instantiated)
  std::map<uintptr_t, std::vector<CapturedNode>> captured_graphs;  // fakesan_stream_end_capture's graphs
  uintptr_t next_captured_graph = 1;
  std::map<uintptr_t, std::vector<CapturedNode>> exec_nodes;  // execs instantiated from a captured graph
  FakesanStats stats{};
  FILE* log = nullptr;
  // The last launch, for FAKESAN_EXIT_TEARDOWN's launch at exit.
  bool has_last_launch = false;
  uintptr_t last_module = 0, last_stream = 0;
  std::string last_name;
  uint32_t last_grid[3] = {1, 1, 1}, last_block[3] = {1, 1, 1};
};

void ExitTeardown();

thread_local Op* tl_open_launch = nullptr;  // this thread's launch inside its LAUNCH_BEGIN callback
// This thread is inside the LAUNCH_END callback of a launch on a stream other than the NULL stream.
thread_local bool tl_in_nondefault_launch_end = false;
std::atomic<int> g_in_patch_call{0};  // patch calls running now, on any thread

State& S() {
  static State* s = [] {
    auto* st = new State();
    st->streams[0] = std::make_unique<Stream>();
    if (const char* path = std::getenv("FAKESAN_LOG"); path && *path) st->log = std::fopen(path, "w");
    return st;
  }();
  return *s;
}

// A logged "error ..." line is a misuse that fails or hangs a real GPU: unless the test says it expects
// errors (FAKESAN_EXPECT_ERRORS=1), the program stops there, so that no run over the fake passes with one.
bool ErrorsExpected() {
  static const bool expected = [] {
    const char* v = std::getenv("FAKESAN_EXPECT_ERRORS");
    return v && std::strcmp(v, "1") == 0;
  }();
  return expected;
}

void Log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void Log(const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (FILE* f = S().log) {
    std::fputs(line, f);
    std::fputc('\n', f);
    std::fflush(f);
  }
  if (std::strncmp(line, "error", 5) == 0 && !ErrorsExpected()) {
    std::fprintf(stderr,
                 "fakesan: %s: the program misused the Sanitizer API in a way that fails or hangs a real GPU "
                 "(tests/fakes/sanitizer/fakesan.h); stopping. A test that expects this sets "
                 "FAKESAN_EXPECT_ERRORS=1\n",
                 line);
    std::abort();
  }
}

// The tool's own work on a stream the program is capturing: on a GPU a copy or memset there would be
// captured into the program's graph, and a synchronize is illegal and invalidates the capture.
void CheckNotCapturing(const Stream* s, const char* what) {
  if (s->capturing)
    Log("error %s_on_capturing_stream %llu (a GPU would capture it or invalidate the capture)", what,
        static_cast<unsigned long long>(s->id));
}

Sanitizer_StreamHandle Handle(Stream* s) { return reinterpret_cast<Sanitizer_StreamHandle>(s); }
CUgraphExec ExecHandle(uintptr_t exec) { return reinterpret_cast<CUgraphExec>(uintptr_t{0x6E0} + 0x10 * exec); }
CUstream CuStream(Stream* s) { return reinterpret_cast<CUstream>(s->id == 0 ? 0 : 0x5000 + s->id); }

Stream* StreamOf(Sanitizer_StreamHandle h) {
  if (h == nullptr) return S().streams[0].get();
  for (auto& [id, s] : S().streams)
    if (Handle(s.get()) == h) return s.get();
  return nullptr;
}

Stream* StreamById(uintptr_t id) {
  auto it = S().streams.find(id);
  return it == S().streams.end() ? nullptr : it->second.get();
}

bool Enabled(int domain, uint32_t cbid) {
  const State& s = S();
  return s.enabled_domains.count(domain) || s.enabled.count({domain, cbid});
}

// Called without S().mu held: the callback may call any fake function.
void Fire(Sanitizer_CallbackDomain domain, uint32_t cbid, const void* data) {
  State& s = S();
  Sanitizer_CallbackFunc cb = nullptr;
  void* ud = nullptr;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.mode == FAKESAN_SILENT || !Enabled(domain, cbid)) return;
    if (!s.subscribed || !s.callback) {
      ++s.stats.callbacks_after_unsubscribe;
      return;
    }
    ++s.stats.callbacks_fired;
    cb = s.callback;
    ud = s.callback_userdata;
  }
  cb(ud, domain, cbid, data);
}

using Lock = std::unique_lock<std::mutex>;

uint64_t EnvU64(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : 0;
}

// A patch call (add patches, patch instructions, patch / unpatch a module):
// the Sanitizer asks its callers to serialise them, so two at once are an
// error. FAKESAN_PATCH_US makes each take that long (a real re-patch takes
// ~35-55 us, an unpatch ~25 us on the H200), which widens the window and
// gives toggling a cost for the budget tests.
class PatchCall {
 public:
  explicit PatchCall(const char* what) {
    if (g_in_patch_call.fetch_add(1) != 0) {
      Lock lk(S().mu);
      ++S().stats.concurrent_patch_calls;
      Log("error concurrent_patch_calls %s", what);
    }
    if (const uint64_t us = EnvU64("FAKESAN_PATCH_US")) std::this_thread::sleep_for(std::chrono::microseconds(us));
  }
  ~PatchCall() { g_in_patch_call.fetch_sub(1); }
};

// The allocation holding [p, p + n), or false.
bool InAllocation(const void* p, size_t n) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = S().allocations.upper_bound(a);
  if (it == S().allocations.begin()) return false;
  --it;
  return a >= it->first && n <= it->second && a - it->first <= it->second - n;
}

bool PatchImageHas(const std::string& name) {
  for (const auto& img : S().patch_images) {
    auto it = std::search(img.begin(), img.end(), name.begin(), name.end());
    if (it != img.end()) return true;
  }
  return false;
}

bool CubinHas(const Module& m, const std::string& name) {
  std::string needle = name;
  needle.push_back('\0');
  return std::search(m.cubin.begin(), m.cubin.end(), needle.begin(), needle.end()) != m.cubin.end();
}

thread_local bool tl_fake_helper = false;  // this thread is the fake's own callback thread

// A blocking call (copy to host, stream sync, free) made while a launch is
// being prepared (inside its LAUNCH_BEGIN / graph NODE_LAUNCH_BEGIN callback).
// The real driver may never return from it: the copy is ordered after a launch
// that is only submitted once the callback returns. Always logged as an error;
// with FAKESAN_STRICT_LAUNCH=hang the fake hangs as such a driver would.
void CheckNotInsideLaunchBegin(const char* what) {
  if (!tl_open_launch) return;
  Log("error blocking_call_in_launch_begin %s", what);
  const char* strict = std::getenv("FAKESAN_STRICT_LAUNCH");
  if (strict && std::strcmp(strict, "hang") == 0) {
    std::fprintf(stderr, "fakesan: %s inside LAUNCH_BEGIN: hanging like a deadlocked driver\n", what);
    for (;;) pause();
  }
}

// FAKESAN_SYNC_CALLBACK_IN_COPY=same|thread: a blocking call also reports the
// stream as synchronised (SYNCHRONIZE_STREAM_SYNCHRONIZED), as a driver may,
// on the calling thread ("same") or on another thread that the call waits for
// ("thread"). Not nested: the callback's own blocking calls report nothing.
void ReportSyncFromBlockingCall(Stream* st);

// Emulates patch/block_probe.cu for every block of one launch.
// The patch's table lookup (graph nodes: one table per function and graph
// launch): the entry this grid claimed, or the first unclaimed one of its shape.
BlockProbeHeader* ResolveTable(BlockProbeHeader* h, const Op& op) {
  auto* e = reinterpret_cast<BlockProbeTableEntry*>(h + 1);
  if (!InAllocation(e, sizeof *e * h->table)) {
    Log("error table_out_of_bounds %s", op.name.c_str());
    return nullptr;
  }
  const uint32_t blocks = op.grid[0] * op.grid[1] * op.grid[2];
  const uint32_t threads = op.block[0] * op.block[1] * op.block[2];
  for (uint32_t i = 0; i < h->table && e[i].blocks != 0; ++i) {
    if (e[i].grid_key == op.grid_key) return reinterpret_cast<BlockProbeHeader*>(e[i].buffer);
    if (e[i].grid_key == 0 && e[i].blocks == blocks && e[i].threads == threads) {
      e[i].grid_key = op.grid_key;
      return reinterpret_cast<BlockProbeHeader*>(e[i].buffer);
    }
  }
  h->overflow += 1;
  ++S().stats.graph_nodes_without_table_entry;
  Log("table_no_entry %s", op.name.c_str());
  return nullptr;
}

void RunPatchedBlocks(const Op& op) {
  auto* h = static_cast<BlockProbeHeader*>(op.userdata);
  if (!InAllocation(h, sizeof *h)) {
    Log("error userdata_not_device_memory %s", op.name.c_str());
    return;
  }
  if (h->off == 0 && h->table != 0) {
    h = ResolveTable(h, op);
    if (h == nullptr) return;
    if (!InAllocation(h, sizeof *h)) {
      Log("error table_entry_not_device_memory %s", op.name.c_str());
      return;
    }
  }
  if (h->off != 0) {  // the patch returns at once on an "off" header
    ++S().stats.launches_executed_off;
    return;
  }
  ++S().stats.launches_executed_patched;
  // FAKESAN_PATCHED_RUN_US: what the patch costs a launch (it runs that much longer).
  if (const uint64_t us = EnvU64("FAKESAN_PATCHED_RUN_US")) std::this_thread::sleep_for(std::chrono::microseconds(us));
  const FakesanPlan& p = op.plan;
  const uint32_t sms = p.num_sms ? p.num_sms : 132;
  const uint64_t start = p.start_ns ? p.start_ns : 1000000;
  const uint64_t spacing = p.spacing_ns ? p.spacing_ns : 10;
  const uint64_t duration = p.duration_ns ? p.duration_ns : 100;
  const uint64_t gx = op.grid[0], gy = op.grid[1], gz = op.grid[2];
  const uint64_t total = gx * gy * gz;
  const uint64_t capacity = h->capacity != 0 ? h->capacity : total;  // 0: one slot per block
  const uint32_t tpb = op.block[0] * op.block[1] * op.block[2];
  const uint32_t warps = (tpb + 31) / 32;
  std::vector<uint64_t> run(total);
  std::iota(run.begin(), run.end(), 0);
  if (p.shuffle_seed) std::shuffle(run.begin(), run.end(), std::mt19937_64(p.shuffle_seed));
  auto* slots = reinterpret_cast<BlockProbeSlot*>(h + 1);
  for (uint64_t pos = 0; pos < total; ++pos) {
    const uint64_t linear = run[pos];
    const uint64_t enter = start + pos * spacing;
    if (linear >= capacity) {
      h->overflow += 1;  // thread (0,0,0)
      continue;
    }
    BlockProbeSlot* s = slots + linear;
    if (!InAllocation(s, sizeof *s)) {
      Log("error slot_out_of_bounds %s %llu", op.name.c_str(), static_cast<unsigned long long>(linear));
      continue;
    }
    // Thread (0,0,0) at its BLOCK_ENTER.
    s->enter_ns = enter;
    s->sm = static_cast<uint32_t>(pos % sms);
    s->order = h->next_order++;
    s->entered = 1;
    const bool drop = p.drop_exit_every && pos % p.drop_exit_every == p.drop_exit_every - 1;
    const uint32_t early = p.split_exit_warps ? warps / 2 : 0;
    for (uint32_t w = 0; w < warps; ++w) {
      if (drop && w == warps - 1) break;
      const uint32_t n = std::min<uint32_t>(32, tpb - 32 * w);
      const uint64_t t = w < early ? enter + duration / 2 : enter + duration;
      const uint32_t old = s->exited_threads;
      s->exited_threads += n;
      if (old + n == tpb) s->exit_ns = t;
    }
  }
}

void Execute(Op& op) {
  switch (op.kind) {
    case Op::kMemset:
      std::memset(op.dst, op.value, op.count);
      return;
    case Op::kH2D:
      std::memcpy(op.dst, op.bytes.data(), op.bytes.size());
      return;
    case Op::kLaunch: {
      if (op.faulted) {
        Log("exec %s faulted", op.name.c_str());
        return;
      }
      // It runs the code it was submitted with: patched (patch and instructions in place) or not.
      Log("exec %s patched=%d userdata=%d", op.name.c_str(), op.run_patched ? 1 : 0, op.userdata ? 1 : 0);
      if (!op.run_patched) ++S().stats.launches_executed_unpatched;
      if (op.run_patched && op.userdata) RunPatchedBlocks(op);
      return;
    }
  }
}

void Flush(Stream* s) {
  while (!s->pending.empty()) {
    Op op = std::move(s->pending.front());
    s->pending.pop_front();
    Execute(op);
  }
}

void FlushAll() {
  for (auto& [id, s] : S().streams) Flush(s.get());
}

bool HasPatches(const Module& m) {
  return m.patched && m.patched_instructions.count("enter:" TWINSCOPE_BLOCK_ENTER_PATCH) &&
         m.patched_instructions.count("exit:" TWINSCOPE_BLOCK_EXIT_PATCH);
}

// Patching or unpatching a module while one of its launches is queued (not
// yet run) is an error: what such a launch runs is undefined on a GPU.
void CheckNoneInFlight(const Module& m, const char* what) {
  for (const auto& [id, st] : S().streams)
    for (const Op& op : st->pending)
      if (op.kind == Op::kLaunch && op.module == &m) {
        ++S().stats.toggles_with_module_in_flight;
        Log("error %s_with_module_in_flight %s", what, op.name.c_str());
        return;
      }
}

// A graph node runs the code its exec was instantiated with: a patch state
// that changed since is an error, and the node writes nothing (on the H200 an
// exec made unpatched, launched after a re-patch: "illegal instruction").
void CheckExecPatchState(Op& op) {
  if (op.exec == 0) return;  // no exec instantiated: the module's state at submission
  auto e = S().execs.find(op.exec);
  if (e == S().execs.end()) return;
  auto p = e->second.patched.find(op.module->id);
  if (p == e->second.patched.end()) {
    op.faulted = true;
    Log("error graph_node_of_module_not_in_exec %s exec=%llu", op.name.c_str(),
        static_cast<unsigned long long>(op.exec));
    return;
  }
  if (p->second == op.run_patched) return;
  op.faulted = true;
  ++S().stats.graph_exec_patch_state_changed;
  Log("error graph_exec_patch_state_changed %s exec=%llu instantiated_patched=%d now_patched=%d "
      "(illegal instruction on the H200)",
      op.name.c_str(), static_cast<unsigned long long>(op.exec), p->second ? 1 : 0, op.run_patched ? 1 : 0);
}

// A patch or unpatch inside the LAUNCH_END callback of a launch on a stream
// other than the NULL stream: on the H200 sanitizerUnpatchModule never
// returned there (it did at the END of NULL-stream launches and at syncs).
// Logged and counted; the call then goes ahead, so the run goes on.
void CheckNotInNondefaultLaunchEnd(const Module& m, const char* what) {
  if (!tl_in_nondefault_launch_end) return;
  ++S().stats.toggles_in_launch_end_nondefault;
  Log("error toggle_in_launch_end_nondefault %s %llu (would hang on the H200)", what,
      static_cast<unsigned long long>(m.id));
}

// The launch's BEGIN callback returned: from here to its submission the
// module's patch state must not change (the launch was prepared for it).
// FAKESAN_SUBMIT_US stretches that window, as a busy driver may.
void Submit(Stream* s, Module* m, Op op) {
  if (const uint64_t us = EnvU64("FAKESAN_SUBMIT_US")) std::this_thread::sleep_for(std::chrono::microseconds(us));
  Lock lk(S().mu);
  op.run_patched = HasPatches(*m);
  if (op.graph_node) {
    // As measured on the H200: a kernel node runs with its function's
    // callback data (sanitizerSetCallbackData); launch data set for a node
    // reached no node once the graph held more than one patched node.
    if (op.userdata != nullptr) Log("error graph_node_launch_data_ignored %s", op.name.c_str());
    auto fd = S().function_data.find(op.function);
    op.userdata = fd != S().function_data.end() ? fd->second : nullptr;
    if (op.run_patched && op.userdata == nullptr) Log("error graph_node_patched_without_data %s", op.name.c_str());
    CheckExecPatchState(op);
  } else if (op.userdata == nullptr) {
    auto fd = S().function_data.find(op.function);  // no launch data: the function's, if any
    if (fd != S().function_data.end()) op.userdata = fd->second;
  }
  if (op.run_patched != op.decided_patched) {
    ++S().stats.patch_changed_during_launch;
    Log("error patch_changed_during_launch %s", op.name.c_str());
  }
  s->pending.push_back(std::move(op));
}

int Launch(bool graph, uintptr_t module, const char* name, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx,
           uint32_t by, uint32_t bz, uintptr_t stream, const FakesanPlan* plan) {
  State& st = S();
  Lock lk(st.mu);
  auto mit = st.modules.find(module);
  Stream* s = StreamById(stream);
  if (mit == st.modules.end() || !s || !name || !CubinHas(*mit->second, name)) {
    Log("error bad_launch %s", name ? name : "(null)");
    return -1;
  }
  Module* m = mit->second.get();
  if (s->capturing && !graph) {
    // As the driver does: a launch on a capturing stream is not executed but recorded into the graph, and
    // the Sanitizer sees no launch (no LAUNCH callback, docs/block-probe.md); the graph's launches will.
    CapturedNode n;
    n.module = module, n.name = name;
    for (int i = 0; i < 3; ++i) n.grid[i] = i == 0 ? gx : i == 1 ? gy : gz, n.block[i] = i == 0 ? bx : i == 1 ? by : bz;
    if (plan) n.plan = *plan;
    s->captured.push_back(std::move(n));
    Log("captured %s grid=%u,%u,%u stream=%llu", name, gx, gy, gz, static_cast<unsigned long long>(stream));
    return 0;
  }
  ++st.stats.launches;
  st.has_last_launch = true;
  st.last_module = module, st.last_stream = stream, st.last_name = name;
  st.last_grid[0] = gx, st.last_grid[1] = gy, st.last_grid[2] = gz;
  st.last_block[0] = bx, st.last_block[1] = by, st.last_block[2] = bz;
  Op op;
  op.kind = Op::kLaunch;
  op.module = m;
  op.name = name;
  op.grid[0] = gx, op.grid[1] = gy, op.grid[2] = gz;
  op.block[0] = bx, op.block[1] = by, op.block[2] = bz;
  if (plan) op.plan = *plan;
  Log("launch %s grid=%u,%u,%u block=%u,%u,%u stream=%llu graph=%d", name, gx, gy, gz, bx, by, bz,
      static_cast<unsigned long long>(stream), graph ? 1 : 0);

  Sanitizer_LaunchData d{};
  d.context = st.context;
  d.module = reinterpret_cast<CUmodule>(m);
  d.function = reinterpret_cast<CUfunction>(std::hash<std::string>{}(op.name) | 1);
  const std::string kernel_name = op.name;  // op moves into the queue before the END callback
  d.functionName = kernel_name.c_str();
  d.gridDim_x = gx, d.gridDim_y = gy, d.gridDim_z = gz;
  d.blockDim_x = bx, d.blockDim_y = by, d.blockDim_z = bz;
  d.clusterDim_x = 1, d.clusterDim_y = 1, d.clusterDim_z = 1;
  d.gridId = st.next_grid_id++;
  op.grid_key = d.gridId + 1;
  op.function = d.function;
  op.graph_node = graph;
  if (graph) op.exec = st.graph_exec;
  d.hLaunch = reinterpret_cast<Sanitizer_LaunchHandle>(&op);
  d.device = 0;
  tl_open_launch = &op;
  lk.unlock();
  auto after_begin = [&] {
    Lock l2(st.mu);
    tl_open_launch = nullptr;
    op.decided_patched = HasPatches(*m);
  };
  if (graph) {
    d.apiContext = st.context;
    d.apiStream = CuStream(s);
    d.hApiStream = Handle(s);
    Sanitizer_GraphNodeLaunchData g{};
    g.graphExec = ExecHandle(op.exec);
    g.launchId = st.graph_launch_id != 0 ? st.graph_launch_id : 0x10000u + static_cast<uint32_t>(d.gridId);
    g.node = reinterpret_cast<CUgraphNode>(uintptr_t{0x70DE});
    g.nodeType = CU_GRAPH_NODE_TYPE_KERNEL;
    g.launchData = d;
    g.isGraphUpload = 0;
    Fire(SANITIZER_CB_DOMAIN_GRAPHS, SANITIZER_CBID_GRAPHS_NODE_LAUNCH_BEGIN, &g);
    after_begin();
    Submit(s, m, std::move(op));  // submitted before the END callback (as measured in FACTS.md)
    Fire(SANITIZER_CB_DOMAIN_GRAPHS, SANITIZER_CBID_GRAPHS_NODE_LAUNCH_END, &g);
  } else {
    d.stream = CuStream(s);
    d.hStream = Handle(s);
    Fire(SANITIZER_CB_DOMAIN_LAUNCH, SANITIZER_CBID_LAUNCH_BEGIN, &d);
    after_begin();
    Submit(s, m, std::move(op));  // submitted before the END callback (as measured in FACTS.md)
    Sanitizer_LaunchData end = d;
    end.gridDim_x = end.gridDim_y = end.gridDim_z = 0;  // as the real Sanitizer: valid at BEGIN only
    end.blockDim_x = end.blockDim_y = end.blockDim_z = 0;
    tl_in_nondefault_launch_end = stream != 0;
    Fire(SANITIZER_CB_DOMAIN_LAUNCH, SANITIZER_CBID_LAUNCH_END, &end);
    tl_in_nondefault_launch_end = false;
  }
  return 0;
}

}  // namespace

namespace {
void ReportSyncFromBlockingCall(Stream* st) {
  const char* how = std::getenv("FAKESAN_SYNC_CALLBACK_IN_COPY");
  if (!how || !*how || tl_fake_helper) return;
  Sanitizer_SynchronizeData d{};
  d.context = S().context;
  d.stream = CuStream(st);
  d.hStream = Handle(st);
  if (std::strcmp(how, "thread") == 0) {
    Log("sync_callback_from_copy thread");
    // The calling thread waits; the fake's state is touched by one thread at a time.
    std::thread helper([&] {
      tl_fake_helper = true;
      Fire(SANITIZER_CB_DOMAIN_SYNCHRONIZE, SANITIZER_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED, &d);
    });
    helper.join();
  } else {
    Log("sync_callback_from_copy same");
    tl_fake_helper = true;
    Fire(SANITIZER_CB_DOMAIN_SYNCHRONIZE, SANITIZER_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED, &d);
    tl_fake_helper = false;
  }
}
}  // namespace

// ---- Sanitizer API ---------------------------------------------------------
extern "C" {

SanitizerResult sanitizerGetResultString(SanitizerResult result, const char** str) {
  if (!str) return SANITIZER_ERROR_INVALID_PARAMETER;
  switch (result) {
    case SANITIZER_SUCCESS:
      *str = "SANITIZER_SUCCESS";
      break;
    case SANITIZER_ERROR_INVALID_PARAMETER:
      *str = "SANITIZER_ERROR_INVALID_PARAMETER";
      break;
    case SANITIZER_ERROR_INVALID_CONTEXT:
      *str = "SANITIZER_ERROR_INVALID_CONTEXT";
      break;
    case SANITIZER_ERROR_MAX_LIMIT_REACHED:
      *str = "SANITIZER_ERROR_MAX_LIMIT_REACHED";
      break;
    case SANITIZER_ERROR_OUT_OF_MEMORY:
      *str = "SANITIZER_ERROR_OUT_OF_MEMORY";
      break;
    default:
      *str = "SANITIZER_ERROR (fake)";
      break;
  }
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerSubscribe(Sanitizer_SubscriberHandle* subscriber, Sanitizer_CallbackFunc callback,
                                   void* userdata) {
  Lock lk(S().mu);
  State& s = S();
  Log("subscribe");
  if (!subscriber || !callback) return SANITIZER_ERROR_INVALID_PARAMETER;
  if (s.mode == FAKESAN_SUBSCRIBE_FAILS || s.subscribed) return SANITIZER_ERROR_MAX_LIMIT_REACHED;
  s.subscribed = true;
  s.callback = callback;
  s.callback_userdata = userdata;
  *subscriber = reinterpret_cast<Sanitizer_SubscriberHandle>(&s);
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerUnsubscribe(Sanitizer_SubscriberHandle subscriber) {
  Lock lk(S().mu);
  Log("unsubscribe");
  if (reinterpret_cast<State*>(subscriber) != &S() || !S().subscribed) return SANITIZER_ERROR_INVALID_PARAMETER;
  S().subscribed = false;
  S().callback = nullptr;
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerEnableCallback(uint32_t enable, Sanitizer_SubscriberHandle subscriber,
                                        Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid) {
  Lock lk(S().mu);
  if (reinterpret_cast<State*>(subscriber) != &S()) return SANITIZER_ERROR_INVALID_PARAMETER;
  if (enable)
    S().enabled.insert({domain, cbid});
  else
    S().enabled.erase({domain, cbid});
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerEnableDomain(uint32_t enable, Sanitizer_SubscriberHandle subscriber,
                                      Sanitizer_CallbackDomain domain) {
  Lock lk(S().mu);
  if (reinterpret_cast<State*>(subscriber) != &S()) return SANITIZER_ERROR_INVALID_PARAMETER;
  if (enable)
    S().enabled_domains.insert(domain);
  else
    S().enabled_domains.erase(domain);
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerEnableAllDomains(uint32_t enable, Sanitizer_SubscriberHandle subscriber) {
  for (int d = 1; d < SANITIZER_CB_DOMAIN_SIZE; ++d)
    sanitizerEnableDomain(enable, subscriber, static_cast<Sanitizer_CallbackDomain>(d));
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerGetCallbackState(uint32_t* enable, Sanitizer_SubscriberHandle subscriber,
                                          Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid) {
  Lock lk(S().mu);
  if (!enable) return SANITIZER_ERROR_INVALID_PARAMETER;
  *enable = Enabled(domain, cbid) ? 1 : 0;
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerAddPatches(const void* image, CUcontext ctx) {
  PatchCall call("add_patches");
  State& s = S();
  Lock lk(s.mu);
  if (!image || (ctx != s.context && ctx != nullptr) || !s.context_alive) return SANITIZER_ERROR_INVALID_PARAMETER;
  uint32_t magic;
  std::memcpy(&magic, image, sizeof magic);
  if (magic != kFatbinMagic) {
    Log("error add_patches_not_a_fatbin");
    return SANITIZER_ERROR_INVALID_PARAMETER;
  }
  // Fatbin header: magic, version(2), header size(2), fat size(8).
  uint16_t header_size;
  uint64_t fat_size;
  std::memcpy(&header_size, static_cast<const char*>(image) + 6, sizeof header_size);
  std::memcpy(&fat_size, static_cast<const char*>(image) + 8, sizeof fat_size);
  const char* p = static_cast<const char*>(image);
  s.patch_images.emplace_back(p, p + header_size + fat_size);
  ++s.stats.patch_images_added;
  Log("add_patches bytes=%llu", static_cast<unsigned long long>(header_size + fat_size));
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerAddPatchesFromFile(const char* filename, CUcontext ctx) {
  std::ifstream f(filename ? filename : "", std::ios::binary);
  if (!f) return SANITIZER_ERROR_INVALID_PARAMETER;
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 16) return SANITIZER_ERROR_INVALID_PARAMETER;
  return sanitizerAddPatches(bytes.data(), ctx);
}

SanitizerResult sanitizerPatchInstructions(const Sanitizer_InstructionId instructionId, CUmodule module,
                                           const char* deviceCallbackName) {
  PatchCall call("patch_instructions");
  Lock lk(S().mu);
  auto* m = reinterpret_cast<Module*>(module);
  if (!m || !deviceCallbackName || !PatchImageHas(deviceCallbackName)) {
    Log("error patch_instructions %s", deviceCallbackName ? deviceCallbackName : "(null)");
    return SANITIZER_ERROR_INVALID_PARAMETER;
  }
  const char* kind = instructionId == SANITIZER_INSTRUCTION_BLOCK_ENTER  ? "enter:"
                     : instructionId == SANITIZER_INSTRUCTION_BLOCK_EXIT ? "exit:"
                                                                         : "other:";
  m->patched_instructions.insert(std::string(kind) + deviceCallbackName);
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerPatchModule(CUmodule module) {
  PatchCall call("patch_module");
  Lock lk(S().mu);
  auto* m = reinterpret_cast<Module*>(module);
  if (!m) return SANITIZER_ERROR_INVALID_PARAMETER;
  CheckNoneInFlight(*m, "patch_module");
  CheckNotInNondefaultLaunchEnd(*m, "patch_module");
  if (m->patched_instructions.empty()) {
    // As measured on the H200: re-patching after an unpatch without issuing
    // the instructions again gives launches without blocks.
    Log("patch_module_without_instructions %llu", static_cast<unsigned long long>(m->id));
  }
  m->patched = true;
  ++S().stats.modules_patched;
  Log("patch_module %llu", static_cast<unsigned long long>(m->id));
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerUnpatchModule(CUmodule module) {
  PatchCall call("unpatch_module");
  Lock lk(S().mu);
  auto* m = reinterpret_cast<Module*>(module);
  if (!m) return SANITIZER_ERROR_INVALID_PARAMETER;
  CheckNoneInFlight(*m, "unpatch_module");
  CheckNotInNondefaultLaunchEnd(*m, "unpatch_module");
  if (m->in_patched_exec) Log("error unpatch_after_patched_instantiation %llu", static_cast<unsigned long long>(m->id));
  m->patched = false;
  m->patched_instructions.clear();
  ++S().stats.modules_unpatched;
  Log("unpatch_module %llu", static_cast<unsigned long long>(m->id));
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerSetLaunchCallbackData(Sanitizer_LaunchHandle launch, CUfunction kernel,
                                               Sanitizer_StreamHandle stream, const void* userdata) {
  State& s = S();
  Lock lk(s.mu);
  if (!tl_open_launch || reinterpret_cast<Op*>(launch) != tl_open_launch) {
    Log("error set_launch_data_outside_launch");
    return SANITIZER_ERROR_INVALID_PARAMETER;
  }
  tl_open_launch->userdata = const_cast<void*>(userdata);
  Log("set_launch_data %s", userdata ? "buffer" : "null");
  if (!userdata && tl_open_launch->module && tl_open_launch->module->patched) ++s.stats.launches_null_data_patched;
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerSetCallbackData(CUfunction kernel, const void* userdata) {
  State& s = S();
  Lock lk(s.mu);
  s.function_data[kernel] = const_cast<void*>(userdata);
  Log("set_function_data %s", userdata ? "buffer" : "null");
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerAlloc(CUcontext ctx, void** devPtr, size_t size) {
  Lock lk(S().mu);
  State& s = S();
  if (!devPtr || size == 0) return SANITIZER_ERROR_INVALID_PARAMETER;
  if (!s.context_alive || (ctx != s.context && ctx != nullptr)) return SANITIZER_ERROR_INVALID_CONTEXT;
  void* p = std::malloc(size);
  if (!p) return SANITIZER_ERROR_OUT_OF_MEMORY;
  std::memset(p, 0xAB, size);  // device memory is not zeroed
  s.allocations[reinterpret_cast<uintptr_t>(p)] = size;
  *devPtr = p;
  ++s.stats.allocs;
  Log("alloc %zu", size);
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerFree(CUcontext ctx, void* devPtr) {
  Lock lk(S().mu);
  State& s = S();
  auto it = s.allocations.find(reinterpret_cast<uintptr_t>(devPtr));
  if (it == s.allocations.end()) return SANITIZER_ERROR_INVALID_PARAMETER;
  CheckNotInsideLaunchBegin("sanitizerFree");
  FlushAll();  // like cuMemFree: waits for the device
  std::free(devPtr);
  s.allocations.erase(it);
  ++s.stats.frees;
  Log("free");
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerAllocHost(CUcontext ctx, void** devPtr, size_t size) {
  Lock lk(S().mu);
  State& s = S();
  if (!devPtr || size == 0) return SANITIZER_ERROR_INVALID_PARAMETER;
  if (!s.context_alive || (ctx != s.context && ctx != nullptr)) return SANITIZER_ERROR_INVALID_CONTEXT;
  void* p = std::malloc(size);
  if (!p) return SANITIZER_ERROR_OUT_OF_MEMORY;
  s.host_allocations[reinterpret_cast<uintptr_t>(p)] = size;
  *devPtr = p;
  ++s.stats.host_allocs;
  Log("alloc_host %zu", size);
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerFreeHost(CUcontext ctx, void* devPtr) {
  Lock lk(S().mu);
  State& s = S();
  auto it = s.host_allocations.find(reinterpret_cast<uintptr_t>(devPtr));
  if (it == s.host_allocations.end()) return SANITIZER_ERROR_INVALID_PARAMETER;
  if (!s.context_alive) Log("error free_host_after_context_destroyed");
  std::free(devPtr);
  s.host_allocations.erase(it);
  ++s.stats.host_frees;
  Log("free_host");
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerMemset(void* devPtr, int value, size_t count, Sanitizer_StreamHandle stream) {
  Lock lk(S().mu);
  Stream* s = StreamOf(stream);
  if (!s || !InAllocation(devPtr, count)) return SANITIZER_ERROR_INVALID_PARAMETER;
  CheckNotCapturing(s, "memset");
  Op op;
  op.kind = Op::kMemset;
  op.dst = devPtr;
  op.value = value;
  op.count = count;
  s->pending.push_back(std::move(op));
  Log("memset %zu stream=%llu", count, static_cast<unsigned long long>(s->id));
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerMemcpyHostToDeviceAsync(void* dst, void* src, size_t count, Sanitizer_StreamHandle stream) {
  Lock lk(S().mu);
  Stream* s = StreamOf(stream);
  if (!s || !src || !InAllocation(dst, count)) return SANITIZER_ERROR_INVALID_PARAMETER;
  CheckNotCapturing(s, "h2d");
  Op op;
  op.kind = Op::kH2D;
  op.dst = dst;
  op.bytes.assign(static_cast<unsigned char*>(src), static_cast<unsigned char*>(src) + count);  // staged now
  s->pending.push_back(std::move(op));
  Log("h2d %zu stream=%llu", count, static_cast<unsigned long long>(s->id));
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerMemcpyDeviceToHost(void* dst, void* src, size_t count, Sanitizer_StreamHandle stream) {
  Lock lk(S().mu);
  Stream* s = StreamOf(stream);
  if (!s || !dst || !InAllocation(src, count)) {
    Log("error d2h_bad_args");
    return SANITIZER_ERROR_INVALID_PARAMETER;
  }
  CheckNotInsideLaunchBegin("sanitizerMemcpyDeviceToHost");
  CheckNotCapturing(s, "d2h");
  Flush(s);  // stream-ordered, returns when done
  std::memcpy(dst, src, count);
  ++S().stats.d2h_copies;
  Log("d2h %zu stream=%llu", count, static_cast<unsigned long long>(s->id));
  lk.unlock();
  ReportSyncFromBlockingCall(s);
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerStreamSynchronize(Sanitizer_StreamHandle stream) {
  Lock lk(S().mu);
  Stream* s = StreamOf(stream);
  if (!s) return SANITIZER_ERROR_INVALID_PARAMETER;
  CheckNotInsideLaunchBegin("sanitizerStreamSynchronize");
  CheckNotCapturing(s, "stream_sync");
  Flush(s);
  ++S().stats.stream_syncs;
  Log("sanitizer_stream_sync %llu", static_cast<unsigned long long>(s->id));
  lk.unlock();
  ReportSyncFromBlockingCall(s);
  return SANITIZER_SUCCESS;
}

SanitizerResult sanitizerGetStreamHandle(CUcontext ctx, CUstream stream, Sanitizer_StreamHandle* hStream) {
  Lock lk(S().mu);
  if (!hStream) return SANITIZER_ERROR_INVALID_PARAMETER;
  for (auto& [id, s] : S().streams)
    if (CuStream(s.get()) == stream) {
      *hStream = Handle(s.get());
      return SANITIZER_SUCCESS;
    }
  return SANITIZER_ERROR_INVALID_PARAMETER;
}

SanitizerResult sanitizerGetStream(Sanitizer_StreamHandle hStream, CUstream* stream) {
  Lock lk(S().mu);
  Stream* s = StreamOf(hStream);
  if (!s || !stream) return SANITIZER_ERROR_INVALID_PARAMETER;
  *stream = CuStream(s);
  return SANITIZER_SUCCESS;
}

// ---- Control interface -----------------------------------------------------

void fakesan_set_mode(int mode) {
  Lock lk(S().mu);
  S().mode = mode;
}

int fakesan_init(void) {
  State& s = S();
  Log("init");
  if (const char* t = std::getenv("FAKESAN_EXIT_TEARDOWN"); t && std::strcmp(t, "1") == 0) std::atexit(ExitTeardown);
  if (const char* inj = std::getenv("CUDA_INJECTION64_PATH"); inj && *inj) {
    void* h = dlopen(inj, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      std::fprintf(stderr, "fakesan: cannot load CUDA_INJECTION64_PATH=%s: %s\n", inj, dlerror());
      return -1;
    }
    auto init = reinterpret_cast<int (*)()>(dlsym(h, "InitializeInjection"));
    if (!init) {
      std::fprintf(stderr, "fakesan: %s has no InitializeInjection\n", inj);
      return -1;
    }
    init();
  }
  Sanitizer_ResourceContextData c{};
  {
    Lock lk(s.mu);
    s.context_alive = true;
    c.context = s.context;
    c.device = 0;
  }
  Fire(SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_CONTEXT_CREATION_FINISHED, &c);
  return 0;
}

uintptr_t fakesan_load_module(const void* cubin, size_t size) {
  State& s = S();
  Lock lk(s.mu);
  auto m = std::make_unique<Module>();
  m->id = s.next_module++;
  m->cubin.assign(static_cast<const char*>(cubin), static_cast<const char*>(cubin) + size);
  Module* raw = m.get();
  s.modules[raw->id] = std::move(m);
  Log("module_loaded %llu bytes=%zu", static_cast<unsigned long long>(raw->id), size);
  Sanitizer_ResourceModuleData d{};
  d.context = s.context;
  d.module = reinterpret_cast<CUmodule>(raw);
  d.cubinSize = raw->cubin.size();
  d.pCubin = raw->cubin.data();
  lk.unlock();
  Fire(SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_MODULE_LOADED, &d);
  return raw->id;
}

uintptr_t fakesan_load_module_file(const char* path) {
  std::ifstream f(path ? path : "", std::ios::binary);
  if (!f) return 0;
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return fakesan_load_module(bytes.data(), bytes.size());
}

void fakesan_unload_module(uintptr_t module) {
  State& s = S();
  Lock lk(s.mu);
  auto it = s.modules.find(module);
  if (it == s.modules.end()) return;
  Sanitizer_ResourceModuleData d{};
  d.context = s.context;
  d.module = reinterpret_cast<CUmodule>(it->second.get());
  d.cubinSize = it->second->cubin.size();
  d.pCubin = it->second->cubin.data();
  lk.unlock();
  Fire(SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_MODULE_UNLOAD_STARTING, &d);
  lk.lock();
  FlushAll();  // pending launches of the module finish before it goes
  Log("module_unloaded %llu", static_cast<unsigned long long>(module));
  s.modules.erase(module);
}

uintptr_t fakesan_create_stream(void) {
  State& s = S();
  Lock lk(s.mu);
  auto st = std::make_unique<Stream>();
  st->id = s.next_stream++;
  Stream* raw = st.get();
  s.streams[raw->id] = std::move(st);
  Sanitizer_ResourceStreamData d{};
  d.context = s.context;
  d.stream = CuStream(raw);
  d.hStream = Handle(raw);
  lk.unlock();
  Fire(SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_STREAM_CREATED, &d);
  return raw->id;
}

void fakesan_destroy_stream(uintptr_t stream) {
  State& s = S();
  Lock lk(s.mu);
  Stream* st = StreamById(stream);
  if (!st || stream == 0) return;
  Sanitizer_ResourceStreamData d{};
  d.context = s.context;
  d.stream = CuStream(st);
  d.hStream = Handle(st);
  lk.unlock();
  Fire(SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_STREAM_DESTROY_STARTING, &d);
  lk.lock();
  Flush(st);
  Log("stream_destroyed %llu", static_cast<unsigned long long>(stream));
  s.streams.erase(stream);
}

int fakesan_launch(uintptr_t module, const char* name, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by,
                   uint32_t bz, uintptr_t stream, const FakesanPlan* plan) {
  return Launch(false, module, name, gx, gy, gz, bx, by, bz, stream, plan);
}

int fakesan_graph_node_launch(uintptr_t module, const char* name, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx,
                              uint32_t by, uint32_t bz, uintptr_t stream, const FakesanPlan* plan) {
  return Launch(true, module, name, gx, gy, gz, bx, by, bz, stream, plan);
}

// A whole graph launch on `stream`: GRAPHS_LAUNCH_BEGIN now, its kernel nodes
// (fakesan_graph_node_launch) in between, GRAPHS_LAUNCH_END at fakesan_graph_end.
static void FireGraphLaunch(uint32_t cbid, uintptr_t exec, uintptr_t stream) {
  State& s = S();
  Lock lk(s.mu);
  Stream* st = StreamById(stream);
  if (!st) return;
  const bool begin = cbid == SANITIZER_CBID_GRAPHS_LAUNCH_BEGIN;
  if (begin) s.graph_exec = exec;
  Sanitizer_GraphLaunchData g{};
  g.context = s.context;
  g.stream = CuStream(st);
  g.hStream = Handle(st);
  g.graphExec = ExecHandle(s.graph_exec);
  s.graph_launch_id = begin ? s.next_graph_launch_id++ : 0;
  Log("%s stream=%llu exec=%llu", begin ? "graph_launch_begin" : "graph_launch_end",
      static_cast<unsigned long long>(stream), static_cast<unsigned long long>(s.graph_exec));
  if (!begin) s.graph_exec = 0;
  lk.unlock();
  Fire(SANITIZER_CB_DOMAIN_GRAPHS, cbid, &g);
}

uintptr_t fakesan_graph_exec_instantiate(void) {
  State& s = S();
  Lock lk(s.mu);
  const uintptr_t exec = s.next_exec++;
  Log("graph_instantiate %llu", static_cast<unsigned long long>(exec));
  Sanitizer_GraphExecData d{};
  d.graphExec = ExecHandle(exec);
  lk.unlock();
  Fire(SANITIZER_CB_DOMAIN_GRAPHS, SANITIZER_CBID_GRAPHS_GRAPHEXEC_CREATING, &d);
  // The exec is made after its CREATING callback: it takes the patch state
  // the tool left (patching there worked on the H200).
  lk.lock();
  GraphExec& e = s.execs[exec];
  for (auto& [id, m] : s.modules) {
    e.patched[id] = HasPatches(*m);
    if (m->patched) m->in_patched_exec = true;
    Log("graph_exec %llu module %llu patched=%d", static_cast<unsigned long long>(exec),
        static_cast<unsigned long long>(id), HasPatches(*m) ? 1 : 0);
  }
  s.last_exec = exec;
  return exec;
}

void fakesan_graph_instantiate(void) { fakesan_graph_exec_instantiate(); }

void fakesan_stream_begin_capture(uintptr_t stream) {
  Lock lk(S().mu);
  Stream* s = StreamById(stream);
  if (!s || stream == 0 || s->capturing) {
    Log("error bad_begin_capture %llu", static_cast<unsigned long long>(stream));
    return;
  }
  s->capturing = true;
  s->captured.clear();
  Log("begin_capture stream=%llu", static_cast<unsigned long long>(stream));
}

uintptr_t fakesan_stream_end_capture(uintptr_t stream) {
  Lock lk(S().mu);
  Stream* s = StreamById(stream);
  if (!s || !s->capturing) {
    Log("error bad_end_capture %llu", static_cast<unsigned long long>(stream));
    return 0;
  }
  s->capturing = false;
  const uintptr_t graph = S().next_captured_graph++;
  Log("end_capture stream=%llu graph=%llu nodes=%zu", static_cast<unsigned long long>(stream),
      static_cast<unsigned long long>(graph), s->captured.size());
  S().captured_graphs[graph] = std::move(s->captured);
  s->captured.clear();
  return graph;
}

uintptr_t fakesan_graph_instantiate_captured(uintptr_t graph) {
  std::vector<CapturedNode> nodes;
  {
    Lock lk(S().mu);
    auto it = S().captured_graphs.find(graph);
    if (it == S().captured_graphs.end()) {
      Log("error bad_captured_graph %llu", static_cast<unsigned long long>(graph));
      return 0;
    }
    nodes = it->second;
  }
  const uintptr_t exec = fakesan_graph_exec_instantiate();
  Lock lk(S().mu);
  S().exec_nodes[exec] = std::move(nodes);
  return exec;
}

int fakesan_graph_launch_captured(uintptr_t exec, uintptr_t stream) {
  std::vector<CapturedNode> nodes;
  {
    Lock lk(S().mu);
    auto it = S().exec_nodes.find(exec);
    if (it == S().exec_nodes.end() || !StreamById(stream)) {
      Log("error bad_captured_graph_launch %llu", static_cast<unsigned long long>(exec));
      return -1;
    }
    nodes = it->second;
  }
  fakesan_graph_exec_begin(exec, stream);
  int rc = 0;
  for (const CapturedNode& n : nodes)
    if (rc == 0)
      rc = Launch(true, n.module, n.name.c_str(), n.grid[0], n.grid[1], n.grid[2], n.block[0], n.block[1], n.block[2],
                  stream, &n.plan);
  fakesan_graph_end(stream);
  return rc;
}

void fakesan_graph_exec_begin(uintptr_t exec, uintptr_t stream) {
  FireGraphLaunch(SANITIZER_CBID_GRAPHS_LAUNCH_BEGIN, exec, stream);
}
void fakesan_graph_begin(uintptr_t stream) {
  uintptr_t exec;
  {
    Lock lk(S().mu);
    exec = S().last_exec;
  }
  fakesan_graph_exec_begin(exec, stream);
}
void fakesan_graph_end(uintptr_t stream) { FireGraphLaunch(SANITIZER_CBID_GRAPHS_LAUNCH_END, 0, stream); }

void fakesan_stream_sync(uintptr_t stream) {
  State& s = S();
  Lock lk(s.mu);
  Stream* st = StreamById(stream);
  if (!st) return;
  Flush(st);
  Log("app_stream_sync %llu", static_cast<unsigned long long>(stream));
  Sanitizer_SynchronizeData d{};
  d.context = s.context;
  d.stream = CuStream(st);
  d.hStream = Handle(st);
  lk.unlock();
  Fire(SANITIZER_CB_DOMAIN_SYNCHRONIZE, SANITIZER_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED, &d);
}

void fakesan_ctx_sync(void) {
  State& s = S();
  Lock lk(s.mu);
  FlushAll();
  Log("app_ctx_sync");
  Sanitizer_SynchronizeData d{};
  d.context = s.context;
  lk.unlock();
  Fire(SANITIZER_CB_DOMAIN_SYNCHRONIZE, SANITIZER_CBID_SYNCHRONIZE_CONTEXT_SYNCHRONIZED, &d);
}

void fakesan_destroy_context(void) {
  State& s = S();
  Lock lk(s.mu);
  if (!s.context_alive) return;
  Sanitizer_ResourceContextData c{};
  c.context = s.context;
  lk.unlock();
  Fire(SANITIZER_CB_DOMAIN_RESOURCE, SANITIZER_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, &c);
  lk.lock();
  FlushAll();
  s.context_alive = false;
  s.patch_images.clear();
  Log("context_destroyed");
}

void fakesan_get_stats(FakesanStats* out) {
  Lock lk(S().mu);
  if (out) *out = S().stats;
}

}  // extern "C"

// Written after every atexit handler (the probe drains at exit), for tests.
__attribute__((destructor)) static void WriteStatsAtExit() {
  const char* path = std::getenv("FAKESAN_STATS");
  if (!path || !*path) return;
  FILE* f = std::fopen(path, "w");
  if (!f) return;
  const FakesanStats& s = S().stats;
  std::fprintf(f,
               "callbacks_fired %llu\nlaunches %llu\nlaunches_executed_patched %llu\nd2h_copies %llu\n"
               "stream_syncs %llu\nallocs %llu\nfrees %llu\nmodules_patched %llu\npatch_images_added %llu\n"
               "launches_executed_off %llu\nlaunches_null_data_patched %llu\ncallbacks_after_unsubscribe %llu\n"
               "host_allocs %llu\nhost_frees %llu\nmodules_unpatched %llu\nlaunches_executed_unpatched %llu\n"
               "toggles_with_module_in_flight %llu\npatch_changed_during_launch %llu\nconcurrent_patch_calls %llu\n"
               "graph_nodes_without_table_entry %llu\ntoggles_in_launch_end_nondefault %llu\n"
               "graph_exec_patch_state_changed %llu\n",
               (unsigned long long)s.callbacks_fired, (unsigned long long)s.launches,
               (unsigned long long)s.launches_executed_patched, (unsigned long long)s.d2h_copies,
               (unsigned long long)s.stream_syncs, (unsigned long long)s.allocs, (unsigned long long)s.frees,
               (unsigned long long)s.modules_patched, (unsigned long long)s.patch_images_added,
               (unsigned long long)s.launches_executed_off, (unsigned long long)s.launches_null_data_patched,
               (unsigned long long)s.callbacks_after_unsubscribe, (unsigned long long)s.host_allocs,
               (unsigned long long)s.host_frees, (unsigned long long)s.modules_unpatched,
               (unsigned long long)s.launches_executed_unpatched, (unsigned long long)s.toggles_with_module_in_flight,
               (unsigned long long)s.patch_changed_during_launch, (unsigned long long)s.concurrent_patch_calls,
               (unsigned long long)s.graph_nodes_without_table_entry,
               (unsigned long long)s.toggles_in_launch_end_nondefault,
               (unsigned long long)s.graph_exec_patch_state_changed);
  std::fclose(f);
}

namespace {
// FAKESAN_EXIT_TEARDOWN=1: the CUDA runtime's exit handler (see fakesan.h).
void ExitTeardown() {
  State& s = S();
  Log("exit_teardown");
  Lock lk(s.mu);
  if (s.has_last_launch && s.modules.count(s.last_module) && StreamById(s.last_stream)) {
    const std::string name = s.last_name;
    const uintptr_t m = s.last_module, st = s.last_stream;
    const uint32_t g[3] = {s.last_grid[0], s.last_grid[1], s.last_grid[2]};
    const uint32_t b[3] = {s.last_block[0], s.last_block[1], s.last_block[2]};
    lk.unlock();
    fakesan_launch(m, name.c_str(), g[0], g[1], g[2], b[0], b[1], b[2], st, nullptr);
    lk.lock();
  }
  lk.unlock();
  fakesan_ctx_sync();
  lk.lock();
  std::vector<uintptr_t> modules, streams;
  for (const auto& [id, m] : s.modules) modules.push_back(id);
  for (const auto& [id, st] : s.streams)
    if (id != 0) streams.push_back(id);
  lk.unlock();
  for (uintptr_t m : modules) fakesan_unload_module(m);
  for (uintptr_t st : streams) fakesan_destroy_stream(st);
  fakesan_destroy_context();
  Log("exit_teardown_done");
}
}  // namespace
