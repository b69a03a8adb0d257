// Host-side launchers of the demo engine's kernels (bf16 tensors as void*,
// so the engine's C++ code needs only the CUDA runtime's C header). Each
// returns cudaGetLastError() after its launch; all launch on `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace twinscope::demo::gpu {

// Paged KV-cache write (cache_kernels.cu, its own module). One block per
// token, min(kv_heads * head_dim, 512) threads; tokens whose slot is negative
// (padding) return at once. Cache layout per layer: [blocks][block_size][kv_heads][head_dim].
cudaError_t LaunchReshapeAndCacheFlash(const void* key, const void* value, void* key_cache, void* value_cache,
                                       const int64_t* slot_mapping, int num_tokens, int64_t key_stride,
                                       int64_t value_stride, int kv_heads, int head_dim, int block_size,
                                       cudaStream_t stream);

// Attention of each token over its sequence's cached positions 0..position
// (attention_kernels.cu). out: [tokens][heads * head_dim]; q rows of `q_stride`.
cudaError_t LaunchPagedAttention(void* out, const void* q, int64_t q_stride, const void* key_cache,
                                 const void* value_cache, const int32_t* block_tables, int max_blocks_per_seq,
                                 const int32_t* token_seq, const int32_t* positions, int num_tokens, int heads,
                                 int kv_heads, int head_dim, int block_size, cudaStream_t stream);

// layer_kernels.cu
cudaError_t LaunchEmbedding(void* out, const int32_t* ids, const void* table, int num_tokens, int hidden, int vocab,
                            cudaStream_t stream);
cudaError_t LaunchRmsNorm(void* out, const void* x, const void* weight, int num_tokens, int hidden,
                          cudaStream_t stream);
// residual += delta; out = rms_norm(residual) * weight
cudaError_t LaunchFusedAddRmsNorm(void* residual, const void* delta, const void* weight, void* out, int num_tokens,
                                  int hidden, cudaStream_t stream);
// NeoX-style rotary embedding of the q and k heads of a fused qkv buffer, in place.
cudaError_t LaunchRotaryEmbedding(void* qkv, const int32_t* positions, int num_tokens, int64_t stride, int heads,
                                  int kv_heads, int head_dim, cudaStream_t stream);
// out[t][i] = silu(in[t][i]) * in[t][intermediate + i]
cudaError_t LaunchSiluAndMul(void* out, const void* in, int num_tokens, int intermediate, cudaStream_t stream);
cudaError_t LaunchGatherRows(void* out, const void* in, const int32_t* rows, int num_rows, int hidden,
                             cudaStream_t stream);
// w[i] = offset + scale * uniform(-1, 1), from a hash of (seed, i).
cudaError_t LaunchInitWeights(void* w, int64_t n, uint64_t seed, float scale, float offset, cudaStream_t stream);

// Sampling (sampler_kernels.cu): one block per row of logits [rows][vocab]:
// the row's max and log-sum-exp, then the token SampleToken(seed, index,
// vocab) (common/sampling.h) and its log-probability. Rows whose index is
// negative (padding) get token -1.
cudaError_t LaunchSampling(int32_t* tokens, float* logprobs, const void* logits, const uint64_t* seeds,
                           const int32_t* sample_index, int rows, int vocab, cudaStream_t stream);

}  // namespace twinscope::demo::gpu
