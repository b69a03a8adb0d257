// Layout of the device buffer that the block probe's patch code fills for one
// traced launch. Shared by the device patch (block_probe.cu, compiled by
// nvcc), the host collector that hands it out and decodes it
// (block_probe.cpp, block_decode.cpp) and the fake Sanitizer that emulates
// the patch in CI.
//
// Plain C data only: no CUDA, no Sanitizer types. One buffer per traced
// launch: a BlockProbeHeader followed by its slots, slot i belonging to the
// block of linear index i = x + gx * (y + gy * z).
//
// An all-zero buffer is a ready traced launch with one slot per block of its
// grid: the collector hands out spans of a zeroed arena and needs no write of
// its own per launch. header.capacity != 0 caps the slots (huge grids); the
// host writes it only then.
//
// What the patch guarantees, per block with linear index < capacity:
//   entered, enter_ns, sm, order: written by the block's thread (0,0,0) at
//     its BLOCK_ENTER (one thread, one clock read, one atomic per block);
//     order comes from an atomicAdd on header.next_order, so the orders of a
//     launch are a permutation; entered = 1 marks the slot as written;
//   exited_threads: threads that passed BLOCK_EXIT (one atomic per warp);
//   exit_ns: written by the warp whose exit made exited_threads reach the
//     block's thread count, i.e. the block's last thread to leave.
// Blocks with linear index >= capacity increment header.overflow once (their
// thread (0,0,0)) and write nothing else.
// A header with off != 0 (the collector's "off" buffer, handed to launches of
// a patched module that are not traced) makes the patch return at once,
// writing nothing; so does null userdata.
#ifndef TWINSCOPE_BLOCKS_PATCH_BLOCK_PROBE_ABI_H_
#define TWINSCOPE_BLOCKS_PATCH_BLOCK_PROBE_ABI_H_

#include <stdint.h>

#define TWINSCOPE_BLOCK_PROBE_VERSION 2u /* v2: zero header = traced, whole grid; `off` flag */

/* Names of the device functions in the patch image (sanitizerPatchInstructions). */
#define TWINSCOPE_BLOCK_ENTER_PATCH "twinscope_block_enter"
#define TWINSCOPE_BLOCK_EXIT_PATCH "twinscope_block_exit"

typedef struct {
  uint32_t off;        /* host: nonzero = untraced launch, the patch returns at once */
  uint32_t capacity;   /* host: slots following the header; 0 = one per block of the grid */
  uint32_t next_order; /* device: arrival counter */
  uint32_t overflow;   /* device: blocks that found no slot */
  uint32_t reserved[4];
} BlockProbeHeader;

typedef struct {
  uint64_t enter_ns; /* %globaltimer when thread (0,0,0) entered */
  uint64_t exit_ns;  /* %globaltimer when the last thread left; 0 if not yet */
  uint32_t sm;       /* %smid of the block */
  uint32_t order;    /* arrival order within the launch */
  uint32_t entered;  /* 1 once thread (0,0,0) entered */
  uint32_t exited_threads;
} BlockProbeSlot;

#ifdef __cplusplus
static_assert(sizeof(BlockProbeHeader) == 32, "BlockProbeHeader layout");
static_assert(sizeof(BlockProbeSlot) == 32, "BlockProbeSlot layout");
#endif

/* Bytes of a buffer holding `capacity` slots. */
static inline uint64_t BlockProbeBufferBytes(uint32_t capacity) {
  return (uint64_t)sizeof(BlockProbeHeader) + (uint64_t)capacity * sizeof(BlockProbeSlot);
}

#endif /* TWINSCOPE_BLOCKS_PATCH_BLOCK_PROBE_ABI_H_ */
