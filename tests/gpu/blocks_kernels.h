// Kernels of the block-probe GPU tests and benchmark, in two translation units
// (so two modules without -rdc): blocks_target_kernels.cu holds the target
// (a stand-in for vLLM's reshape_and_cache_flash_kernel) and a 3-D grid
// kernel; blocks_other_kernels.cu holds kernels that must never be patched.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

// Exits with file, line, call and CUDA's message if a runtime call fails.
#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace blocks_gpu {

// grid = tokens, block = min(heads * head_size, 512); a negative slot exits at once.
void LaunchReshapeAndCache(const float* key, const float* value, float* key_cache, float* value_cache,
                           const int64_t* slot_mapping, int tokens, int heads, int head_size, int block_size,
                           cudaStream_t stream);
void LaunchGrid3d(float* out, dim3 grid, dim3 block, cudaStream_t stream);
void LaunchGemmLike(const float* a, const float* b, float* c, int n, int blocks, cudaStream_t stream);
void LaunchRmsNorm(float* x, int n, cudaStream_t stream);

}  // namespace blocks_gpu
