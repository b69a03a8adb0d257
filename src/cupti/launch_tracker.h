// The collector's launch bookkeeping, split between the application thread
// and the collector's own thread.
//
// Application thread (callbacks.cpp): a launch callback only captures the
// facts a launch key and a LaunchRecord need (kernel name, dims, stream,
// device, correlation id, enter time, and the NVTX range instance it runs in)
// into its thread's LaunchRing: no lock, no allocation, no map insert, no
// hashing. The NVTX range path is not read per launch: each range instance
// (RangeStack frame) has a serial number, and only when a thread launches in
// a frame other than the last one it announced does it queue a PathOp with
// the frame chain and the path string.
//
// Collector thread (whoever holds the tracker's lock: the buffer processing
// thread, the flush thread, or, when a ring is full, the application thread
// itself): Drain() applies every ring's ops in that thread's order. It mirrors
// each thread's open range instances from the PathOps, counts the ordinal of
// each kernel in them exactly as RangeStack::NextLaunch does, hashes the key
// (LaunchKeyHash), records pending launch keys for the kernel records
// (PendingLaunches), and, at the launch's exit op, writes its LaunchRecords and
// counts it (seen / failed / during capture); API records too. So keys, files
// and loss counts are those of the former per-launch path; only where the
// work happens moved.
//
// Loss: a full ring is drained by its producer under the lock (counted in
// launch_ring_full_drains), never dropped. A thread's ring is freed once the
// thread has exited and its ops are applied.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "cupti/graph_exec.h"
#include "cupti/launch_ring.h"
#include "cupti/loss.h"
#include "cupti/pending_launches.h"
#include "launchkey/launch_key.h"
#include "twinscope/records.h"

namespace twinscope::cupti {

// A kernel name, interned once per process (KernelNames) so that launch ops
// can carry a pointer that stays valid after the driver's own string is gone.
struct KernelName {
  std::string name;
  StringId id = 0;  // 0 for ""
};

// Thread-safe, append-only (entries live as long as the table).
class KernelNames {
 public:
  using InternFn = std::function<StringId(std::string_view)>;
  explicit KernelNames(InternFn intern) : intern_(std::move(intern)) {}
  const KernelName* Get(std::string_view name);

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  InternFn intern_;
  std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<KernelName>, Hash, std::equal_to<>> names_;
};

// ---- Ops (the bytes in a LaunchRing) --------------------------------------------

enum OpKind : uint8_t {
  kOpKernel = LaunchRing::kFirstUserKind,  // KernelOp: an eager launch's enter
  kOpGraph,                                // GraphOp: a graph launch's enter
  kOpAlias,                                // AliasOp: a nested launch call of the open launch
  kOpExit,                                 // ExitOp: an API call's exit (launch end and/or API record)
  kOpPath,                                 // PathOp: the range instance of the launches that follow
};

struct KernelOp {
  uint8_t kind = kOpKernel;
  uint8_t reserved = 0;
  uint16_t device = 0;
  uint32_t correlation_id = 0;
  uint64_t cpu_ns = 0;
  const KernelName* name = nullptr;
  uint32_t stream = 0;
  Dim3 grid{}, block{}, cluster{};
};
static_assert(sizeof(KernelOp) == LaunchRing::kSlotBytes);

struct GraphOp {
  uint8_t kind = kOpGraph;
  uint8_t reserved = 0;
  uint16_t device = 0;
  uint32_t correlation_id = 0;
  uint64_t cpu_ns = 0;
  uint32_t stream = 0;
  uint32_t reserved2 = 0;
  std::shared_ptr<const GraphExecInfo> exec;  // null: an exec we never saw instantiated
};
static_assert(sizeof(GraphOp) <= LaunchRing::kSlotBytes);

struct AliasOp {
  uint8_t kind = kOpAlias;
  uint8_t reserved[3] = {};
  uint32_t alias = 0;  // the nested call's correlation id
};

enum ExitFlags : uint8_t {
  kExitLaunchEnd = 1 << 0,  // the outermost launch call returned
  kExitFailed = 1 << 1,     // ... with an error
  kExitCaptured = 1 << 2,   // ... into a capturing stream (recorded in a graph, not run)
  kExitApiRecord = 1 << 3,  // write an ApiRecord for this call
};

struct ExitOp {
  uint8_t kind = kOpExit;
  uint8_t flags = 0;   // ExitFlags
  uint8_t domain = 0;  // ApiDomain
  uint8_t reserved = 0;
  uint32_t cbid = 0;
  uint32_t correlation_id = 0;
  StringId name = 0;  // the API's name
  uint64_t start_ns = 0, end_ns = 0;
};

// Followed by `frames` u64 frame serials (outermost first) and `path_bytes`
// bytes of the innermost frame's path.
struct PathOp {
  uint8_t kind = kOpPath;
  uint8_t reserved[3] = {};
  uint32_t slots = 0;
  uint32_t frames = 0;
  uint32_t path_bytes = 0;
};
static_assert(sizeof(PathOp) == 16);

// Where the tracker's output goes (the collector's trace writer; tests).
class LaunchSink {
 public:
  virtual ~LaunchSink() = default;
  virtual StringId InternPath(std::string_view path) = 0;
  virtual void WriteLaunches(const LaunchRecord* records, size_t n) = 0;
  virtual void WriteApi(const ApiRecord& record) = 0;
};

struct LaunchTrackerOptions {
  size_t max_pending_keys = 1u << 20;
  bool skip_key = false;      // TWINSCOPE_CUPTI_SKIP=key: zero keys
  bool skip_pending = false;  // TWINSCOPE_CUPTI_SKIP=pending: no pending launch keys
};

class LaunchTracker {
 public:
  LaunchTracker(const LaunchTrackerOptions& options, LaunchSink* sink, LossCounters* loss);
  ~LaunchTracker();  // drops what is still queued (ops own graph exec references)
  LaunchTracker(const LaunchTracker&) = delete;
  LaunchTracker& operator=(const LaunchTracker&) = delete;

  // Called when a ring passes half full (from the producer's thread, without
  // locks): wake whoever calls Drain().
  void SetWake(std::function<void()> wake) { wake_ = std::move(wake); }

  // ---- Producer side (the ring's own thread) ----
  // A new ring for the calling thread (`thread_id`: its OS id). Owned by the
  // tracker; the thread calls ring->Close() when it exits.
  LaunchRing* NewRing(uint64_t thread_id);

  template <typename Op>
  void Push(LaunchRing* ring, const Op& op) {
    Queue(ring, [&] { return ring->Push(op); });
  }
  // Constructs an Op in its slot and lets `fill(Op&)` set its fields.
  template <typename Op, typename Fill>
  void PushWith(LaunchRing* ring, Fill&& fill) {
    static_assert(std::is_trivially_destructible_v<Op> && sizeof(Op) <= LaunchRing::kSlotBytes);
    auto construct = [&](void* dst) { fill(*new (dst) Op); };
    Queue(ring, [&] { return ring->Emplace(sizeof(Op), construct); });
  }
  void PushGraph(LaunchRing* ring, GraphOp&& op);
  // Before a launch's enter op: names the range instance it runs in, unless
  // that is the one this ring named last (`*announced`, the producer's memo).
  void AnnounceFrame(LaunchRing* ring, const RangeStack& stack, uint64_t* announced) {
    const uint64_t serial = stack.innermost_serial();
    if (serial == *announced) return;
    PushPath(ring, stack);
    *announced = serial;
  }
  // Queues the PathOp of `stack`'s innermost frame.
  void PushPath(LaunchRing* ring, const RangeStack& stack);

  // ---- Consumer side ----
  // Applies every ring's queued ops.
  void Drain();
  // The keys of one kernel record (drains first if the launch is not known yet).
  PendingLaunches::Match Resolve(uint32_t correlation_id, uint64_t graph_node_id, StringId kernel, LaunchKey* key);
  size_t pending_keys();
  uint64_t evicted_keys();
  size_t rings();  // rings registered (for tests)

 private:
  // What the consumer knows of one producer thread.
  struct MirrorFrame {
    uint64_t serial;
    std::unordered_map<StringId, uint32_t> kernel_counts;  // kernel (0 = "") -> launches in this instance
  };
  struct Producer {
    std::unique_ptr<LaunchRing> ring;
    std::vector<MirrorFrame> frames;  // the range instances the last PathOp named, outermost first
    std::string path;                 // the innermost one's path
    StringId path_id = 0;
    bool path_interned = false;
    // The launch between its enter op and its exit op.
    bool open = false, registered = false, graph = false, unknown_graph = false;
    uint32_t correlation_id = 0;
    std::vector<LaunchRecord> records;
  };

  // Runs `push` (a LaunchRing push) until it queued its op.
  template <typename PushFn>
  void Queue(LaunchRing* ring, PushFn&& push) {
    LaunchRing::PushResult r = push();
    if (r == LaunchRing::PushResult::kOk) return;
    if (r == LaunchRing::PushResult::kOkHalfFull) {
      if (wake_) wake_();
      return;
    }
    do MakeRoom(ring);
    while (push() == LaunchRing::PushResult::kFull);
  }
  // The producer's slow path: `ring` is full.
  void MakeRoom(LaunchRing* ring);
  void DrainLocked();
  static size_t SlotsOf(const unsigned char* op);
  void ApplyLocked(Producer& p, const unsigned char* op);
  void ApplyPath(Producer& p, const unsigned char* op);
  void ApplyExit(Producer& p, const ExitOp& op);
  LaunchRecord OpenLaunch(Producer& p, uint32_t correlation_id, uint64_t cpu_ns, uint16_t device, uint32_t stream);
  void CloseLaunch(Producer& p);
  LaunchKey KeyLocked(Producer& p, StringId kernel, std::string_view name, Dim3 grid, Dim3 block);
  static void Discard(LaunchRing* ring);

  const LaunchTrackerOptions options_;
  LaunchSink* const sink_;
  LossCounters* const loss_;
  std::function<void()> wake_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Producer>> producers_;  // under mu_
  PendingLaunches pending_;                           // under mu_
  uint64_t launch_seq_ = 0;                           // under mu_
  std::vector<unsigned char> path_scratch_;           // producer side of PushPath's slow path (under mu_)
};

}  // namespace twinscope::cupti
