#include "cupti/graphs.h"

#include <vector>

#include "cupti/cupti_api.h"
#include "cupti/cupti_check.h"

namespace twinscope::cupti {

namespace {

constexpr int kMaxGraphDepth = 16;

// Original node id -> clone id, for the instantiation running on this thread.
struct CloneCapture {
  bool active = false;
  std::unordered_map<uint64_t, uint64_t> clone_of;
};
thread_local CloneCapture t_clones;

}  // namespace

void GraphRegistry::OnExecCreateStarting() {
  t_clones.active = true;
  t_clones.clone_of.clear();
}

void GraphRegistry::OnNodeCloned(CUgraphNode original, CUgraphNode clone) {
  if (!t_clones.active || !original || !clone) return;
  uint64_t o = 0, c = 0;
  if (CUPTI_CHECK(Cupti().GetGraphNodeId(original, &o)) && CUPTI_CHECK(Cupti().GetGraphNodeId(clone, &c)))
    t_clones.clone_of[o] = c;
}

bool GraphRegistry::Walk(CUgraph graph, int depth, GraphExecInfo* info) {
  const DriverApi& d = Driver();
  if (depth > kMaxGraphDepth || !d.GraphGetNodes || !d.GraphNodeGetType || !d.GraphKernelNodeGetParams) return false;
  size_t n = 0;
  if (d.GraphGetNodes(graph, nullptr, &n) != CUDA_SUCCESS) return false;
  std::vector<CUgraphNode> nodes(n);
  if (n && d.GraphGetNodes(graph, nodes.data(), &n) != CUDA_SUCCESS) return false;
  nodes.resize(n);
  bool complete = true;
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type;
    if (d.GraphNodeGetType(node, &type) != CUDA_SUCCESS) {
      complete = false;
      continue;
    }
    if (type == CU_GRAPH_NODE_TYPE_GRAPH) {
      CUgraph child = nullptr;
      if (!d.GraphChildGraphNodeGetGraph || d.GraphChildGraphNodeGetGraph(node, &child) != CUDA_SUCCESS ||
          !Walk(child, depth + 1, info))
        complete = false;
      continue;
    }
    if (type != CU_GRAPH_NODE_TYPE_KERNEL) continue;
    CUDA_KERNEL_NODE_PARAMS p{};
    if (d.GraphKernelNodeGetParams(node, &p) != CUDA_SUCCESS) {
      complete = false;
      continue;
    }
    const char* name = nullptr;
    if (p.func && d.FuncGetName) d.FuncGetName(&name, p.func);
    if (!name && p.kern && d.KernelGetName) d.KernelGetName(&name, p.kern);
    GraphKernelNode k;
    k.name = name ? name : "";
    k.name_id = k.name.empty() ? 0 : intern_(k.name);
    k.grid = {p.gridDimX, p.gridDimY, p.gridDimZ};
    k.block = {p.blockDimX, p.blockDimY, p.blockDimZ};
    if (k.name.empty()) complete = false;
    uint32_t index = static_cast<uint32_t>(info->kernels.size());
    info->kernels.push_back(std::move(k));
    uint64_t id = 0;
    if (CUPTI_CHECK(Cupti().GetGraphNodeId(node, &id))) {
      info->index_by_node_id[id] = index;
      if (depth == 0) info->index_by_node_index[static_cast<uint32_t>(id)] = index;
      if (auto c = t_clones.clone_of.find(id); c != t_clones.clone_of.end()) info->index_by_node_id[c->second] = index;
    }
  }
  return complete;
}

std::shared_ptr<const GraphExecInfo> GraphRegistry::OnExecCreated(CUgraph graph, CUgraphExec exec, bool* complete) {
  auto info = std::make_shared<GraphExecInfo>();
  uint32_t exec_id = 0;
  if (exec && CUPTI_CHECK(Cupti().GetGraphExecId(exec, &exec_id))) info->exec_id = exec_id;
  *complete = graph && exec && Walk(graph, 0, info.get());
  info->complete = *complete;
  t_clones.active = false;
  t_clones.clone_of.clear();
  if (!exec) return info;
  std::lock_guard<std::mutex> lock(mu_);
  execs_[exec] = info;
  generation_.fetch_add(1, std::memory_order_release);
  return info;
}

void GraphRegistry::OnExecDestroyStarting(CUgraphExec exec) {
  std::lock_guard<std::mutex> lock(mu_);
  execs_.erase(exec);
  generation_.fetch_add(1, std::memory_order_release);
}

std::shared_ptr<const GraphExecInfo> GraphRegistry::Find(CUgraphExec exec) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = execs_.find(exec);
  return it == execs_.end() ? nullptr : it->second;
}

}  // namespace twinscope::cupti
