// The demo server's GPU engine: a Llama-style decoder with random bf16
// weights on one GPU. Per step and layer: RMS norm, QKV GEMM (cuBLAS), rotary
// embedding, reshape_and_cache_flash_kernel (the paged KV-cache write, vLLM's
// launch shape), paged attention, O GEMM, fused residual + norm, gate/up GEMM,
// SiLU-and-mul, down GEMM; then the LM head GEMM and a sampling kernel. Prefill
// steps run eagerly; decode steps replay a CUDA graph captured per padded
// batch size at start-up, each step inside an NVTX range named after it.
// Every CUDA call is checked; an error fails the step with the call's text.
// This header is CUDA-free.
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "common/engine.h"

namespace twinscope::demo {

struct GpuEngineOptions {
  ModelShape model;
  int device = 0;
  double memory_fraction = 0.3;  // of the GPU's memory for this server: weights, buffers and the KV cache
  int block_size = 16;
  int max_batch = 64;
  int max_step_tokens = 8192;
  int max_model_len = 4096;
  bool enforce_eager = false;  // no CUDA graphs: decode steps launch their kernels one by one
  uint64_t weight_seed = 1234;
};

// Allocates the weights, buffers and KV cache, warms up and captures the
// decode graphs. Errors say what failed (no GPU, too little memory, ...).
StatusOr<std::unique_ptr<Engine>> CreateGpuEngine(const GpuEngineOptions& options);

}  // namespace twinscope::demo
