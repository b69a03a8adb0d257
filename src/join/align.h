// Sequence alignment of the primary's and the shadow's launch sequences, the
// way `diff` aligns two files (docs/join.md, "Alignment"): integer tokens in,
// pairs of equal tokens out. Pure, CUDA-free and independent of the model so
// it can be tested against a brute-force LCS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace twinscope::join {

// A pair (index in a, index in b) of equal tokens.
using AlignPair = std::pair<uint32_t, uint32_t>;

// Myers' O(ND) LCS of a and b (E. Myers, "An O(ND) Difference Algorithm and
// Its Variations", 1986), in linear space (the paper's middle-snake divide and
// conquer): appends the pairs of one longest common subsequence, increasing on
// both sides, offset by (a_base, b_base). Returns false (and appends nothing)
// when a and b differ by more than `max_d` insertions plus deletions (at once
// when their lengths do). Time O((N+M) D), memory O(N+M) for the pairs and
// O(D) for the search.
bool MyersAlign(const uint32_t* a, size_t n, const uint32_t* b, size_t m, size_t max_d, uint32_t a_base,
                uint32_t b_base, std::vector<AlignPair>* out);

struct AlignOptions {
  size_t max_d = 2000;  // per segment between anchors: beyond it, greedy key matching
};

struct AlignStats {
  bool identical = false;      // the token sequences were equal: paired one to one, no alignment
  size_t anchors = 0;          // pairs fixed first by keys unique on both sides
  size_t segments = 0;         // stretches between anchors aligned with Myers
  size_t capped_segments = 0;  // of those, differing by more than max_d: greedy key matching there
  size_t capped_launches = 0;  // shadow launches (b) inside capped segments
  uint64_t max_d_seen = 0;     // the largest D Myers finished with
};

// Patience anchors: keys that occur exactly once in a and once in b with equal
// tokens, reduced to their longest chain increasing on both sides.
std::vector<AlignPair> UniqueAnchors(const std::vector<uint32_t>& tokens_a, const std::vector<uint32_t>& tokens_b,
                                     const std::vector<uint64_t>& keys_a, const std::vector<uint64_t>& keys_b);

// Aligns a (primary) with b (shadow). tokens_*: what must be equal for a pair
// (range path normalized, kernel, shape); keys_*: the stored launch key
// hashes (with instance numbers and ordinals), which are unique per launch
// in most programs. Steps:
//  1. identical token sequences: pair i with i;
//  2. anchors: keys that occur exactly once in a and once in b with equal
//     tokens, reduced to their longest chain increasing on both sides
//     (patience diff); this also covers a sampling shadow, whose launches are
//     a subsequence of the primary's;
//  3. between anchors, common prefix and suffix, then Myers on the tokens;
//  4. a segment with D > max_d: greedy in order, equal key first, then equal
//     token (counted in stats->capped_*; the caller warns).
// Returns the pairs increasing on both sides.
std::vector<AlignPair> AlignSequences(const std::vector<uint32_t>& tokens_a, const std::vector<uint32_t>& tokens_b,
                                      const std::vector<uint64_t>& keys_a, const std::vector<uint64_t>& keys_b,
                                      const AlignOptions& options, AlignStats* stats);

// How many places an unpaired run could take with the same result: a run of
// `len` items starting at `start` in seq, between paired items, can slide left
// while seq[start-1-k] == seq[start+len-1-k] and right while seq[start+k] ==
// seq[start+len+k] (as diff's "sliders"). 1 = unambiguous. `lo`/`hi` bound the
// slide (the run's paired neighbours must be paired on both sides: only
// unpaired-free context may be crossed; the caller passes the span of
// paired items around the run).
size_t SlidePositions(const std::vector<uint32_t>& seq, size_t start, size_t len, size_t lo, size_t hi);

}  // namespace twinscope::join
