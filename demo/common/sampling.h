// The demo server's deterministic token draw, shared by the GPU sampling
// kernel, the CPU engine and the client's reply check: a reply depends only on
// its request's sample seed and the token's index, never on the batch it ran
// in, so two servers (or a server and a replay) give the same text.
// Plain C++17, usable from CUDA device code.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TSDEMO_HD __host__ __device__
#else
#define TSDEMO_HD
#endif

namespace twinscope::demo {

// SplitMix64's finaliser: a bijection on 64-bit values with good avalanche.
TSDEMO_HD inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The id of output token `index` (0 = the token sampled by the prefill step)
// of a request with sample seed `seed`, in [0, vocab).
TSDEMO_HD inline int32_t SampleToken(uint64_t seed, uint32_t index, uint32_t vocab) {
  return static_cast<int32_t>(Mix64(seed ^ Mix64(0x5eedULL + index)) % vocab);
}

}  // namespace twinscope::demo
