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
// CUPTI collector, added with the collector (src/cupti).
inline constexpr char kKernelNoLaunchKey[] = "kernel_records_no_launch_key";  // no pending launch fitted
inline constexpr char kKernelRecordsMissing[] = "kernel_records_missing";     // launches_seen - kernel_records, if > 0
inline constexpr char kPendingKeysEvicted[] = "pending_launch_keys_evicted";  // launch keys dropped by our bound
inline constexpr char kBufferRequestsDenied[] = "cupti_buffer_requests_denied";  // host pool full: CUPTI drops
inline constexpr char kBufferErrors[] = "cupti_buffer_errors";                   // a buffer walk stopped on an error
inline constexpr char kLaunchesDuringCapture[] = "launches_during_capture";      // recorded into a graph, not run
inline constexpr char kLaunchesFailed[] = "launches_failed";                     // launch API returned an error
inline constexpr char kGraphExecs[] = "graph_execs_instantiated";
inline constexpr char kGraphExecsIncomplete[] = "graph_execs_incomplete";  // nodes could not be inspected
// An application thread found its launch queue full and applied the queued ops itself (slow, nothing lost).
inline constexpr char kLaunchRingFullDrains[] = "launch_ring_full_drains";

// Block probe (shadow).
inline constexpr char kLaunchesTraced[] = "launches_traced";
inline constexpr char kLaunchesSkipped[] = "launches_skipped_by_sampling";
inline constexpr char kBlocksExpected[] = "blocks_expected";
inline constexpr char kBlocksRecorded[] = "blocks_recorded";
inline constexpr char kBlocksOverflow[] = "blocks_overflow";  // did not fit in a device buffer
inline constexpr char kModulesLoaded[] = "modules_loaded";
inline constexpr char kModulesPatched[] = "modules_patched";
inline constexpr char kSanitizerCallbacks[] = "sanitizer_callbacks";
// Block probe, added with the probe (src/blocks): every block or launch not recorded cleanly.
inline constexpr char kLaunchesSelectedUnpatched[] = "launches_selected_unpatched";  // module not patched
inline constexpr char kLaunchesNoBuffer[] = "launches_untraced_no_buffer";  // no device buffer: blocks in overflow
inline constexpr char kBlocksMissing[] = "blocks_missing";                  // had a slot but never entered
inline constexpr char kBlocksIncomplete[] = "blocks_incomplete";            // entered, not all threads left (exit_ns 0)
inline constexpr char kBlocksLost[] = "blocks_lost_copy_failed";            // buffer copy failed or header damaged
inline constexpr char kModulesUnparsed[] = "modules_cubin_unparsed";        // cubin not ELF: names from its strings
inline constexpr char kModulesPatchFailed[] = "modules_patch_failed";
inline constexpr char kBlocksForcedDrains[] = "blocks_forced_drains";  // ring full or arena 3/4 used: waited
inline constexpr char kBlocksSyncDrains[] = "blocks_sync_drains";      // drains at the program's own syncs
inline constexpr char kBlocksDecoderWaits[] = "blocks_decoder_waits";  // drains that waited for the decoder thread
inline constexpr char kSanitizerErrors[] = "sanitizer_errors";         // Sanitizer calls that failed
inline constexpr char kGraphKernelNodeLaunches[] = "graph_kernel_node_launches";
// Block probe: tables handed out for graph launches (one per traced kernel and graph launch).
inline constexpr char kGraphTables[] = "graph_tables";
// Block probe: graph launches of a traced kernel on two threads at once (they share its callback data).
inline constexpr char kGraphLaunchesOverlapping[] = "graph_launches_overlapping";
inline constexpr char kBlocksBadBuffer[] = "blocks_bad_buffer_header";  // launches whose buffer header was wrong
// Block probe sampling and patch toggling (docs/block-probe.md, "Patch modes").
inline constexpr char kLaunchesMatching[] = "launches_matching";  // launches of selected kernels: traced + skipped
inline constexpr char kLaunchesSampledUnpatched[] = "launches_sampled_module_unpatched";  // due, module unpatched
inline constexpr char kModulesRepatched[] = "modules_repatched";      // toggle mode: patch calls after the first
inline constexpr char kModulesUnpatched[] = "modules_unpatched";      // toggle mode: unpatch calls
inline constexpr char kToggleSyncs[] = "patch_toggle_stream_syncs";   // streams synchronised to toggle or finish
inline constexpr char kToggleNs[] = "patch_toggle_ns";                // host time spent toggling (syncs included)
inline constexpr char kTogglesDeferred[] = "patch_toggles_deferred";  // launches kept coming: toggled later
inline constexpr char kModulesPinnedByGraph[] =
    "modules_pinned_by_graph";  // toggle mode: a graph exec was made, the target module stays patched
inline constexpr char kModulesPinnedUnpatched[] =
    "modules_pinned_unpatched";  // ... but could not be patched then: stays unpatched, launches untraced
inline constexpr char kSamplingCostNs[] = "sampling_cost_ns";           // --budget: cost charged to samples
inline constexpr char kSamplingProgramNs[] = "sampling_program_ns";     // --budget: the program's own time
inline constexpr char kSamplingMaxCostNs[] = "sampling_max_sample_ns";  // --budget: the costliest sample

}  // namespace twinscope::counters
