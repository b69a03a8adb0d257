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
};

}  // namespace twinscope::cupti
