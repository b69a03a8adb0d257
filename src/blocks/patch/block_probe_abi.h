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
//
// Graph kernel nodes (v3): a node runs with its function's callback data, one
// pointer for every node of that function in the graph (measured on the H200:
// per-launch data reaches no node once a graph holds two patched nodes). So
// the collector hands each function, per graph launch, a TABLE: a header with
// table = n followed by n BlockProbeTableEntry slots, filled one per node of
// the function in node order (the first entry with blocks == 0 ends the
// search: slots past the last written are zero), each pointing to that node's own buffer (above; the off
// buffer for an untraced node). A grid takes the entry whose grid_key is its
// own (%gridid + 1), or claims (atomicCAS from 0) the first unclaimed entry of
// its shape (blocks, threads per block); then it writes that buffer as a
// launch buffer. A grid that finds no entry adds 1 to the table's overflow
// (thread (0,0,0) of each block) and writes nothing.
#ifndef TWINSCOPE_BLOCKS_PATCH_BLOCK_PROBE_ABI_H_
#define TWINSCOPE_BLOCKS_PATCH_BLOCK_PROBE_ABI_H_

#include <stdint.h>

#define TWINSCOPE_BLOCK_PROBE_VERSION 3u /* v2: zero header = traced, whole grid; `off` flag. v3: tables */

/* Names of the device functions in the patch image (sanitizerPatchInstructions). */
#define TWINSCOPE_BLOCK_ENTER_PATCH "twinscope_block_enter"
#define TWINSCOPE_BLOCK_EXIT_PATCH "twinscope_block_exit"

typedef struct {
  uint32_t off;        /* host: nonzero = untraced launch, the patch returns at once */
  uint32_t capacity;   /* host: slots following the header; 0 = one per block of the grid */
  uint32_t next_order; /* device: arrival counter */
  uint32_t overflow;   /* device: blocks that found no slot (in a table: no entry) */
  uint32_t table;      /* host: entries following the header; 0 = a launch buffer */
  uint32_t reserved[3];
} BlockProbeHeader;

typedef struct {
  uint64_t grid_key; /* device: %gridid + 1 of the grid that claimed it; 0 = unclaimed */
  uint64_t buffer;   /* host: device address of the node's launch buffer */
  uint32_t blocks;   /* host: the node's grid size (low 32 bits) */
  uint32_t threads;  /* host: threads per block */
} BlockProbeTableEntry;

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
static_assert(sizeof(BlockProbeTableEntry) == 24, "BlockProbeTableEntry layout");
#endif

/* Bytes of a buffer holding `capacity` slots. */
static inline uint64_t BlockProbeBufferBytes(uint32_t capacity) {
  return (uint64_t)sizeof(BlockProbeHeader) + (uint64_t)capacity * sizeof(BlockProbeSlot);
}

/* Bytes of a table of `entries` entries. */
static inline uint64_t BlockProbeTableBytes(uint32_t entries) {
  return (uint64_t)sizeof(BlockProbeHeader) + (uint64_t)entries * sizeof(BlockProbeTableEntry);
}

#endif /* TWINSCOPE_BLOCKS_PATCH_BLOCK_PROBE_ABI_H_ */
