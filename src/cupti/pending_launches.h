// Launch keys waiting for their kernel activity records.
//
// A launch callback (application thread) adds the keys of one launch under
// its CUPTI correlation id; the buffer-completion path (CUPTI's thread) takes
// them back out when the kernel records arrive: by correlation id, and for
// graph launches by graph node id within it. Bounded: past `max_keys`
// unresolved keys the oldest launches are evicted and counted, so a launch
// whose records never come cannot grow memory. Thread-safe.
//
// The application thread's side is cheap: AddPlain, Alias and Remove write one
// small op into the calling thread's own single-producer ring (no lock, no
// allocation: the lock and the map are what cost ~1 us per eager launch on the
// H200 when CUPTI's thread resolved records at the same time). The consumer
// side (Resolve, the counts, AddGraph) holds mu_ and first applies every
// thread's queued ops, in each thread's order. A full ring falls back to
// taking mu_ and draining.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cupti/graph_exec.h"
#include "twinscope/records.h"

namespace twinscope::cupti {

class PendingLaunches {
 public:
  explicit PendingLaunches(size_t max_keys);
  ~PendingLaunches();
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

  size_t pending_keys();
  uint64_t evicted_keys();

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
  // An application thread's queued AddPlain / Alias / Remove.
  struct Op {
    enum Kind : uint32_t { kAddPlain, kAlias, kRemove } kind;
    uint32_t correlation_id;
    uint32_t other;  // kAlias: the launch's correlation id; kAddPlain: the kernel name
    LaunchKey key;   // kAddPlain
  };
  // One producer (its thread), one consumer (whoever holds mu_).
  struct OpRing {
    static constexpr uint64_t kSize = 4096;
    std::atomic<uint64_t> head{0};  // next op the producer writes
    std::atomic<uint64_t> tail{0};  // next op the consumer reads
    Op ops[kSize];
  };
  OpRing* ThreadRing();
  void Push(const Op& op);
  void DrainLocked();
  void ApplyLocked(const Op& op);
  void InsertLocked(uint32_t correlation_id, std::shared_ptr<Entry> e);
  void EraseLocked(const std::shared_ptr<Entry>& e);
  void TakeKeyLocked(const std::shared_ptr<Entry>& e, size_t index);

  const size_t max_keys_;
  const uint64_t instance_;  // tells this object's rings apart in thread-local memos
  std::mutex mu_;
  std::mutex rings_mu_;                         // registration of rings (after mu_ if both)
  std::vector<std::unique_ptr<OpRing>> rings_;  // one per producing thread, kept until destruction
  std::unordered_map<uint32_t, std::shared_ptr<Entry>> by_id_;
  std::list<std::shared_ptr<Entry>> order_;  // oldest first
  size_t keys_ = 0;
  uint64_t evicted_ = 0;
};

}  // namespace twinscope::cupti
