// The launch tracker: application threads queue launch facts into their
// rings; the tracker turns them into launch keys, LaunchRecords, API records
// and pending keys. Keys are checked against RangeStack::NextLaunch (what the
// launch path computed on the application thread before, and what the block
// probe computes) on random programs of NVTX pushes, pops and launches.
#include "cupti/launch_tracker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "launchkey/launch_key.h"

namespace twinscope::cupti {
namespace {

// Records what the tracker writes; interns strings the way the writer does.
class TestSink : public LaunchSink {
 public:
  StringId Intern(std::string_view s) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ids_.find(std::string(s));
    if (it != ids_.end()) return it->second;
    StringId id = static_cast<StringId>(strings_.size() + 1);
    ids_.emplace(std::string(s), id);
    strings_.emplace_back(s);
    return id;
  }
  std::string S(StringId id) {
    std::lock_guard<std::mutex> lock(mu_);
    return id == 0 ? std::string() : strings_.at(id - 1);
  }
  StringId InternPath(std::string_view path) override { return Intern(path); }
  void WriteLaunches(const LaunchRecord* r, size_t n) override {
    std::lock_guard<std::mutex> lock(mu_);
    launches.insert(launches.end(), r, r + n);
  }
  void WriteApi(const ApiRecord& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    apis.push_back(r);
  }
  std::vector<LaunchRecord> launches;
  std::vector<ApiRecord> apis;

 private:
  std::mutex mu_;
  std::map<std::string, StringId> ids_;
  std::vector<std::string> strings_;
};

// One application thread, as callbacks.cpp drives the tracker.
struct App {
  App(LaunchTracker* t, KernelNames* n, uint64_t tid) : tracker(t), names(n), ring(t->NewRing(tid)) {}
  void Kernel(uint32_t corr, std::string_view name, Dim3 grid, Dim3 block) {
    tracker->AnnounceFrame(ring, stack, &announced);
    KernelOp op;
    op.correlation_id = corr;
    op.cpu_ns = 1000 + corr;
    op.name = names->Get(name);
    op.stream = 7;
    op.grid = grid;
    op.block = block;
    tracker->Push(ring, op);
  }
  void Graph(uint32_t corr, std::shared_ptr<const GraphExecInfo> exec) {
    if (exec) tracker->AnnounceFrame(ring, stack, &announced);
    GraphOp op;
    op.correlation_id = corr;
    op.exec = std::move(exec);
    tracker->PushGraph(ring, std::move(op));
  }
  void Alias(uint32_t alias) {
    AliasOp a;
    a.alias = alias;
    tracker->Push(ring, a);
  }
  void Exit(uint8_t flags, uint32_t corr = 0) {
    ExitOp e;
    e.flags = flags;
    e.correlation_id = corr;
    tracker->Push(ring, e);
  }
  LaunchTracker* tracker;
  KernelNames* names;
  LaunchRing* ring;
  RangeStack stack;  // this thread's NVTX ranges
  uint64_t announced = 0;
};

struct Fixture {
  explicit Fixture(size_t max_keys = 1u << 20) : tracker(Options(max_keys), &sink, &loss) {}
  static LaunchTrackerOptions Options(size_t max_keys) {
    LaunchTrackerOptions o;
    o.max_pending_keys = max_keys;
    return o;
  }
  TestSink sink;
  LossCounters loss;
  LaunchTracker tracker;
  KernelNames names{[this](std::string_view s) { return sink.Intern(s); }};
};

std::shared_ptr<GraphExecInfo> MakeExec(TestSink& sink, const std::vector<std::pair<std::string, uint32_t>>& nodes) {
  auto e = std::make_shared<GraphExecInfo>();
  e->exec_id = 9;
  for (size_t i = 0; i < nodes.size(); ++i) {
    GraphKernelNode n;
    n.name = nodes[i].first;
    n.name_id = sink.Intern(n.name);
    n.grid = {nodes[i].second, 1, 1};
    n.block = {64, 1, 1};
    e->kernels.push_back(n);
    e->index_by_node_id[100 + i] = static_cast<uint32_t>(i);
  }
  return e;
}

struct Expected {
  std::string path, kernel;
  uint32_t ordinal;
  uint64_t hash;
};

// Random programs: pushes and pops (two domains, repeated names) between
// eager and graph launches, some failing or captured. Every LaunchRecord's key
// equals the one RangeStack::NextLaunch gives at the same point of the program.
TEST(LaunchTracker, KeysEqualRangeStackKeysOnRandomPrograms) {
  std::mt19937 rng(12345);
  for (int program = 0; program < 40; ++program) {
    Fixture f;
    App app(&f.tracker, &f.names, 77);
    RangeStack reference;
    std::vector<Expected> want;
    const std::vector<std::string> kernels = {"_Z1av", "_Z1bv", "_Z4gemmPf", ""};
    const std::vector<std::string> ranges = {"step", "attn", "mlp"};
    auto exec = MakeExec(f.sink, {{"_Z1av", 2}, {"_Z4gemmPf", 8}, {"_Z1av", 4}});
    uint32_t corr = 1;
    for (int op = 0; op < 300; ++op) {
      const int what = static_cast<int>(rng() % 10);
      if (what < 2) {
        const std::string domain = rng() % 4 == 0 ? "dom" : "";
        const std::string& name = ranges[rng() % ranges.size()];
        app.stack.Push(domain, name);
        reference.Push(domain, name);
      } else if (what < 4) {
        const std::string domain = rng() % 4 == 0 ? "dom" : "";
        app.stack.Pop(domain);
        reference.Pop(domain);
      } else if (what < 8) {
        const std::string& k = kernels[rng() % kernels.size()];
        const Dim3 grid{1 + static_cast<uint32_t>(rng() % 3), 1, 1}, block{32, 1, 1};
        const int fate = static_cast<int>(rng() % 8);  // 0: fails, 1: captured, else runs
        if (fate == 1) {  // the app thread sees the capture at enter and queues no enter op
          app.Exit(kExitLaunchEnd | kExitCaptured);
          continue;
        }
        app.Kernel(corr, k, grid, block);
        // Counted even when the launch fails: RangeStack did too.
        LaunchKeyParts p = reference.NextLaunch(k, grid, block);
        if (fate == 0) {
          app.Exit(kExitLaunchEnd | kExitFailed);
        } else {
          app.Exit(kExitLaunchEnd);
          want.push_back({std::string(p.path), k, p.ordinal, p.hash});
        }
        ++corr;
      } else {
        app.Graph(corr++, exec);
        for (const auto& n : exec->kernels) {
          LaunchKeyParts p = reference.NextLaunch(n.name, n.grid, n.block);
          want.push_back({std::string(p.path), n.name, p.ordinal, p.hash});
        }
        app.Exit(kExitLaunchEnd);
      }
      if (rng() % 16 == 0) f.tracker.Drain();  // the consumer runs at random points
    }
    f.tracker.Drain();
    ASSERT_EQ(f.sink.launches.size(), want.size()) << "program " << program;
    for (size_t i = 0; i < want.size(); ++i) {
      const LaunchRecord& r = f.sink.launches[i];
      ASSERT_EQ(f.sink.S(r.key.path), want[i].path) << "program " << program << " launch " << i;
      ASSERT_EQ(f.sink.S(r.kernel), want[i].kernel);
      ASSERT_EQ(r.key.ordinal, want[i].ordinal) << "program " << program << " launch " << i << " " << want[i].path;
      ASSERT_EQ(r.key.hash, want[i].hash);
      ASSERT_EQ(r.seq, i);
      ASSERT_EQ(r.thread_id, 77u);
    }
    EXPECT_EQ(f.loss.launches_seen.load(), want.size());
  }
}

// Exit ops decide what a launch becomes: run (records, seen), failed (no
// record, pending key gone), captured (counted only); aliases and API records.
TEST(LaunchTracker, ExitOpsCountAndRecordAsTheLaunchPathDid) {
  Fixture f;
  App app(&f.tracker, &f.names, 5);
  app.stack.Push("", "step");
  app.Kernel(10, "_Z1kv", {1, 1, 1}, {32, 1, 1});
  app.Alias(11);  // the nested driver call
  ExitOp api;
  api.flags = kExitLaunchEnd | kExitApiRecord;
  api.correlation_id = 10;
  api.cbid = 211;
  api.domain = 1;
  api.name = f.sink.Intern("cudaLaunchKernel");
  api.start_ns = 100;
  api.end_ns = 200;
  f.tracker.Push(app.ring, api);
  app.Kernel(12, "_Z1kv", {1, 1, 1}, {32, 1, 1});
  app.Exit(kExitLaunchEnd | kExitFailed);
  app.Exit(kExitLaunchEnd | kExitCaptured);
  app.Graph(13, nullptr);  // an exec never seen instantiated
  app.Exit(kExitLaunchEnd);

  LaunchKey k{};
  EXPECT_EQ(f.tracker.Resolve(11, 0, f.sink.Intern("_Z1kv"), &k), PendingLaunches::Match::kExact);
  EXPECT_EQ(f.tracker.Resolve(12, 0, f.sink.Intern("_Z1kv"), &k), PendingLaunches::Match::kNone);
  ASSERT_EQ(f.sink.launches.size(), 1u);
  EXPECT_EQ(f.sink.S(f.sink.launches[0].key.path), "step#0");
  EXPECT_EQ(f.sink.launches[0].key.ordinal, 0u);
  EXPECT_EQ(f.sink.launches[0].correlation_id, 10u);
  EXPECT_EQ(f.sink.launches[0].cpu_ns, 1010u);
  EXPECT_EQ(f.sink.launches[0].stream, 7u);
  ASSERT_EQ(f.sink.apis.size(), 1u);
  EXPECT_EQ(f.sink.apis[0].thread_id, 5u);
  EXPECT_EQ(f.sink.apis[0].end_ns, 200u);
  EXPECT_EQ(f.sink.S(f.sink.apis[0].name), "cudaLaunchKernel");
  EXPECT_EQ(f.loss.launches_seen.load(), 1u);
  EXPECT_EQ(f.loss.launches_failed.load(), 1u);
  EXPECT_EQ(f.loss.launches_during_capture.load(), 1u);
  EXPECT_EQ(f.loss.graph_launches.load(), 1u);
  EXPECT_EQ(f.loss.graph_launches_unknown_exec.load(), 1u);
  EXPECT_EQ(f.loss.api_records.load(), 1u);
  EXPECT_EQ(f.tracker.pending_keys(), 0u);
}

// A kernel record can be processed before its launch's exit callback ran: the
// key is there from the enter op.
TEST(LaunchTracker, RecordBeforeTheLaunchReturnsStillGetsItsKey) {
  Fixture f;
  App app(&f.tracker, &f.names, 5);
  app.Kernel(3, "_Z1kv", {2, 1, 1}, {32, 1, 1});
  LaunchKey k{};
  EXPECT_EQ(f.tracker.Resolve(3, 0, f.sink.Intern("_Z1kv"), &k), PendingLaunches::Match::kExact);
  EXPECT_EQ(k.hash, LaunchKeyHash("", "_Z1kv", 0, {2, 1, 1}, {32, 1, 1}));
  EXPECT_TRUE(f.sink.launches.empty()) << "the LaunchRecord waits for the exit";
  app.Exit(kExitLaunchEnd);
  f.tracker.Drain();
  EXPECT_EQ(f.sink.launches.size(), 1u);
}

// No consumer at all: a full ring is drained by its own thread, in order,
// nothing lost, and the drains are counted.
TEST(LaunchTracker, FullRingIsDrainedByItsThreadAndCounted) {
  Fixture f;
  App app(&f.tracker, &f.names, 5);
  const uint32_t n = 3 * LaunchRing::kSlots;  // two ops per launch
  for (uint32_t i = 1; i <= n; ++i) {
    app.Kernel(i, "_Z1kv", {1, 1, 1}, {32, 1, 1});
    app.Exit(kExitLaunchEnd);
  }
  EXPECT_GE(f.loss.launch_ring_full_drains.load(), 5u);
  f.tracker.Drain();
  ASSERT_EQ(f.sink.launches.size(), n);
  for (uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(f.sink.launches[i].correlation_id, i + 1);
    ASSERT_EQ(f.sink.launches[i].key.ordinal, i);
  }
  EXPECT_EQ(f.tracker.pending_keys(), n);
}

// A range path too long for the ring goes the slow way, in order.
TEST(LaunchTracker, PathLongerThanTheRingIsAppliedInOrder) {
  Fixture f;
  App app(&f.tracker, &f.names, 5);
  app.Kernel(1, "_Z1kv", {1, 1, 1}, {32, 1, 1});
  app.Exit(kExitLaunchEnd);
  const std::string long_name(LaunchRing::kMaxOpBytes, 'r');
  app.stack.Push("", long_name);
  app.Kernel(2, "_Z1kv", {1, 1, 1}, {32, 1, 1});
  app.Exit(kExitLaunchEnd);
  f.tracker.Drain();
  ASSERT_EQ(f.sink.launches.size(), 2u);
  EXPECT_EQ(f.sink.S(f.sink.launches[0].key.path), "");
  EXPECT_EQ(f.sink.S(f.sink.launches[1].key.path), long_name + "#0");
  EXPECT_EQ(f.sink.launches[1].key.ordinal, 0u);
}

// An op of several slots never wraps around the ring's end: the producer pads
// to the start, the consumer skips the padding.
TEST(LaunchTracker, MultiSlotOpAtTheRingsEndIsPaddedToTheStart) {
  Fixture f;
  App app(&f.tracker, &f.names, 5);
  const uint32_t n = (LaunchRing::kSlots - 4) / 2;  // + the first PathOp + one alias: 2 slots short of the end
  for (uint32_t i = 1; i <= n; ++i) {
    app.Kernel(i, "_Z1kv", {1, 1, 1}, {32, 1, 1});
    if (i == 1) app.Alias(100000);
    app.Exit(kExitLaunchEnd);
  }
  f.tracker.Drain();  // empty, head 2 slots before the end
  EXPECT_EQ(f.sink.launches.size(), n);
  const std::string name(200, 'r');  // a PathOp of 4 slots
  app.stack.Push("", name);
  app.Kernel(n + 1, "_Z1kv", {1, 1, 1}, {32, 1, 1});
  app.Exit(kExitLaunchEnd);
  f.tracker.Drain();
  ASSERT_EQ(f.sink.launches.size(), n + 1);
  EXPECT_EQ(f.sink.S(f.sink.launches[n].key.path), name + "#0");
  EXPECT_EQ(f.sink.launches[n].correlation_id, n + 1);
  EXPECT_EQ(f.loss.launch_ring_full_drains.load(), 0u);
}

// A thread's ring is freed once the thread closed it and its ops are applied.
TEST(LaunchTracker, ClosedRingsAreFreedAfterTheirOps) {
  Fixture f;
  std::thread([&] {
    App app(&f.tracker, &f.names, 9);
    app.Kernel(1, "_Z1kv", {1, 1, 1}, {32, 1, 1});
    app.Exit(kExitLaunchEnd);
    app.ring->Close();
  }).join();
  EXPECT_EQ(f.tracker.rings(), 1u);
  f.tracker.Drain();
  EXPECT_EQ(f.tracker.rings(), 0u);
  EXPECT_EQ(f.sink.launches.size(), 1u);
}

// Application threads launch (with nested calls) while a consumer resolves:
// every launch is resolved exactly once to its own key, rings of exited
// threads go away (run under TSan too).
TEST(LaunchTracker, ManyProducersAndAConcurrentConsumer) {
  constexpr uint32_t kThreads = 6, kPerThread = 20000;
  Fixture f;
  const StringId kernel = f.sink.Intern("_Z1kv");
  std::atomic<uint32_t> exited{0};
  std::vector<std::thread> producers;
  for (uint32_t t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      App app(&f.tracker, &f.names, 100 + t);
      app.stack.Push("", "thread");
      for (uint32_t i = 0; i < kPerThread; ++i) {
        const uint32_t id = 1 + t * kPerThread * 2 + 2 * i;  // odd: the launch; even: its nested alias
        app.Kernel(id, "_Z1kv", {1 + t, 1, 1}, {32, 1, 1});
        if (i % 3 == 0) app.Alias(id + 1);
        app.Exit(kExitLaunchEnd);
      }
      app.ring->Close();
      exited.fetch_add(1, std::memory_order_release);
    });
  }
  uint64_t resolved = 0, wrong = 0;
  std::vector<bool> done(kThreads * kPerThread, false);
  for (;;) {
    const bool all_pushed = exited.load(std::memory_order_acquire) == kThreads;
    const uint64_t before = resolved;
    for (uint32_t t = 0; t < kThreads; ++t) {
      for (uint32_t i = 0; i < kPerThread; ++i) {
        const uint32_t slot = t * kPerThread + i;
        if (done[slot]) continue;
        const uint32_t id = 1 + t * kPerThread * 2 + 2 * i;
        const uint32_t asked = (i % 3 == 0 && i % 2 == 0) ? id + 1 : id;  // records carry the alias half the time
        LaunchKey k{};
        if (f.tracker.Resolve(asked, 0, kernel, &k) == PendingLaunches::Match::kExact) {
          done[slot] = true;
          ++resolved;
          wrong += k.hash != LaunchKeyHash("thread#0", "_Z1kv", i, {1 + t, 1, 1}, {32, 1, 1});
        }
      }
    }
    if (resolved == uint64_t{kThreads} * kPerThread) break;
    // Every op was queued before this sweep began, yet some launch is unknown: lost.
    if (all_pushed && resolved == before) break;
  }
  EXPECT_EQ(resolved, uint64_t{kThreads} * kPerThread) << "launches lost";
  for (auto& th : producers) th.join();
  f.tracker.Drain();
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(f.tracker.pending_keys(), 0u);
  EXPECT_EQ(f.tracker.evicted_keys(), 0u);
  EXPECT_EQ(f.sink.launches.size(), uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(f.tracker.rings(), 0u);
}

// Graph exec references held by queued ops are released when the tracker
// goes away with ops still queued.
TEST(LaunchTracker, QueuedGraphOpsReleaseTheirExecs) {
  std::weak_ptr<GraphExecInfo> weak;
  {
    Fixture f;
    App app(&f.tracker, &f.names, 5);
    auto exec = MakeExec(f.sink, {{"_Z1av", 1}});
    weak = exec;
    app.Graph(1, std::move(exec));
    EXPECT_FALSE(weak.expired());
  }
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace twinscope::cupti
