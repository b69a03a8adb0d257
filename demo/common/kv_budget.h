// How much of its GPU memory share the demo server gives its KV cache: what
// is left of the share once its own weights and buffers are counted. CUDA-free
// (the GPU engine measures, this decides), so the sizing is tested on CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace twinscope::demo {

inline constexpr size_t kGraphReserve = 512u << 20;  // graphs, cuBLAS and the context's own growth
inline constexpr size_t kRuntimeSlack = 256u << 20;  // the context, stream and cuBLAS handle beyond own_bytes

struct KvBudgetInput {
  double memory_fraction = 0.3;  // --gpu-memory-fraction
  size_t total = 0;              // the GPU's memory
  size_t free_before = 0;        // free memory before the server allocated anything
  size_t free_after = 0;         // free memory after its weights and buffers
  size_t own_bytes = 0;          // what the server allocated itself
  size_t block_bytes = 0;        // one KV-cache block, all layers, K and V
  int64_t min_blocks = 0;        // blocks for one sequence of max_model_len tokens
  int max_model_len = 0;
  std::string gpu_name;
};

// The server's own use: what it allocated, plus what the free memory says the
// context, stream and cuBLAS took, but never more than own_bytes + kRuntimeSlack:
// cudaMemGetInfo counts the whole GPU, and a twin started at the same moment
// allocates too (a live twin's primary once counted the shadow's 58 GiB as its own).
size_t ServerUsedBytes(const KvBudgetInput& in);

// The KV cache's size in bytes (a whole number of blocks), or an error that
// says what to change: the share leaves too little for one sequence, or the
// GPU has less free memory than the share promises (other processes hold it).
StatusOr<size_t> KvCacheBytes(const KvBudgetInput& in);

}  // namespace twinscope::demo
