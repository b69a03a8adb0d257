// Turns one launch's device buffer (patch/block_probe_abi.h), copied to the
// host, into BlockRecords, and accounts for every block that is not a clean
// record. Pure, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "blocks/patch/block_probe_abi.h"
#include "twinscope/records.h"

namespace twinscope::blocks {

// Headers the host writes (a zeroed buffer needs none: see block_probe_abi.h):
// the "off" buffer's, and a traced launch's whose slots are capped below its
// grid size.
BlockProbeHeader MakeOffHeader();
BlockProbeHeader MakeCappedHeader(uint32_t capacity);

// Slots to allocate for a launch of `grid`: the block count, capped at
// `max_slots` (blocks beyond it are counted as overflow by the patch).
uint32_t SlotsFor(Dim3 grid, uint32_t max_slots);
uint64_t BlockCount(Dim3 grid);

struct DecodedLaunch {
  std::vector<BlockRecord> blocks;  // one per block that entered, by linear index
  uint64_t expected = 0;            // grid size
  uint64_t overflow = 0;            // blocks that found no slot (header.overflow)
  uint64_t missing = 0;             // slots whose block never entered
  uint64_t incomplete = 0;          // entered, but not all threads left (exit_ns == 0 in the record)
  bool bad_header = false;          // off set, capacity or counters impossible: nothing decoded
};

// `buffer` holds `bytes` bytes copied from the device. `threads_per_block` is
// block.x * block.y * block.z of the launch. A header capacity of 0 means one
// slot per block of `grid`.
DecodedLaunch DecodeLaunchBuffer(const void* buffer, size_t bytes, uint64_t launch_seq, Dim3 grid,
                                 uint32_t threads_per_block);

}  // namespace twinscope::blocks
