// The fake's definitions of CUDA's opaque handle types, shared by the fake
// libcupti and the fake libcuda (which reads graphs built by the former).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

// The driver's CUPTI seat (fake_cuda.cpp): the first libcupti copy to claim
// it holds it; `claim` null only asks. Returns the holder.
extern "C" void* fakecuda_cupti_seat(void* claim);

struct CUctx_st {
  uint32_t id;
  int device;
};

struct CUstream_st {
  uint32_t id;
  bool capturing;
};

struct CUfunc_st {
  std::string name;
};

struct CUgraphNode_st {
  CUgraphNodeType type;
  uint64_t id;
  CUfunc_st* func = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  uint64_t bytes = 0;
  CUgraph_st* child = nullptr;
};

struct CUgraph_st {
  uint32_t id;
  std::vector<CUgraphNode_st*> nodes;
};

// One operation an executable graph runs, flattened in node order.
struct FakeExecOp {
  CUgraphNodeType type;
  uint64_t node_id;  // the clone's id: what activity records carry
  CUfunc_st* func;
  unsigned grid[3];
  unsigned block[3];
  uint64_t bytes;
};

struct CUgraphExec_st {
  uint32_t id;
  uint32_t graph_id;
  std::vector<FakeExecOp> ops;
  bool has_memcpy = false;
  bool has_memset = false;
};
