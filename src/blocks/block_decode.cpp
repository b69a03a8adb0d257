#include "blocks/block_decode.h"

#include <algorithm>
#include <cstring>

namespace twinscope::blocks {

BlockProbeHeader MakeOffHeader() {
  BlockProbeHeader h;
  std::memset(&h, 0, sizeof h);
  h.off = 1;
  return h;
}

BlockProbeHeader MakeCappedHeader(uint32_t capacity) {
  BlockProbeHeader h;
  std::memset(&h, 0, sizeof h);
  h.capacity = capacity;
  return h;
}

uint64_t BlockCount(Dim3 grid) { return uint64_t{grid.x} * grid.y * grid.z; }

uint32_t SlotsFor(Dim3 grid, uint32_t max_slots) {
  return static_cast<uint32_t>(std::min<uint64_t>(BlockCount(grid), max_slots));
}

DecodedLaunch DecodeLaunchBuffer(const void* buffer, size_t bytes, uint64_t launch_seq, Dim3 grid,
                                 uint32_t threads_per_block) {
  DecodedLaunch out;
  out.expected = BlockCount(grid);
  BlockProbeHeader h;
  if (buffer == nullptr || bytes < sizeof h) {
    out.bad_header = true;
    return out;
  }
  std::memcpy(&h, buffer, sizeof h);
  const uint64_t capacity = h.capacity != 0 ? h.capacity : out.expected;
  // Impossible headers (not a buffer of this launch, or overwritten): an
  // order beyond the slots, more overflow than blocks.
  if (h.off != 0 || capacity > out.expected || capacity > (bytes - sizeof h) / sizeof(BlockProbeSlot) ||
      h.next_order > capacity || h.overflow > out.expected - capacity) {
    out.bad_header = true;
    return out;
  }
  out.overflow = h.overflow;
  const auto* slots = reinterpret_cast<const unsigned char*>(buffer) + sizeof h;
  out.blocks.reserve(capacity);
  const uint64_t gx = std::max<uint32_t>(grid.x, 1), gy = std::max<uint32_t>(grid.y, 1);
  for (uint64_t i = 0; i < capacity; ++i) {
    BlockProbeSlot s;
    std::memcpy(&s, slots + uint64_t{i} * sizeof s, sizeof s);
    if (s.entered == 0) {
      ++out.missing;
      continue;
    }
    BlockRecord r{};
    r.launch_seq = launch_seq;
    r.enter_ns = s.enter_ns;
    r.exit_ns = s.exit_ns;
    r.block_linear = static_cast<uint32_t>(i);
    r.order = s.order;
    r.x = static_cast<uint32_t>(i % gx);
    r.y = static_cast<uint32_t>((i / gx) % gy);
    r.z = static_cast<uint32_t>(i / (gx * gy));
    r.sm = s.sm;
    if (s.exited_threads != threads_per_block || s.exit_ns == 0) {
      ++out.incomplete;
      r.exit_ns = 0;
    }
    out.blocks.push_back(r);
  }
  return out;
}

}  // namespace twinscope::blocks
