// Device patch of the block probe: called by the Sanitizer at every block's
// entry and exit in patched modules (SANITIZER_INSTRUCTION_BLOCK_ENTER/EXIT),
// by every thread. `userdata` is the launch's BlockProbeHeader (see
// block_probe_abi.h for what is written and guaranteed); launches that are not
// traced get an "off" header or null, and return at once.
//
// Built with `nvcc --fatbin --compile-as-tools-patch` for every architecture
// in TWINSCOPE_CUDA_ARCHITECTURES and embedded in libtwinscope_blocks.so.
#include <sanitizer_patching.h>
#include <stdint.h>

#include "block_probe_abi.h"

namespace {

__device__ __forceinline__ uint64_t GlobalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint32_t SmId() {
  uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

__device__ __forceinline__ uint32_t LaneId() {
  uint32_t id;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));
  return id;
}

__device__ __forceinline__ uint64_t LinearBlock() {
  return blockIdx.x + (uint64_t)gridDim.x * (blockIdx.y + (uint64_t)gridDim.y * blockIdx.z);
}

__device__ __forceinline__ uint64_t GridKey() {
  uint64_t id;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(id));
  return id + 1;
}

// A table (graph kernel nodes, block_probe_abi.h): this grid's entry's buffer,
// claimed on first sight; null if none is left for its shape.
__device__ __noinline__ BlockProbeHeader* ResolveTable(BlockProbeHeader* h) {
  const unsigned long long key = GridKey();
  const uint32_t blocks = gridDim.x * gridDim.y * gridDim.z;
  const uint32_t threads = blockDim.x * blockDim.y * blockDim.z;
  BlockProbeTableEntry* e = reinterpret_cast<BlockProbeTableEntry*>(h + 1);
  const uint32_t n = h->table;
  for (uint32_t i = 0; i < n && e[i].blocks != 0; ++i) {  // entries past the last written are zero
    unsigned long long* k = reinterpret_cast<unsigned long long*>(&e[i].grid_key);
    const unsigned long long seen = *reinterpret_cast<volatile unsigned long long*>(k);
    if (seen == key) return reinterpret_cast<BlockProbeHeader*>(e[i].buffer);
    if (seen == 0 && e[i].blocks == blocks && e[i].threads == threads) {
      const unsigned long long old = atomicCAS(k, 0ull, key);
      if (old == 0ull || old == key) return reinterpret_cast<BlockProbeHeader*>(e[i].buffer);
    }
  }
  return nullptr;
}

// Slots of this launch: the header's cap, or one per block of the grid.
__device__ __forceinline__ uint64_t CapacityOf(const BlockProbeHeader* h) {
  const uint32_t c = h->capacity;
  return c != 0 ? c : (uint64_t)gridDim.x * gridDim.y * gridDim.z;
}

__device__ __forceinline__ BlockProbeSlot* SlotOf(BlockProbeHeader* h, uint64_t linear) {
  return reinterpret_cast<BlockProbeSlot*>(h + 1) + linear;
}

}  // namespace

extern "C" __device__ __noinline__ SanitizerPatchResult twinscope_block_enter(void* userdata, uint64_t pc) {
  // Thread (0,0,0) alone speaks for the block: every other thread leaves the
  // enter patch at once, without even reading the header.
  if ((threadIdx.x | threadIdx.y | threadIdx.z) != 0 || userdata == nullptr) return SANITIZER_PATCH_SUCCESS;
  BlockProbeHeader* h = static_cast<BlockProbeHeader*>(userdata);
  if (h->off != 0) return SANITIZER_PATCH_SUCCESS;  // the "off" buffer of an untraced launch
  if (h->table != 0) {
    BlockProbeHeader* own = ResolveTable(h);
    if (own == nullptr) {
      atomicAdd(&h->overflow, 1u);
      return SANITIZER_PATCH_SUCCESS;
    }
    h = own;
    if (h->off != 0) return SANITIZER_PATCH_SUCCESS;
  }
  const uint64_t linear = LinearBlock();
  if (linear >= CapacityOf(h)) {
    atomicAdd(&h->overflow, 1u);
    return SANITIZER_PATCH_SUCCESS;
  }
  BlockProbeSlot* s = SlotOf(h, linear);
  s->enter_ns = GlobalTimer();
  s->sm = SmId();
  s->order = atomicAdd(&h->next_order, 1u);
  s->entered = 1;
  return SANITIZER_PATCH_SUCCESS;
}

extern "C" __device__ __noinline__ SanitizerPatchResult twinscope_block_exit(void* userdata, uint64_t pc) {
  if (userdata == nullptr) return SANITIZER_PATCH_SUCCESS;
  BlockProbeHeader* h = static_cast<BlockProbeHeader*>(userdata);
  if (h->off != 0) return SANITIZER_PATCH_SUCCESS;
  if (h->table != 0) {
    h = ResolveTable(h);
    if (h == nullptr || h->off != 0) return SANITIZER_PATCH_SUCCESS;
  }
  const uint64_t linear = LinearBlock();
  if (linear >= CapacityOf(h)) return SANITIZER_PATCH_SUCCESS;
  const uint32_t mask = __activemask();
  if (LaneId() == static_cast<uint32_t>(__ffs(mask) - 1)) {
    BlockProbeSlot* s = SlotOf(h, linear);
    const uint32_t n = static_cast<uint32_t>(__popc(mask));
    const uint32_t threads = blockDim.x * blockDim.y * blockDim.z;
    if (atomicAdd(&s->exited_threads, n) + n == threads) s->exit_ns = GlobalTimer();
  }
  return SANITIZER_PATCH_SUCCESS;
}
