// Shared by the GPU trace checkers (blocks_trace_check, blocks_toggle_check):
// a sink that keeps launch and block records, and does a traced launch have
// exactly one complete record per block of its grid?
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "twinscope/records.h"
#include "twinscope/trace_reader.h"

namespace blocks_gpu {

struct BlockSink : twinscope::RecordSink {
  std::vector<twinscope::LaunchRecord> launches;
  std::map<uint64_t, std::vector<twinscope::BlockRecord>> blocks;  // by launch seq
  void OnLaunch(const twinscope::LaunchRecord& r) override { launches.push_back(r); }
  void OnBlock(const twinscope::BlockRecord& r) override { blocks[r.launch_seq].push_back(r); }
};

// Exactly grid-size records, each with enter and exit (exit >= enter), an SM
// below `sms`, its linear index matching (x, y, z); arrival orders and linear
// indices each a permutation of 0..n-1; and blocks_recorded == n.
inline bool CompleteBlocks(const twinscope::LaunchRecord& l, const std::vector<twinscope::BlockRecord>& b,
                           uint32_t sms) {
  const uint64_t n = uint64_t{l.grid.x} * l.grid.y * l.grid.z;
  std::vector<char> order_seen(n, 0), linear_seen(n, 0);
  bool ok = b.size() == n && l.blocks_recorded == n;
  for (const twinscope::BlockRecord& x : b) {
    ok = ok && x.exit_ns != 0 && x.exit_ns >= x.enter_ns && x.sm < sms && x.order < n && x.block_linear < n &&
         !order_seen[x.order] && !linear_seen[x.block_linear] &&
         x.block_linear == x.x + l.grid.x * (x.y + l.grid.y * x.z);
    if (x.order < n) order_seen[x.order] = 1;
    if (x.block_linear < n) linear_seen[x.block_linear] = 1;
  }
  return ok;
}

}  // namespace blocks_gpu
