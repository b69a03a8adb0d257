// Two-level alignment of the join (docs/join.md, "Alignment"): range instances first, then the launches
// inside each aligned pair of instances, so no pair ever crosses instances. Pure and CUDA-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "join/align.h"
#include "join/range_names.h"

namespace twinscope::join {

// One side's launches as the alignment sees them (all vectors of one length, in launch order).
struct AlignSide {
  std::vector<const std::string*> paths;  // key paths (with instance numbers)
  std::vector<uint32_t> tokens;           // equal tokens may pair (normalized path, kernel, shape)
  std::vector<uint32_t> kernels;          // kernel ids, equal across the sides for equal names
  std::vector<uint64_t> keys;             // stored launch key hashes (anchors)
};

// A range instance: a maximal run of launches under one instance prefix at the alignment's depth, or a run of
// launches outside any range at that depth (their own stretch).
struct Instance {
  uint32_t begin = 0, end = 0;  // launch indices [begin, end)
  std::string name;             // the prefix as the trace names it ("" = outside any range)
  uint32_t name_id = 0;         // normalized name, equal across the sides for equal normalized names
  uint64_t content = 0;         // hash of its tokens
  uint64_t kernels = 0;         // hash of its kernels in order, shapes left out
};

struct TwoLevelOptions {
  // Work bound of one search (edits, insertions plus deletions): a search whose length difference alone
  // exceeds it is skipped, and one that needs more is abandoned; both are matched within the instance in
  // order (greedy), counted in bounded_instances.
  size_t max_d = 2000;
  // Cells of the weighted pairing of same-named instances between content-equal ones; past it, in order.
  size_t max_instance_cells = size_t{1} << 22;
};

struct TwoLevelResult {
  uint32_t depth = 1;  // range depth of the instances (1 = top level)
  std::vector<Instance> a, b;
  std::vector<int32_t> partner_a, partner_b;             // the aligned instance on the other side, -1 = none
  std::vector<uint32_t> instance_of_a, instance_of_b;    // per launch
  std::vector<AlignPair> pairs;                          // launch pairs of equal tokens, increasing on both sides
  AlignStats stats;                                      // summed over the instance pairs
  uint64_t bounded_instances = 0, bounded_launches = 0;  // past the work bound: matched in order within them
  std::vector<uint8_t> bounded_a;                        // per instance of a: 1 = its pair was past the bound
};

// Element ends of a key path: the index after each element's instance number "#k". A "#k" directly after a
// space is part of the name ("batch #3"), not an instance number (docs/join.md, "Range names").
std::vector<size_t> ElementEnds(std::string_view path);

// Aligns a (primary) with b (shadow) in two levels. `norm` makes instance names comparable.
TwoLevelResult AlignTwoLevel(const AlignSide& a, const AlignSide& b, const RangeNormalizer& norm,
                             const TwoLevelOptions& options);

}  // namespace twinscope::join
