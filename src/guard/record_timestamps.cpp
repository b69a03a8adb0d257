// The timestamp fields of CUPTI's activity records (record_timestamps.h), with
// compile-time proof that the CUPTI 13.0 structs agree with the 13.5.25
// offsets listed.
#include "guard/record_timestamps.h"

#include <cupti.h>

namespace twinscope::guard {
namespace {

// Offsets as measured with offsetof on CUPTI 13.5.25's cupti_activity.h.
constexpr uint16_t kKernelStart = 16, kKernelEnd = 24, kKernelCompleted = 32, kKernelQueued = 120,
                   kKernelSubmitted = 128;
static_assert(offsetof(CUpti_ActivityKernel10, start) == kKernelStart);
static_assert(offsetof(CUpti_ActivityKernel10, end) == kKernelEnd);
static_assert(offsetof(CUpti_ActivityKernel10, completed) == kKernelCompleted);
static_assert(offsetof(CUpti_ActivityKernel10, queued) == kKernelQueued);
static_assert(offsetof(CUpti_ActivityKernel10, submitted) == kKernelSubmitted);

constexpr uint16_t kCopyStart = 16, kCopyEnd = 24;  // Memcpy7, MemcpyPtoP4, Memset5
static_assert(offsetof(CUpti_ActivityMemcpy6, start) == kCopyStart && offsetof(CUpti_ActivityMemcpy6, end) == kCopyEnd);
static_assert(offsetof(CUpti_ActivityMemcpyPtoP4, start) == kCopyStart &&
              offsetof(CUpti_ActivityMemcpyPtoP4, end) == kCopyEnd);
static_assert(offsetof(CUpti_ActivityMemset4, start) == kCopyStart && offsetof(CUpti_ActivityMemset4, end) == kCopyEnd);

constexpr uint16_t kApiStart = 8, kApiEnd = 16;  // CUpti_ActivityAPI
static_assert(offsetof(CUpti_ActivityAPI, start) == kApiStart && offsetof(CUpti_ActivityAPI, end) == kApiEnd);
constexpr uint16_t kSyncStart = 8, kSyncEnd = 16;  // Synchronization2
static_assert(offsetof(CUpti_ActivitySynchronization2, start) == kSyncStart &&
              offsetof(CUpti_ActivitySynchronization2, end) == kSyncEnd);
constexpr uint16_t kOverheadStart = 24, kOverheadEnd = 32;  // Overhead3
static_assert(offsetof(CUpti_ActivityOverhead3, start) == kOverheadStart &&
              offsetof(CUpti_ActivityOverhead3, end) == kOverheadEnd);
constexpr uint16_t kMarkerTimestamp = 8;  // Marker2
static_assert(offsetof(CUpti_ActivityMarker2, timestamp) == kMarkerTimestamp);
constexpr uint16_t kEventTimestamp = 40;  // CudaEvent3's deviceTimestamp
static_assert(offsetof(CUpti_ActivityCudaEvent2, deviceTimestamp) == kEventTimestamp);
constexpr uint16_t kMemoryTimestamp = 32;  // Memory4
static_assert(offsetof(CUpti_ActivityMemory4, timestamp) == kMemoryTimestamp);
constexpr uint16_t kPoolTimestamp = 56;  // MemoryPool3
static_assert(offsetof(CUpti_ActivityMemoryPool3, timestamp) == kPoolTimestamp);
constexpr uint16_t kGraphStart = 8, kGraphEnd = 16;  // GraphTrace2
static_assert(offsetof(CUpti_ActivityGraphTrace2, start) == kGraphStart &&
              offsetof(CUpti_ActivityGraphTrace2, end) == kGraphEnd);

constexpr uint16_t End(uint16_t last) { return last + 8; }

// Kineto (torch.profiler) enables kernel, memcpy, memset, runtime, driver,
// synchronization, overhead, external correlation and CUDA-event records.
constexpr TimestampFields kFields[] = {
    {CUPTI_ACTIVITY_KIND_KERNEL,
     "kernel",
     "CUpti_ActivityKernel13",
     5,
     {kKernelStart, kKernelEnd, kKernelCompleted, kKernelQueued, kKernelSubmitted},
     End(kKernelSubmitted)},
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
     "concurrent_kernel",
     "CUpti_ActivityKernel13",
     5,
     {kKernelStart, kKernelEnd, kKernelCompleted, kKernelQueued, kKernelSubmitted},
     End(kKernelSubmitted)},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy", "CUpti_ActivityMemcpy7", 2, {kCopyStart, kCopyEnd}, End(kCopyEnd)},
    {CUPTI_ACTIVITY_KIND_MEMCPY2, "memcpy2", "CUpti_ActivityMemcpyPtoP4", 2, {kCopyStart, kCopyEnd}, End(kCopyEnd)},
    {CUPTI_ACTIVITY_KIND_MEMSET, "memset", "CUpti_ActivityMemset5", 2, {kCopyStart, kCopyEnd}, End(kCopyEnd)},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "runtime", "CUpti_ActivityAPI", 2, {kApiStart, kApiEnd}, End(kApiEnd)},
    {CUPTI_ACTIVITY_KIND_DRIVER, "driver", "CUpti_ActivityAPI", 2, {kApiStart, kApiEnd}, End(kApiEnd)},
    {CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API,
     "internal_launch_api",
     "CUpti_ActivityAPI",
     2,
     {kApiStart, kApiEnd},
     End(kApiEnd)},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
     "synchronization",
     "CUpti_ActivitySynchronization2",
     2,
     {kSyncStart, kSyncEnd},
     End(kSyncEnd)},
    {CUPTI_ACTIVITY_KIND_OVERHEAD,
     "overhead",
     "CUpti_ActivityOverhead3",
     2,
     {kOverheadStart, kOverheadEnd},
     End(kOverheadEnd)},
    {CUPTI_ACTIVITY_KIND_MARKER, "marker", "CUpti_ActivityMarker2", 1, {kMarkerTimestamp}, End(kMarkerTimestamp)},
    {CUPTI_ACTIVITY_KIND_CUDA_EVENT,
     "cuda_event",
     "CUpti_ActivityCudaEvent3",
     1,
     {kEventTimestamp},
     End(kEventTimestamp)},
    {CUPTI_ACTIVITY_KIND_MEMORY2, "memory2", "CUpti_ActivityMemory4", 1, {kMemoryTimestamp}, End(kMemoryTimestamp)},
    {CUPTI_ACTIVITY_KIND_MEMORY_POOL,
     "memory_pool",
     "CUpti_ActivityMemoryPool3",
     1,
     {kPoolTimestamp},
     End(kPoolTimestamp)},
    {CUPTI_ACTIVITY_KIND_GRAPH_TRACE,
     "graph_trace",
     "CUpti_ActivityGraphTrace2",
     2,
     {kGraphStart, kGraphEnd},
     End(kGraphEnd)},
    // Checked to carry no timestamp at all (13.0 and 13.5.25 alike).
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "external_correlation", "CUpti_ActivityExternalCorrelation", 0, {}, 8},
    {CUPTI_ACTIVITY_KIND_NAME, "name", "CUpti_ActivityName", 0, {}, 8},
    {CUPTI_ACTIVITY_KIND_MARKER_DATA, "marker_data", "CUpti_ActivityMarkerData2", 0, {}, 8},
    {CUPTI_ACTIVITY_KIND_CONTEXT, "context", "CUpti_ActivityContext4", 0, {}, 8},
    {CUPTI_ACTIVITY_KIND_DEVICE, "device", "CUpti_ActivityDevice6", 0, {}, 8},
    {CUPTI_ACTIVITY_KIND_STREAM, "stream", "CUpti_ActivityStream", 0, {}, 8},
    {CUPTI_ACTIVITY_KIND_FUNCTION, "function", "CUpti_ActivityFunction", 0, {}, 8},
    {CUPTI_ACTIVITY_KIND_MODULE, "module", "CUpti_ActivityModule", 0, {}, 8},
};

}  // namespace

const TimestampFields* TimestampFieldsOf(uint32_t kind) {
  for (const TimestampFields& f : kFields)
    if (f.kind == kind) return &f;
  return nullptr;
}

}  // namespace twinscope::guard
