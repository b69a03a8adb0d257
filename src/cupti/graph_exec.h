// What the collector knows about one executable CUDA graph: its kernel nodes
// in node order (the order launch keys are computed in) and which CUPTI graph
// node ids stand for each of them. Built once at instantiation (graphs.cpp),
// immutable afterwards, shared by pointer with pending graph launches.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "twinscope/records.h"

namespace twinscope::cupti {

struct GraphKernelNode {
  std::string name;  // mangled
  StringId name_id = 0;
  Dim3 grid{};
  Dim3 block{};
};

struct GraphExecInfo {
  uint64_t exec_id = 0;  // cuptiGetGraphExecId
  bool complete = true;  // every node could be inspected
  std::vector<GraphKernelNode> kernels;
  // CUPTI graph node id (of the executable graph's clone and of the original
  // node) -> index into `kernels`.
  std::unordered_map<uint64_t, uint32_t> index_by_node_id;
  // Low 32 bits of the original top-level node's id -> index into `kernels`.
  // CUPTI 13 numbers nodes (graph id << 32 | node index) and, measured on the
  // H200 (bench/RESULTS.md), reports an executable graph's kernels as
  // (exec id << 32 | index of the original node) without a GRAPHNODE_CLONED
  // callback; Resolve() uses this only when the exec id and the kernel name
  // both agree.
  std::unordered_map<uint32_t, uint32_t> index_by_node_index;
};

}  // namespace twinscope::cupti
