#include "cupti/launch_tracker.h"

#include <cstring>
#include <new>
#include <thread>

#include "launchkey/launch_key.h"

namespace twinscope::cupti {

const KernelName* KernelNames::Get(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = names_.find(name);
  if (it != names_.end()) return it->second.get();
  auto n = std::make_unique<KernelName>();
  n->name = std::string(name);
  n->id = name.empty() ? 0 : intern_(name);
  const KernelName* p = n.get();
  names_.emplace(n->name, std::move(n));
  return p;
}

LaunchTracker::LaunchTracker(const LaunchTrackerOptions& options, LaunchSink* sink, LossCounters* loss)
    : options_(options), sink_(sink), loss_(loss), pending_(options.max_pending_keys) {}

LaunchTracker::~LaunchTracker() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& p : producers_) Discard(p->ring.get());
}

void LaunchTracker::Discard(LaunchRing* ring) {
  ring->Drain(SlotsOf, [](const unsigned char* op) {
    if (op[0] == kOpGraph) std::launder(reinterpret_cast<GraphOp*>(const_cast<unsigned char*>(op)))->~GraphOp();
  });
}

LaunchRing* LaunchTracker::NewRing(uint64_t thread_id) {
  auto p = std::make_unique<Producer>();
  p->ring = std::make_unique<LaunchRing>(thread_id);
  LaunchRing* ring = p->ring.get();
  std::lock_guard<std::mutex> lock(mu_);
  producers_.push_back(std::move(p));
  return ring;
}

void LaunchTracker::PushGraph(LaunchRing* ring, GraphOp&& op) {
  auto construct = [&](void* dst) { new (dst) GraphOp(std::move(op)); };
  Queue(ring, [&] { return ring->Emplace(sizeof(GraphOp), construct); });
}

void LaunchTracker::PushPath(LaunchRing* ring, const RangeStack& stack) {
  const std::string& path = stack.path();
  const size_t frames = stack.frame_count();
  const size_t bytes = sizeof(PathOp) + frames * sizeof(uint64_t) + path.size();
  auto construct = [&](void* dst) {
    auto* out = static_cast<unsigned char*>(dst);
    PathOp h;
    h.slots = static_cast<uint32_t>((bytes + LaunchRing::kSlotBytes - 1) / LaunchRing::kSlotBytes);
    h.frames = static_cast<uint32_t>(frames);
    h.path_bytes = static_cast<uint32_t>(path.size());
    std::memcpy(out, &h, sizeof h);
    out += sizeof h;
    for (size_t i = 0; i < frames; ++i) {
      const uint64_t s = stack.frame_serial(i);
      std::memcpy(out, &s, sizeof s);
      out += sizeof s;
    }
    std::memcpy(out, path.data(), path.size());
  };
  if (bytes <= LaunchRing::kMaxOpBytes) {
    Queue(ring, [&] { return ring->Emplace(bytes, construct); });
    return;
  }
  // A path too long for the ring (tens of KiB): applied here, after this
  // thread's queued ops, so the order holds.
  std::lock_guard<std::mutex> lock(mu_);
  DrainLocked();
  path_scratch_.resize(bytes);
  construct(path_scratch_.data());
  for (auto& p : producers_)
    if (p->ring.get() == ring) ApplyPath(*p, path_scratch_.data());
}

void LaunchTracker::MakeRoom(LaunchRing* ring) {
  loss_->launch_ring_full_drains.fetch_add(1, std::memory_order_relaxed);
  // Apply the queued ops here, unless a consumer holds the lock: then it is
  // draining (every ring, this one too), and waiting for room is enough. (A
  // plain lock() could starve behind a consumer that takes it back at once.)
  for (;;) {
    if (mu_.try_lock()) {
      DrainLocked();
      mu_.unlock();
      return;
    }
    if (ring->size() <= LaunchRing::kSlots / 2) return;  // room for the largest op and its padding
    std::this_thread::yield();
  }
}

void LaunchTracker::Drain() {
  std::lock_guard<std::mutex> lock(mu_);
  DrainLocked();
}

size_t LaunchTracker::SlotsOf(const unsigned char* op) {
  if (op[0] != kOpPath) return 1;
  PathOp h;
  std::memcpy(&h, op, sizeof h);
  return h.slots;
}

void LaunchTracker::DrainLocked() {
  for (size_t i = 0; i < producers_.size();) {
    Producer& p = *producers_[i];
    p.ring->Drain(SlotsOf, [&](const unsigned char* op) { ApplyLocked(p, op); });
    if (p.ring->Finished()) {      // closed and empty: nothing can follow
      if (p.open) CloseLaunch(p);  // its exit never came (the thread ended inside a launch)
      producers_.erase(producers_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    ++i;
  }
}

LaunchKey LaunchTracker::KeyLocked(Producer& p, StringId kernel, std::string_view name, Dim3 grid, Dim3 block) {
  if (options_.skip_key) return LaunchKey{};
  if (p.frames.empty()) p.frames.push_back(MirrorFrame{0, {}});  // no PathOp yet: the root, path ""
  const uint32_t ordinal = p.frames.back().kernel_counts[name.empty() ? 0 : kernel]++;
  if (!p.path_interned) {
    p.path_id = p.path.empty() ? 0 : sink_->InternPath(p.path);
    p.path_interned = true;
  }
  return LaunchKey{LaunchKeyHash(p.path, name, ordinal, grid, block), p.path_id, ordinal};
}

void LaunchTracker::ApplyPath(Producer& p, const unsigned char* op) {
  PathOp h;
  std::memcpy(&h, op, sizeof h);
  const unsigned char* serials = op + sizeof h;
  auto serial = [&](size_t i) {
    uint64_t s;
    std::memcpy(&s, serials + i * sizeof s, sizeof s);
    return s;
  };
  // Frames no longer open are gone for good (serials are never reused): keep
  // the common outer part with its counts, start the new inner ones at zero.
  size_t keep = 0;
  while (keep < p.frames.size() && keep < h.frames && p.frames[keep].serial == serial(keep)) ++keep;
  p.frames.resize(keep);
  for (size_t i = keep; i < h.frames; ++i) p.frames.push_back(MirrorFrame{serial(i), {}});
  p.path.assign(reinterpret_cast<const char*>(serials + h.frames * sizeof(uint64_t)), h.path_bytes);
  p.path_interned = false;
}

void LaunchTracker::ApplyLocked(Producer& p, const unsigned char* op) {
  switch (op[0]) {
    case kOpKernel: {
      KernelOp k;
      std::memcpy(&k, op, sizeof k);
      const std::string_view name = k.name ? std::string_view(k.name->name) : std::string_view();
      const StringId kernel = k.name ? k.name->id : 0;
      LaunchRecord r = OpenLaunch(p, k.correlation_id, k.cpu_ns, k.device, k.stream);
      p.registered = true;
      r.kernel = kernel;
      r.grid = k.grid;
      r.block = k.block;
      r.cluster = k.cluster;
      r.key = KeyLocked(p, kernel, name, k.grid, k.block);
      p.records.push_back(r);
      if (!options_.skip_pending) pending_.AddPlain(k.correlation_id, r.key, kernel);
      return;
    }
    case kOpGraph: {
      auto* g = std::launder(reinterpret_cast<GraphOp*>(const_cast<unsigned char*>(op)));
      std::shared_ptr<const GraphExecInfo> exec = std::move(g->exec);
      const GraphOp k = *g;  // exec moved out
      g->~GraphOp();
      LaunchRecord base = OpenLaunch(p, k.correlation_id, k.cpu_ns, k.device, k.stream);
      p.graph = true;
      p.unknown_graph = !exec || !exec->complete;
      p.registered = exec != nullptr;
      if (!exec) return;
      base.graph_exec_id = exec->exec_id;
      base.flags = kFlagGraph;
      std::vector<LaunchKey> keys;
      keys.reserve(exec->kernels.size());
      for (const GraphKernelNode& node : exec->kernels) {
        LaunchRecord r = base;
        r.key = KeyLocked(p, node.name_id, node.name, node.grid, node.block);
        r.kernel = node.name_id;
        r.grid = node.grid;
        r.block = node.block;
        keys.push_back(r.key);
        p.records.push_back(r);
      }
      pending_.AddGraph(k.correlation_id, std::move(exec), std::move(keys));
      return;
    }
    case kOpAlias: {
      AliasOp a;
      std::memcpy(&a, op, sizeof a);
      if (p.open && p.registered) pending_.Alias(a.alias, p.correlation_id);
      return;
    }
    case kOpExit: {
      ExitOp e;
      std::memcpy(&e, op, sizeof e);
      ApplyExit(p, e);
      return;
    }
    case kOpPath:
      ApplyPath(p, op);
      return;
    default:
      return;
  }
}

void LaunchTracker::ApplyExit(Producer& p, const ExitOp& e) {
  if (e.flags & kExitLaunchEnd) {
    if (e.flags & kExitCaptured) {
      loss_->launches_during_capture.fetch_add(1, std::memory_order_relaxed);
    } else if (e.flags & kExitFailed) {
      if (p.open && p.registered) pending_.Remove(p.correlation_id);
      p.open = false;
      p.records.clear();
      loss_->launches_failed.fetch_add(1, std::memory_order_relaxed);
    } else if (p.open) {
      CloseLaunch(p);
    }
  }
  if (e.flags & kExitApiRecord) {
    ApiRecord r{};
    r.start_ns = e.start_ns;
    r.end_ns = e.end_ns;
    r.thread_id = p.ring->thread_id();
    r.correlation_id = e.correlation_id;
    r.domain = e.domain;
    r.cbid = e.cbid;
    r.name = e.name;
    sink_->WriteApi(r);
    loss_->api_records.fetch_add(1, std::memory_order_relaxed);
  }
}

// A launch's enter op: it becomes the thread's open launch (closing one
// whose exit never came). Returns the common part of its LaunchRecords.
LaunchRecord LaunchTracker::OpenLaunch(Producer& p, uint32_t correlation_id, uint64_t cpu_ns, uint16_t device,
                                       uint32_t stream) {
  if (p.open) CloseLaunch(p);
  p.open = true;
  p.registered = p.graph = p.unknown_graph = false;
  p.correlation_id = correlation_id;
  p.records.clear();
  LaunchRecord r{};
  r.cpu_ns = cpu_ns;
  r.thread_id = p.ring->thread_id();
  r.correlation_id = correlation_id;
  r.device = device;
  r.stream = stream;
  return r;
}

// The open launch ran: number its records, write them, count it.
void LaunchTracker::CloseLaunch(Producer& p) {
  p.open = false;
  if (p.graph) {
    loss_->graph_launches.fetch_add(1, std::memory_order_relaxed);
    if (p.unknown_graph) loss_->graph_launches_unknown_exec.fetch_add(1, std::memory_order_relaxed);
  }
  for (LaunchRecord& r : p.records) r.seq = launch_seq_++;
  if (!p.records.empty()) sink_->WriteLaunches(p.records.data(), p.records.size());
  // Counted once appended, so a STATUS never counts a launch that is not before it in the file.
  loss_->launches_seen.fetch_add(p.records.size(), std::memory_order_release);
  p.records.clear();
}

PendingLaunches::Match LaunchTracker::Resolve(uint32_t correlation_id, uint64_t graph_node_id, StringId kernel,
                                              LaunchKey* key) {
  std::lock_guard<std::mutex> lock(mu_);
  PendingLaunches::Match m = pending_.Resolve(correlation_id, graph_node_id, kernel, key);
  if (m != PendingLaunches::Match::kNone) return m;
  // Not applied yet? (Records come long after their launch, so this is rare.)
  DrainLocked();
  return pending_.Resolve(correlation_id, graph_node_id, kernel, key);
}

size_t LaunchTracker::pending_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  DrainLocked();
  return pending_.pending_keys();
}

uint64_t LaunchTracker::evicted_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  DrainLocked();
  return pending_.evicted_keys();
}

size_t LaunchTracker::rings() {
  std::lock_guard<std::mutex> lock(mu_);
  return producers_.size();
}

}  // namespace twinscope::cupti
