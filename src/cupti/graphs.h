// Executable CUDA graphs, learned at instantiation.
//
// CUPTI's resource callbacks (on the instantiating application thread) report
// GRAPHEXEC_CREATE_STARTING, then one GRAPHNODE_CLONED per node copied into the
// executable graph, then GRAPHEXEC_CREATED. At CREATED we walk the source
// graph with the driver API (kernel nodes in cuGraphGetNodes order, child
// graphs recursively) and map both the original and the cloned CUPTI node ids
// to each kernel node, because kernel activity records carry the clone's id.
// Launch callbacks look execs up by handle. Thread-safe.
#pragma once

#include <cuda.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "cupti/graph_exec.h"

namespace twinscope::cupti {

class GraphRegistry {
 public:
  using InternFn = std::function<StringId(std::string_view)>;
  explicit GraphRegistry(InternFn intern) : intern_(std::move(intern)) {}

  void OnExecCreateStarting();
  void OnNodeCloned(CUgraphNode original, CUgraphNode clone);
  // Returns the new exec's info; `complete` is false if its nodes could not
  // all be inspected (its launches then count as unknown).
  std::shared_ptr<const GraphExecInfo> OnExecCreated(CUgraph graph, CUgraphExec exec, bool* complete);
  void OnExecDestroyStarting(CUgraphExec exec);

  std::shared_ptr<const GraphExecInfo> Find(CUgraphExec exec) const;
  // Changes whenever an exec is created or destroyed: a Find() result may be
  // reused while it stays the same (read it before calling Find).
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  bool Walk(CUgraph graph, int depth, GraphExecInfo* info);

  InternFn intern_;
  mutable std::mutex mu_;
  std::unordered_map<CUgraphExec, std::shared_ptr<const GraphExecInfo>> execs_;
  std::atomic<uint64_t> generation_{1};
};

}  // namespace twinscope::cupti
