// Launch keys waiting for their kernel activity records.
//
// The collector's launch tracker (launch_tracker.h) adds the keys of one
// launch under its CUPTI correlation id when it applies the launch's ops; the
// buffer processing takes them back out when the kernel records arrive: by
// correlation id, and for graph launches by graph node id within it. Bounded:
// past `max_keys` unresolved keys the oldest launches are evicted and counted,
// so a launch whose records never come cannot grow memory. Not thread-safe:
// the tracker's lock serializes every call.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "cupti/graph_exec.h"
#include "twinscope/records.h"

namespace twinscope::cupti {

class PendingLaunches {
 public:
  explicit PendingLaunches(size_t max_keys);
  PendingLaunches(const PendingLaunches&) = delete;
  PendingLaunches& operator=(const PendingLaunches&) = delete;

  void AddPlain(uint32_t correlation_id, const LaunchKey& key, StringId kernel);
  // `keys[i]` belongs to exec->kernels[i].
  void AddGraph(uint32_t correlation_id, std::shared_ptr<const GraphExecInfo> exec, std::vector<LaunchKey> keys);
  // Records may also carry `alias` (a nested driver call of the same launch).
  void Alias(uint32_t alias, uint32_t correlation_id);
  // The launch failed or never reached the GPU: forget it.
  void Remove(uint32_t correlation_id);

  enum class Match {
    kExact,     // correlation id (+ graph node id) identify the launch
    kFallback,  // tied by correlation id and kernel name only
    kNone,      // no pending launch fits
  };
  Match Resolve(uint32_t correlation_id, uint64_t graph_node_id, StringId kernel, LaunchKey* key);

  size_t pending_keys() const { return keys_; }
  uint64_t evicted_keys() const { return evicted_; }

 private:
  struct Entry {
    std::vector<uint32_t> ids;                  // correlation id and its aliases
    std::shared_ptr<const GraphExecInfo> exec;  // null for a plain launch
    std::vector<LaunchKey> keys;
    std::vector<bool> used;
    StringId kernel = 0;  // plain launch
    size_t remaining = 0;
    std::list<std::shared_ptr<Entry>>::iterator order;
  };
  void Insert(uint32_t correlation_id, std::shared_ptr<Entry> e);
  void Erase(const std::shared_ptr<Entry>& e);
  void TakeKey(const std::shared_ptr<Entry>& e, size_t index);

  const size_t max_keys_;
  std::unordered_map<uint32_t, std::shared_ptr<Entry>> by_id_;
  std::list<std::shared_ptr<Entry>> order_;  // oldest first
  size_t keys_ = 0;
  uint64_t evicted_ = 0;
};

}  // namespace twinscope::cupti
