// Names of the counters a trace carries in its STATUS and SUMMARY chunks
// (JSON object "counters": name -> unsigned integer). One place for the names
// so collectors, stats and exporters agree. docs/trace-format.md lists them.
#pragma once

namespace twinscope::counters {

// Both collectors.
inline constexpr char kLaunchesSeen[] = "launches_seen";  // kernel launches seen via callbacks (graph: per kernel node)
inline constexpr char kWriterDropped[] = "writer_dropped_records";  // dropped by our memory cap
inline constexpr char kNvtxRecords[] = "nvtx_records";
inline constexpr char kNvtxUnbalancedPops[] = "nvtx_unbalanced_pops";

// CUPTI collector (primary).
inline constexpr char kKernelRecords[] = "kernel_records";  // kernel activity records delivered by CUPTI
inline constexpr char kKernelInvalidTs[] = "kernel_records_invalid_timestamp";
inline constexpr char kMemcpyRecords[] = "memcpy_records";
inline constexpr char kMemsetRecords[] = "memset_records";
inline constexpr char kCopyInvalidTs[] = "memcpy_memset_records_invalid_timestamp";
inline constexpr char kApiRecords[] = "api_records";
inline constexpr char kCuptiDropped[] = "cupti_dropped_records";  // CUPTI's own drop count
inline constexpr char kGraphLaunches[] = "graph_launches";
inline constexpr char kGraphLaunchesUnknown[] = "graph_launches_unknown_exec";  // exec not seen at instantiation
inline constexpr char kBuffersCompleted[] = "cupti_buffers_completed";
inline constexpr char kKernelKeyFallback[] = "kernel_records_key_fallback";
inline constexpr char kOtherActivityRecords[] = "other_activity_records";

// Block probe (shadow).
inline constexpr char kLaunchesTraced[] = "launches_traced";
inline constexpr char kLaunchesSkipped[] = "launches_skipped_by_sampling";
inline constexpr char kBlocksExpected[] = "blocks_expected";
inline constexpr char kBlocksRecorded[] = "blocks_recorded";
inline constexpr char kBlocksOverflow[] = "blocks_overflow";  // did not fit in a device buffer
inline constexpr char kModulesLoaded[] = "modules_loaded";
inline constexpr char kModulesPatched[] = "modules_patched";
inline constexpr char kSanitizerCallbacks[] = "sanitizer_callbacks";

}  // namespace twinscope::counters
