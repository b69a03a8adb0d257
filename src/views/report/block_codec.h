// Compact encoding of one launch's block records for the HTML report, decoded by assets/report.js
// (decodeBlocks). 65,536 blocks as JSON rows take ~2.3 MB; encoded, ~0.3 MB.
//
// Blocks are sorted by (arrival order, block index); then come five columns of `count` LEB128
// varints each, one column after the other (columns compress better than rows):
//   order: zigzag(order - previous order - 1)   (left out when the orders are exactly 0..count-1)
//   block: zigzag(block - previous block - 1)
//   sm:    sm
//   enter: zigzag(enter - previous enter)
//   dur:   zigzag(exit - enter)
// with enter/exit in units of unit_ns counted from t0_ns (the earliest entry), rounded to nearest.
// unit_ns is 1 unless the launch spans more than kTimeSteps ns: times are then rounded to
// span / kTimeSteps, far below what a heatmap a few thousand pixels wide can show. The bytes are
// deflated (zlib format; the page inflates them with the browser's DecompressionStream) where this
// build has zlib, else left as they are ("raw"), and then written as base64.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace twinscope::report {

inline constexpr uint64_t kTimeSteps = uint64_t{1} << 20;

struct EncodedBlocks {
  uint64_t count = 0;      // blocks encoded
  uint64_t malformed = 0;  // rows left out: not [block, sm, enter_ns, exit_ns, order] integers
  int64_t t0_ns = 0;
  uint64_t unit_ns = 1;
  bool order_implicit = false;  // the order column is left out: orders are 0..count-1
  const char* codec = "raw";    // "deflate" or "raw"
  uint64_t bytes = 0;           // before deflate and base64
  std::string base64;
};

// One block: block_linear, sm, enter_ns, exit_ns, order (views::BlockRowDoc).
using BlockRow = std::array<int64_t, 5>;

// `blocks`: one launch's block rows (the join's block_detail[].blocks). Rows with a negative SM are
// counted as malformed. deflate: compress where this build can (false: always "raw").
EncodedBlocks EncodeBlocks(const std::vector<BlockRow>& blocks, bool deflate = true);
// The same from JSON rows, [[block_linear, sm, enter_ns, exit_ns, order], ...]; rows that are not five
// integers are counted as malformed.
EncodedBlocks EncodeBlocks(const nlohmann::json& blocks, bool deflate = true);

std::string Base64(const std::string& bytes);

// True if this build deflates block data (zlib found at configure time).
bool BlockCodecDeflates();

}  // namespace twinscope::report
