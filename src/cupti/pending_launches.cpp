#include "cupti/pending_launches.h"

namespace twinscope::cupti {

namespace {
std::atomic<uint64_t> g_instances{0};

// This thread's ring for one PendingLaunches (the collector has one; tests make
// several in turn). Trivially destructible, so usable during exit.
struct ThreadRingMemo {
  uint64_t instance;
  void* ring;
};
thread_local ThreadRingMemo t_ring{0, nullptr};
}  // namespace

PendingLaunches::PendingLaunches(size_t max_keys)
    : max_keys_(max_keys ? max_keys : 1), instance_(g_instances.fetch_add(1) + 1) {}

PendingLaunches::~PendingLaunches() = default;

PendingLaunches::OpRing* PendingLaunches::ThreadRing() {
  if (t_ring.instance == instance_) return static_cast<OpRing*>(t_ring.ring);
  auto ring = std::make_unique<OpRing>();
  OpRing* r = ring.get();
  {
    std::lock_guard<std::mutex> lock(rings_mu_);
    rings_.push_back(std::move(ring));
  }
  t_ring = ThreadRingMemo{instance_, r};
  return r;
}

void PendingLaunches::Push(const Op& op) {
  OpRing* r = ThreadRing();
  const uint64_t head = r->head.load(std::memory_order_relaxed);
  if (head - r->tail.load(std::memory_order_acquire) >= OpRing::kSize) {
    // Full: make room by applying every queued op (this thread's first), then this one.
    std::lock_guard<std::mutex> lock(mu_);
    DrainLocked();
    ApplyLocked(op);
    return;
  }
  r->ops[head % OpRing::kSize] = op;
  r->head.store(head + 1, std::memory_order_release);
}

void PendingLaunches::DrainLocked() {
  std::lock_guard<std::mutex> lock(rings_mu_);  // ApplyLocked never takes it
  for (const auto& ring : rings_) {
    OpRing* r = ring.get();
    uint64_t tail = r->tail.load(std::memory_order_relaxed);
    const uint64_t head = r->head.load(std::memory_order_acquire);
    for (; tail != head; ++tail) ApplyLocked(r->ops[tail % OpRing::kSize]);
    r->tail.store(tail, std::memory_order_release);
  }
}

void PendingLaunches::ApplyLocked(const Op& op) {
  switch (op.kind) {
    case Op::kAddPlain: {
      auto e = std::make_shared<Entry>();
      e->keys.push_back(op.key);
      e->used.push_back(false);
      e->kernel = op.other;
      e->remaining = 1;
      InsertLocked(op.correlation_id, std::move(e));
      return;
    }
    case Op::kAlias: {
      const uint32_t alias = op.correlation_id, correlation_id = op.other;
      if (alias == correlation_id) return;
      auto it = by_id_.find(correlation_id);
      if (it == by_id_.end()) return;
      std::shared_ptr<Entry> e = it->second;
      if (auto old = by_id_.find(alias); old != by_id_.end() && old->second != e) {
        evicted_ += old->second->remaining;
        EraseLocked(std::shared_ptr<Entry>(old->second));
      }
      e->ids.push_back(alias);
      by_id_[alias] = e;
      return;
    }
    case Op::kRemove: {
      auto it = by_id_.find(op.correlation_id);
      if (it != by_id_.end()) EraseLocked(std::shared_ptr<Entry>(it->second));
      return;
    }
  }
}

void PendingLaunches::InsertLocked(uint32_t correlation_id, std::shared_ptr<Entry> e) {
  if (auto old = by_id_.find(correlation_id); old != by_id_.end()) {
    // A wrapped-around correlation id: the old launch's records never came.
    evicted_ += old->second->remaining;
    EraseLocked(std::shared_ptr<Entry>(old->second));
  }
  while (!order_.empty() && keys_ + e->remaining > max_keys_) {
    std::shared_ptr<Entry> oldest = order_.front();
    evicted_ += oldest->remaining;
    EraseLocked(oldest);
  }
  e->ids.push_back(correlation_id);
  keys_ += e->remaining;
  order_.push_back(e);
  e->order = std::prev(order_.end());
  by_id_[correlation_id] = std::move(e);
}

void PendingLaunches::EraseLocked(const std::shared_ptr<Entry>& e) {
  for (uint32_t id : e->ids) {
    auto it = by_id_.find(id);
    if (it != by_id_.end() && it->second == e) by_id_.erase(it);
  }
  keys_ -= e->remaining;
  e->remaining = 0;
  order_.erase(e->order);
}

void PendingLaunches::AddPlain(uint32_t correlation_id, const LaunchKey& key, StringId kernel) {
  Push(Op{Op::kAddPlain, correlation_id, kernel, key});
}

void PendingLaunches::AddGraph(uint32_t correlation_id, std::shared_ptr<const GraphExecInfo> exec,
                               std::vector<LaunchKey> keys) {
  if (keys.empty()) return;
  auto e = std::make_shared<Entry>();
  e->exec = std::move(exec);
  e->used.assign(keys.size(), false);
  e->remaining = keys.size();
  e->keys = std::move(keys);
  std::lock_guard<std::mutex> lock(mu_);
  DrainLocked();  // this thread's earlier ops first
  InsertLocked(correlation_id, std::move(e));
}

void PendingLaunches::Alias(uint32_t alias, uint32_t correlation_id) {
  if (alias != correlation_id) Push(Op{Op::kAlias, alias, correlation_id, LaunchKey{}});
}

void PendingLaunches::Remove(uint32_t correlation_id) { Push(Op{Op::kRemove, correlation_id, 0, LaunchKey{}}); }

void PendingLaunches::TakeKeyLocked(const std::shared_ptr<Entry>& e, size_t index) {
  e->used[index] = true;
  e->remaining--;
  keys_--;
  if (e->remaining == 0) EraseLocked(e);
}

PendingLaunches::Match PendingLaunches::Resolve(uint32_t correlation_id, uint64_t graph_node_id, StringId kernel,
                                                LaunchKey* key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(correlation_id);
  if (it == by_id_.end()) {
    // Not applied yet? (Records come long after their launch, so this is rare.)
    DrainLocked();
    it = by_id_.find(correlation_id);
    if (it == by_id_.end()) return Match::kNone;
  }
  std::shared_ptr<Entry> e = it->second;
  if (!e->exec) {
    *key = e->keys[0];
    bool same_name = kernel == 0 || e->kernel == 0 || kernel == e->kernel;
    TakeKeyLocked(e, 0);
    return same_name ? Match::kExact : Match::kFallback;
  }
  const auto& kernels = e->exec->kernels;
  if (auto n = e->exec->index_by_node_id.find(graph_node_id); n != e->exec->index_by_node_id.end()) {
    size_t i = n->second;
    if (i < e->keys.size() && !e->used[i]) {
      *key = e->keys[i];
      TakeKeyLocked(e, i);
      return Match::kExact;
    }
  }
  if (e->exec->exec_id != 0 && (graph_node_id >> 32) == e->exec->exec_id) {
    auto n = e->exec->index_by_node_index.find(static_cast<uint32_t>(graph_node_id));
    if (n != e->exec->index_by_node_index.end()) {
      size_t i = n->second;
      if (i < e->keys.size() && !e->used[i] && kernels[i].name_id == kernel) {
        *key = e->keys[i];
        TakeKeyLocked(e, i);
        return Match::kExact;
      }
    }
  }
  // Unknown node id (or one seen twice): the first unused node of that kernel.
  for (size_t i = 0; i < e->keys.size() && i < kernels.size(); ++i) {
    if (!e->used[i] && kernels[i].name_id == kernel) {
      *key = e->keys[i];
      TakeKeyLocked(e, i);
      return Match::kFallback;
    }
  }
  return Match::kNone;
}

size_t PendingLaunches::pending_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  DrainLocked();
  return keys_;
}

uint64_t PendingLaunches::evicted_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  DrainLocked();
  return evicted_;
}

}  // namespace twinscope::cupti
