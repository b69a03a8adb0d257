// The collector's accounting of what it saw and what it lost (seed 001):
// launches seen through callbacks against kernel records delivered, invalid
// timestamps, CUPTI's own drops, our bounds. Incremented from any thread with
// relaxed atomics, except the counts of records written (launches_seen,
// kernel/memcpy/memset records): those are released after their records are
// appended, so the counters Publish() copies into the trace's counters
// (periodic STATUS chunks and the final SUMMARY) never count a record that is
// not staged before that STATUS.
#pragma once

#include <atomic>
#include <cstdint>

namespace twinscope {
class TraceWriter;
}

namespace twinscope::cupti {

struct LossCounters {
  std::atomic<uint64_t> launches_seen{0};
  std::atomic<uint64_t> launches_failed{0};
  std::atomic<uint64_t> launches_during_capture{0};
  std::atomic<uint64_t> graph_launches{0};
  std::atomic<uint64_t> graph_launches_unknown_exec{0};
  std::atomic<uint64_t> graph_execs{0};
  std::atomic<uint64_t> graph_execs_incomplete{0};
  std::atomic<uint64_t> api_records{0};
  std::atomic<uint64_t> kernel_records{0};
  std::atomic<uint64_t> kernel_invalid{0};
  std::atomic<uint64_t> kernel_key_fallback{0};
  std::atomic<uint64_t> kernel_no_key{0};
  std::atomic<uint64_t> memcpy_records{0};
  std::atomic<uint64_t> memset_records{0};
  std::atomic<uint64_t> copy_invalid{0};
  std::atomic<uint64_t> other_records{0};
  std::atomic<uint64_t> cupti_dropped{0};
  std::atomic<uint64_t> buffers_completed{0};
  std::atomic<uint64_t> buffer_requests_denied{0};
  std::atomic<uint64_t> buffer_errors{0};
  std::atomic<uint64_t> nvtx_records{0};
  std::atomic<uint64_t> launch_ring_full_drains{0};  // an application thread applied launch ops itself

  // launches_seen - kernel_records when positive: launches whose kernel record
  // never came (exact once everything is flushed, at shutdown).
  uint64_t Missing() const {
    uint64_t seen = launches_seen.load(std::memory_order_relaxed);
    uint64_t got = kernel_records.load(std::memory_order_relaxed);
    return seen > got ? seen - got : 0;
  }

  // Sets every counter in `writer`; `pending_evicted` and `nvtx_unbalanced`
  // come from their owners.
  void Publish(TraceWriter& writer, uint64_t pending_evicted, uint64_t nvtx_unbalanced) const;
};

}  // namespace twinscope::cupti
