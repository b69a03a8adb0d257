#include "cupti/pending_launches.h"

namespace twinscope::cupti {

PendingLaunches::PendingLaunches(size_t max_keys) : max_keys_(max_keys ? max_keys : 1) {}

void PendingLaunches::AddPlain(uint32_t correlation_id, const LaunchKey& key, StringId kernel) {
  auto e = std::make_shared<Entry>();
  e->keys.push_back(key);
  e->used.push_back(false);
  e->kernel = kernel;
  e->remaining = 1;
  Insert(correlation_id, std::move(e));
}

void PendingLaunches::Alias(uint32_t alias, uint32_t correlation_id) {
  if (alias == correlation_id) return;
  auto it = by_id_.find(correlation_id);
  if (it == by_id_.end()) return;
  std::shared_ptr<Entry> e = it->second;
  if (auto old = by_id_.find(alias); old != by_id_.end() && old->second != e) {
    evicted_ += old->second->remaining;
    Erase(std::shared_ptr<Entry>(old->second));
  }
  e->ids.push_back(alias);
  by_id_[alias] = e;
}

void PendingLaunches::Remove(uint32_t correlation_id) {
  auto it = by_id_.find(correlation_id);
  if (it != by_id_.end()) Erase(std::shared_ptr<Entry>(it->second));
}

void PendingLaunches::Insert(uint32_t correlation_id, std::shared_ptr<Entry> e) {
  if (auto old = by_id_.find(correlation_id); old != by_id_.end()) {
    // A wrapped-around correlation id: the old launch's records never came.
    evicted_ += old->second->remaining;
    Erase(std::shared_ptr<Entry>(old->second));
  }
  while (!order_.empty() && keys_ + e->remaining > max_keys_) {
    std::shared_ptr<Entry> oldest = order_.front();
    evicted_ += oldest->remaining;
    Erase(oldest);
  }
  e->ids.push_back(correlation_id);
  keys_ += e->remaining;
  order_.push_back(e);
  e->order = std::prev(order_.end());
  by_id_[correlation_id] = std::move(e);
}

void PendingLaunches::Erase(const std::shared_ptr<Entry>& e) {
  for (uint32_t id : e->ids) {
    auto it = by_id_.find(id);
    if (it != by_id_.end() && it->second == e) by_id_.erase(it);
  }
  keys_ -= e->remaining;
  e->remaining = 0;
  order_.erase(e->order);
}

void PendingLaunches::AddGraph(uint32_t correlation_id, std::shared_ptr<const GraphExecInfo> exec,
                               std::vector<LaunchKey> keys) {
  if (keys.empty()) return;
  auto e = std::make_shared<Entry>();
  e->exec = std::move(exec);
  e->used.assign(keys.size(), false);
  e->remaining = keys.size();
  e->keys = std::move(keys);
  Insert(correlation_id, std::move(e));
}

void PendingLaunches::TakeKey(const std::shared_ptr<Entry>& e, size_t index) {
  e->used[index] = true;
  e->remaining--;
  keys_--;
  if (e->remaining == 0) Erase(e);
}

PendingLaunches::Match PendingLaunches::Resolve(uint32_t correlation_id, uint64_t graph_node_id, StringId kernel,
                                                LaunchKey* key) {
  auto it = by_id_.find(correlation_id);
  if (it == by_id_.end()) return Match::kNone;
  std::shared_ptr<Entry> e = it->second;
  if (!e->exec) {
    *key = e->keys[0];
    bool same_name = kernel == 0 || e->kernel == 0 || kernel == e->kernel;
    TakeKey(e, 0);
    return same_name ? Match::kExact : Match::kFallback;
  }
  const auto& kernels = e->exec->kernels;
  if (auto n = e->exec->index_by_node_id.find(graph_node_id); n != e->exec->index_by_node_id.end()) {
    size_t i = n->second;
    if (i < e->keys.size() && !e->used[i]) {
      *key = e->keys[i];
      TakeKey(e, i);
      return Match::kExact;
    }
  }
  if (e->exec->exec_id != 0 && (graph_node_id >> 32) == e->exec->exec_id) {
    auto n = e->exec->index_by_node_index.find(static_cast<uint32_t>(graph_node_id));
    if (n != e->exec->index_by_node_index.end()) {
      size_t i = n->second;
      if (i < e->keys.size() && !e->used[i] && kernels[i].name_id == kernel) {
        *key = e->keys[i];
        TakeKey(e, i);
        return Match::kExact;
      }
    }
  }
  // Unknown node id (or one seen twice): the first unused node of that kernel.
  for (size_t i = 0; i < e->keys.size() && i < kernels.size(); ++i) {
    if (!e->used[i] && kernels[i].name_id == kernel) {
      *key = e->keys[i];
      TakeKey(e, i);
      return Match::kFallback;
    }
  }
  return Match::kNone;
}

}  // namespace twinscope::cupti
