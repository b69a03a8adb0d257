#include "cupti/loss.h"

#include "format/trace_writer.h"
#include "twinscope/counters.h"

namespace twinscope::cupti {

void LossCounters::Publish(TraceWriter& w, uint64_t pending_evicted, uint64_t nvtx_unbalanced) const {
  namespace c = twinscope::counters;
  // acquire: a count published here covers records already staged in the writer (see ProcessBuffer).
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_acquire); };
  w.SetCounter(c::kLaunchesSeen, get(launches_seen));
  w.SetCounter(c::kLaunchesFailed, get(launches_failed));
  w.SetCounter(c::kLaunchesDuringCapture, get(launches_during_capture));
  w.SetCounter(c::kGraphLaunches, get(graph_launches));
  w.SetCounter(c::kGraphLaunchesUnknown, get(graph_launches_unknown_exec));
  w.SetCounter(c::kGraphExecs, get(graph_execs));
  w.SetCounter(c::kGraphExecsIncomplete, get(graph_execs_incomplete));
  w.SetCounter(c::kApiRecords, get(api_records));
  w.SetCounter(c::kKernelRecords, get(kernel_records));
  w.SetCounter(c::kKernelInvalidTs, get(kernel_invalid));
  w.SetCounter(c::kKernelKeyFallback, get(kernel_key_fallback));
  w.SetCounter(c::kKernelNoLaunchKey, get(kernel_no_key));
  w.SetCounter(c::kKernelRecordsMissing, Missing());
  w.SetCounter(c::kMemcpyRecords, get(memcpy_records));
  w.SetCounter(c::kMemsetRecords, get(memset_records));
  w.SetCounter(c::kCopyInvalidTs, get(copy_invalid));
  w.SetCounter(c::kOtherActivityRecords, get(other_records));
  w.SetCounter(c::kCuptiDropped, get(cupti_dropped));
  w.SetCounter(c::kBuffersCompleted, get(buffers_completed));
  w.SetCounter(c::kBufferRequestsDenied, get(buffer_requests_denied));
  w.SetCounter(c::kBufferErrors, get(buffer_errors));
  w.SetCounter(c::kPendingKeysEvicted, pending_evicted);
  w.SetCounter(c::kNvtxRecords, get(nvtx_records));
  w.SetCounter(c::kNvtxUnbalancedPops, nvtx_unbalanced);
  w.SetCounter(c::kLaunchRingFullDrains, get(launch_ring_full_drains));
}

}  // namespace twinscope::cupti
