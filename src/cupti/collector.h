// The CUPTI collector's state: one per process, created by InitializeInjection
// and never destroyed (CUPTI may call in until the very end of the process).
//
// Threads: CUPTI callbacks run on application threads (API, resource) and on
// CUPTI's own thread (buffer completion, also the thread that calls
// cuptiActivityFlushAll). An API callback only queues what it saw into its
// thread's launch ring (launch_tracker.h); the launch tracker makes launch
// keys, LaunchRecords and API records from it on our threads. A completed
// buffer is only queued on CUPTI's thread: our processing thread applies the
// queued launches, parses the buffer, ties its kernels to their launches and
// writes the records, so CUPTI's thread is free at once. A background thread
// flushes every flush_ms and performs the flush a SIGTERM/SIGINT asks for.
// Every entry point is behind a Firewall (injection.cpp); after an internal
// error collection stops and the program runs on.
#pragma once

#include <cupti.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cupti/activity.h"
#include "cupti/callbacks.h"
#include "cupti/graphs.h"
#include "cupti/launch_tracker.h"
#include "cupti/loss.h"
#include "format/trace_writer.h"
#include "nvtx/nvtx_capture.h"

namespace twinscope::cupti {

struct ThreadState;  // callbacks.cpp: an application thread's launch-path state

// Configuration from the TWINSCOPE_* environment (base/env_names.h).
struct Config {
  std::string output;
  bool kernels_only = false;  // seed-001 mitigation off: only CONCURRENT_KERNEL enabled
  bool write_kernel = true, write_memcpy = true, write_memset = true, write_api = true, write_nvtx = true;
  size_t buffer_bytes = 8u << 20;           // CUPTI host buffer
  long long device_buffer_pool_limit = -1;  // -1: CUPTI's default
  long long device_buffer_size_mb = -1;
  long long flush_ms = 500;  // 0: no periodic flush
  size_t max_buffered_bytes = 64u << 20;
  size_t max_pending_keys = 1u << 20;
  // TWINSCOPE_CUPTI_SKIP (benchmarks only): per-launch steps left out to measure their cost.
  bool skip_pending = false, skip_capture = false, skip_stream = false, skip_key = false, skip_clock = false,
       skip_callback = false;
  // TWINSCOPE_API_NESTED=0: no API record (and no clock reads) for the driver's launch call made inside a
  // runtime launch (cuLaunchKernel inside cudaLaunchKernel).
  bool api_nested = true;
  bool bench_levels = false;  // TWINSCOPE_BENCH_LEVELS=1 (benchmarks only): SetBenchLevel works
  nlohmann::json ToJson() const;
  static Config FromEnv();
};

// Host activity buffers, recycled. Bounded: past `max_buffers` outstanding a
// request is denied (CUPTI then drops records and counts them).
class BufferPool {
 public:
  BufferPool(size_t buffer_bytes, size_t max_buffers) : bytes_(buffer_bytes), max_(max_buffers) {}
  uint8_t* Acquire();
  void Release(uint8_t* buffer);
  size_t buffer_bytes() const { return bytes_; }

 private:
  const size_t bytes_, max_;
  std::mutex mu_;
  std::vector<uint8_t*> free_;
  size_t allocated_ = 0;
};

class Collector : public NvtxListener {
 public:
  // Called once from InitializeInjection. Never throws; every failure ends as
  // a tool_state in the trace and a message on stderr.
  static void Start();
  static Collector* Instance();

  // CUPTI entry points (wrapped in Firewalls by injection.cpp).
  void OnCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
  void OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  void OnBufferCompleted(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t size, size_t valid);
  void OnNvtx(const NvtxEvent& event) override;

  // Final flush: forced CUPTI flush, counters, SUMMARY, close. Idempotent.
  void Finalize();
  // Called from the signal handler (async-signal-safe): asks the flush thread
  // to flush (and finalize if `terminating`) and waits up to a few seconds.
  void FlushFromSignal(bool terminating);

  bool collecting() const { return collecting_.load(std::memory_order_acquire); }

  // Benchmarks only (TWINSCOPE_BENCH_LEVELS=1): 0 disables the API callbacks and the activity kinds, 1
  // enables the activity kinds only (the bare floor's setup), 2 everything. Call it between launches, with
  // the GPU idle. Returns 0, -1 when not enabled or `level` is unknown, or the first CUPTI error.
  int SetBenchLevel(int level);

 private:
  Collector() = default;
  void StartLocked();
  void SetupCupti();
  void EnableApiCallbacks(CUpti_SubscriberHandle subscriber);
  // Enables (or disables) the activity kinds the configuration asks for.
  CUptiResult EnableActivity(bool enable);
  void SetToolState(const std::string& state, const std::string& message, int cupti_result,
                    const std::string& other_subscriber = "");
  void FlushLoop();
  void ProcessLoop();
  // Parses one completed buffer, resolves its kernels' launch keys, writes the
  // records and gives the buffer back to the pool.
  void ProcessBuffer(uint8_t* buffer, size_t valid);
  // Waits until every queued buffer is processed; false after `timeout`.
  bool WaitForProcessing(std::chrono::milliseconds timeout);
  void PublishCounters();
  // The guard's report on the program's own CUPTI client into tool_state.
  void PublishProgramCupti();
  void RecordDevice(CUcontext ctx);

  // callbacks.cpp (application threads): capture launch facts into the
  // thread's LaunchRing; launches_ turns them into keys and records.
  void OnApi(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* cb);
  void OnLaunchEnter(LaunchApiInfo info, const CUpti_CallbackData* cb);
  uint8_t OnLaunchExit(ThreadState& t, const CUpti_CallbackData* cb);  // ExitFlags
  const KernelName* KernelNameOf(ThreadState& t, const char* name);
  ThreadState& State();
  void OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* res);

  Config config_;
  std::unique_ptr<TraceWriter> writer_;
  std::string cupti_library_;
  nlohmann::json tool_state_ = nlohmann::json::object();
  std::mutex tool_state_mu_;             // tool_state_ after start (flush thread and exit)
  std::atomic<bool> collecting_{false};  // CUPTI set up and the trace open
  std::atomic<bool> finalized_{false};
  int pid_ = 0;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::mutex bench_mu_;  // SetBenchLevel

  LossCounters loss_;
  std::unique_ptr<LaunchSink> launch_sink_;
  std::unique_ptr<LaunchTracker> launches_;
  std::unique_ptr<KernelNames> kernel_names_;
  std::unique_ptr<GraphRegistry> graphs_;
  std::unique_ptr<BufferPool> pool_;
  std::mutex buffer_mu_;  // serializes buffer parsing (names_)
  std::unique_ptr<NameCache> names_;

  // API callbacks we enable, by domain: cbid -> interned API name (0 = off).
  std::vector<StringId> runtime_names_, driver_names_;

  std::mutex devices_mu_;
  nlohmann::json devices_ = nlohmann::json::array();

  std::thread flush_thread_;
  // Completed buffers waiting for the processing thread.
  struct CompletedBuffer {
    uint8_t* buffer;
    size_t valid;
  };
  std::mutex completed_mu_;
  std::condition_variable completed_cv_;  // a buffer was queued / one was processed
  std::deque<CompletedBuffer> completed_;
  bool processing_ = false;                   // under completed_mu_
  std::atomic<bool> drain_requested_{false};  // a launch ring passed half full
  std::atomic<bool> process_started_{false};  // else buffers are processed where they complete
  std::thread process_thread_;
  int wake_pipe_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::atomic<int> signal_request_{0};  // 1: flush, 2: flush and finalize
  std::atomic<bool> signal_done_{false};
};

}  // namespace twinscope::cupti
