// Paged attention for the demo engine: one block per (head, token), four
// warps splitting the token's cached positions, each lane a slice of the head;
// an online softmax per warp, merged at the end. Decode steps attend with one
// token per sequence, prefill steps with every prompt token (causal).
#include <cuda_bf16.h>

#include <cfloat>

#include "gpu/kernels.h"

namespace tsdemo {

constexpr int kWarps = 4;
constexpr int kMaxPerLane = 8;  // head_dim <= 256

__global__ void paged_attention_kernel(__nv_bfloat16* __restrict__ out, const __nv_bfloat16* __restrict__ q,
                                       int64_t q_stride, const __nv_bfloat16* __restrict__ key_cache,
                                       const __nv_bfloat16* __restrict__ value_cache,
                                       const int32_t* __restrict__ block_tables, int max_blocks_per_seq,
                                       const int32_t* __restrict__ token_seq, const int32_t* __restrict__ positions,
                                       int kv_heads, int head_dim, int block_size, float scale) {
  const int head = blockIdx.x, heads = gridDim.x;
  const int64_t t = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int per = head_dim / 32;
  __nv_bfloat16* o = out + t * heads * head_dim + int64_t(head) * head_dim;
  const int seq = token_seq[t];
  if (seq < 0) {  // padding row
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) o[i] = __float2bfloat16(0.f);
    return;
  }
  const int ctx = positions[t] + 1;
  const int kvh = head / (heads / kv_heads);
  const int64_t row = int64_t(kv_heads) * head_dim;
  const int32_t* table = block_tables + int64_t(seq) * max_blocks_per_seq;

  float qv[kMaxPerLane], acc[kMaxPerLane];
  const __nv_bfloat16* qp = q + t * q_stride + int64_t(head) * head_dim + lane * per;
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    qv[j] = j < per ? __bfloat162float(qp[j]) : 0.f;
    acc[j] = 0.f;
  }
  float m = -FLT_MAX, l = 0.f;
  for (int p = warp; p < ctx; p += kWarps) {
    const int64_t slot = int64_t(table[p / block_size]) * block_size + p % block_size;
    const __nv_bfloat16* k = key_cache + slot * row + int64_t(kvh) * head_dim + lane * per;
    float dot = 0.f;
#pragma unroll
    for (int j = 0; j < kMaxPerLane; ++j) {
      if (j < per) dot += qv[j] * __bfloat162float(k[j]);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    const float s = dot * scale;
    const float m_new = fmaxf(m, s);
    const float c = __expf(m - m_new), e = __expf(s - m_new);
    l = l * c + e;
    const __nv_bfloat16* v = value_cache + slot * row + int64_t(kvh) * head_dim + lane * per;
#pragma unroll
    for (int j = 0; j < kMaxPerLane; ++j) {
      if (j < per) acc[j] = acc[j] * c + e * __bfloat162float(v[j]);
    }
    m = m_new;
  }
  __shared__ float sm_m[kWarps], sm_l[kWarps];
  __shared__ float sm_acc[kWarps][kMaxPerLane * 32];
  if (lane == 0) {
    sm_m[warp] = m;
    sm_l[warp] = l;
  }
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    if (j < per) sm_acc[warp][lane * per + j] = acc[j];
  }
  __syncthreads();
  if (warp != 0) return;
  float big = -FLT_MAX;
  for (int w = 0; w < kWarps; ++w) big = fmaxf(big, sm_m[w]);
  float total = 0.f, res[kMaxPerLane] = {};
  for (int w = 0; w < kWarps; ++w) {
    if (sm_l[w] == 0.f) continue;  // a warp that had no position
    const float c = __expf(sm_m[w] - big);
    total += sm_l[w] * c;
#pragma unroll
    for (int j = 0; j < kMaxPerLane; ++j) {
      if (j < per) res[j] += sm_acc[w][lane * per + j] * c;
    }
  }
#pragma unroll
  for (int j = 0; j < kMaxPerLane; ++j) {
    if (j < per) o[lane * per + j] = __float2bfloat16(res[j] / total);
  }
}

}  // namespace tsdemo

namespace twinscope::demo::gpu {

cudaError_t LaunchPagedAttention(void* out, const void* q, int64_t q_stride, const void* key_cache,
                                 const void* value_cache, const int32_t* block_tables, int max_blocks_per_seq,
                                 const int32_t* token_seq, const int32_t* positions, int num_tokens, int heads,
                                 int kv_heads, int head_dim, int block_size, cudaStream_t stream) {
  using T = __nv_bfloat16;
  dim3 grid(heads, num_tokens);
  tsdemo::paged_attention_kernel<<<grid, tsdemo::kWarps * 32, 0, stream>>>(
      static_cast<T*>(out), static_cast<const T*>(q), q_stride, static_cast<const T*>(key_cache),
      static_cast<const T*>(value_cache), block_tables, max_blocks_per_seq, token_seq, positions, kv_heads, head_dim,
      block_size, 1.0f / sqrtf(static_cast<float>(head_dim)));
  return cudaGetLastError();
}

}  // namespace twinscope::demo::gpu
