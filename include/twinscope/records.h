// On-disk record types of the twinscope trace format, version 1.
//
// Plain data only: no CUDA, CUPTI or Sanitizer types, no pointers, no padding
// surprises (every record's size is pinned by a static_assert). A record is
// written to disk exactly as laid out here (little-endian hosts only), inside
// zstd-compressed chunks that each hold records of one RecordType.
// docs/trace-format.md describes the file around these records.
#pragma once

#include <cstdint>

namespace twinscope {

inline constexpr char kFileMagic[8] = {'T', 'W', 'S', 'C', 'O', 'P', 'E', '1'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint32_t kChunkMagic = 0x4b4e4843;  // "CHNK"

// Id of an interned string (kernel names, NVTX names, range paths, ...).
// 0 means "no string".
using StringId = uint32_t;

// What a chunk holds. Records chunks hold RecordType records; STRINGS and
// the JSON chunks are described in docs/trace-format.md.
enum class ChunkKind : uint32_t {
  kRecords = 1,  // fixed-size records of one RecordType
  kStrings = 2,  // interned strings: repeated {u32 id, u32 len, len bytes}
  kStatus = 3,   // JSON counters snapshot, written periodically
  kSummary = 4,  // JSON counters at clean shutdown; last chunk of the file
};

enum class RecordType : uint32_t {
  kKernel = 1,  // GPU kernel execution (CUPTI activity)
  kMemcpy = 2,  // GPU copy (CUPTI activity)
  kMemset = 3,  // GPU memset (CUPTI activity)
  kApi = 4,     // CUDA runtime/driver API call on a CPU thread
  kNvtx = 5,    // NVTX range or mark
  kLaunch = 6,  // one kernel launch as seen on the CPU (both collectors)
  kBlock = 7,   // one thread block of a traced launch (block probe)
};

// Flags shared by GPU activity records.
enum ActivityFlags : uint32_t {
  kFlagInvalidTimestamp = 1u << 0,  // start or end zero, or end < start
  kFlagGraph = 1u << 1,             // ran as a CUDA Graph node
  kFlagKeyFallback = 1u << 2,       // launch key could not be tied exactly
  kFlagNoLaunchKey = 1u << 3,       // no launch key at all
  // Shadow launch records: why the block probe traced this launch (header
  // "sampling" holds the settings; LaunchRecord::sample_index its place).
  kFlagSampleCatchUp = 1u << 4,  // for a sampling candidate of an earlier launch that could not be traced
  kFlagSampleRate = 1u << 5,     // under a --per-second limit
  kFlagSampleBudget = 1u << 6,   // under a --budget
  kFlagPatchToggled = 1u << 7,   // its module was patched only around sampled launches (toggle mode)
};

// The launch key of ../shared/DESIGN.md, as stored. `hash` is computed by
// src/launchkey from (path, kernel name, ordinal, grid, block) and is equal
// for equal keys in two processes.
struct LaunchKey {
  uint64_t hash;
  StringId path;     // NVTX range path, e.g. "step#17/attn#0"; 0 = no range
  uint32_t ordinal;  // nth launch of this kernel in the innermost range instance
};
static_assert(sizeof(LaunchKey) == 16);

struct Dim3 {
  uint32_t x, y, z;
};
static_assert(sizeof(Dim3) == 12);

struct KernelRecord {
  uint64_t start_ns;  // GPU timestamps, CUPTI clock (ns)
  uint64_t end_ns;
  uint64_t grid_id;
  uint64_t graph_node_id;  // 0 unless kFlagGraph
  LaunchKey key;
  uint32_t correlation_id;
  uint32_t device;
  uint32_t context;
  uint32_t stream;
  uint32_t graph_id;
  uint32_t flags;  // ActivityFlags
  Dim3 grid;
  Dim3 block;
  uint32_t static_shared_bytes;
  uint32_t dynamic_shared_bytes;
  uint32_t registers_per_thread;
  StringId name;       // mangled name as CUPTI reports it
  StringId demangled;  // demangled name (0 if the same as name)
  uint32_t reserved[3];
};
static_assert(sizeof(KernelRecord) == 128);

enum class CopyKind : uint8_t {
  kUnknown = 0,
  kHtoD = 1,
  kDtoH = 2,
  kHtoA = 3,
  kAtoH = 4,
  kAtoA = 5,
  kAtoD = 6,
  kDtoA = 7,
  kDtoD = 8,
  kHtoH = 9,
  kPtoP = 10,
};

struct MemcpyRecord {
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t bytes;
  uint64_t graph_node_id;
  uint32_t correlation_id;
  uint32_t device;
  uint32_t context;
  uint32_t stream;
  uint32_t graph_id;
  uint32_t flags;     // ActivityFlags
  uint8_t copy_kind;  // CopyKind
  uint8_t src_kind;   // CUPTI memory kind, as reported
  uint8_t dst_kind;
  uint8_t reserved0;
  uint32_t reserved1;
};
static_assert(sizeof(MemcpyRecord) == 64);

struct MemsetRecord {
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t bytes;
  uint64_t graph_node_id;
  uint32_t correlation_id;
  uint32_t device;
  uint32_t context;
  uint32_t stream;
  uint32_t graph_id;
  uint32_t flags;  // ActivityFlags
  uint32_t value;
  uint32_t reserved;
};
static_assert(sizeof(MemsetRecord) == 64);

enum class ApiDomain : uint32_t { kRuntime = 1, kDriver = 2 };

// One CUDA API call: CPU enter/exit in the CUPTI clock.
struct ApiRecord {
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t thread_id;  // OS thread id (gettid)
  uint32_t correlation_id;
  uint32_t domain;  // ApiDomain
  uint32_t cbid;    // CUPTI callback id within the domain
  StringId name;    // e.g. "cudaLaunchKernel"
};
static_assert(sizeof(ApiRecord) == 40);

enum class NvtxKind : uint32_t {
  kPushPop = 1,   // nested range on one thread
  kStartEnd = 2,  // process-wide range, may cross threads
  kMark = 3,      // instant
};

struct NvtxRecord {
  uint64_t start_ns;
  uint64_t end_ns;     // == start_ns for marks; 0 if the range never closed
  uint64_t thread_id;  // thread that opened the range
  uint64_t range_id;   // start/end range id; 0 for push/pop
  uint32_t kind;       // NvtxKind
  StringId domain;     // 0 = default domain
  StringId name;
  uint32_t depth;  // push/pop nesting depth (0 = outermost)
};
static_assert(sizeof(NvtxRecord) == 48);

// One kernel launch as a collector saw it on the CPU. The primary writes one
// per launched kernel (one per kernel node for a graph launch); the shadow
// writes one per traced launch. `seq` numbers launches within a process and
// links BlockRecords to their launch.
struct LaunchRecord {
  uint64_t seq;
  uint64_t cpu_ns;  // when the launch API was entered (collector clock)
  uint64_t thread_id;
  uint64_t grid_id;        // 0 if unknown at launch time
  uint64_t graph_exec_id;  // 0 for a plain launch
  LaunchKey key;
  uint32_t correlation_id;  // CUPTI correlation id (primary); 0 in the shadow
  uint32_t device;
  uint32_t stream;
  StringId kernel;  // kernel name (mangled where known)
  Dim3 grid;
  Dim3 block;
  Dim3 cluster;
  uint32_t flags;            // ActivityFlags (kFlagGraph for graph nodes)
  uint32_t blocks_recorded;  // shadow: BlockRecords written for this launch
  uint32_t sample_index;     // shadow: its index among the selected kernels' launches (low 32 bits)
  uint32_t reserved[2];
};
static_assert(sizeof(LaunchRecord) == 128);

// One thread block of a traced launch (block probe). Times are the GPU's
// %globaltimer in ns.
struct BlockRecord {
  uint64_t launch_seq;  // LaunchRecord::seq
  uint64_t enter_ns;    // first thread of the block entered
  uint64_t exit_ns;     // last thread of the block left
  uint32_t block_linear;
  uint32_t order;  // arrival order within the launch (0 = first)
  uint32_t x, y, z;
  uint32_t sm;
};
static_assert(sizeof(BlockRecord) == 48);

// Size of one record of each type, or 0 for an unknown type.
constexpr uint32_t RecordSize(RecordType t) {
  switch (t) {
    case RecordType::kKernel:
      return sizeof(KernelRecord);
    case RecordType::kMemcpy:
      return sizeof(MemcpyRecord);
    case RecordType::kMemset:
      return sizeof(MemsetRecord);
    case RecordType::kApi:
      return sizeof(ApiRecord);
    case RecordType::kNvtx:
      return sizeof(NvtxRecord);
    case RecordType::kLaunch:
      return sizeof(LaunchRecord);
    case RecordType::kBlock:
      return sizeof(BlockRecord);
  }
  return 0;
}

template <typename T>
struct RecordTypeOf;
template <>
struct RecordTypeOf<KernelRecord> {
  static constexpr RecordType value = RecordType::kKernel;
};
template <>
struct RecordTypeOf<MemcpyRecord> {
  static constexpr RecordType value = RecordType::kMemcpy;
};
template <>
struct RecordTypeOf<MemsetRecord> {
  static constexpr RecordType value = RecordType::kMemset;
};
template <>
struct RecordTypeOf<ApiRecord> {
  static constexpr RecordType value = RecordType::kApi;
};
template <>
struct RecordTypeOf<NvtxRecord> {
  static constexpr RecordType value = RecordType::kNvtx;
};
template <>
struct RecordTypeOf<LaunchRecord> {
  static constexpr RecordType value = RecordType::kLaunch;
};
template <>
struct RecordTypeOf<BlockRecord> {
  static constexpr RecordType value = RecordType::kBlock;
};

}  // namespace twinscope
