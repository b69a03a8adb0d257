// Writer of twinscope trace files (format v1, docs/trace-format.md).
//
// Used by the collectors. Append() may be called from any thread (application
// threads, CUPTI's buffer thread, Sanitizer callbacks) and never does I/O: it
// copies the record into its thread's staging buffer. Full staging buffers
// become jobs, queued in submission order. WriterOptions::compression_threads
// threads (the writer thread and compression workers) compress (zstd) and
// checksum jobs in parallel; the one writer thread appends them to the file
// strictly in submission order, so the file's chunk order does not depend on
// the number of threads. Memory is bounded by
// WriterOptions::max_buffered_bytes (bytes queued and not yet written, plus
// at most one chunk_bytes staging buffer per record type per appending
// thread): past it, records are dropped and counted (counter
// "writer_dropped_records", written into the trace itself).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "twinscope/records.h"

namespace twinscope {

struct WriterOptions {
  std::string path;
  // The collectors' mode (docs/trace-format.md, "Run folders"): `path` is
  // TWINSCOPE_OUTPUT, a file or a folder, resolved for this process by
  // ClaimOutput (format/output_path.h; always O_EXCL), and at a clean Close()
  // a trace without GPU work (no kernel, launch, block, memcpy or memset
  // record, no launches counted, KeepFile() not called) is removed. Off: `path`
  // is created or truncated as given (tools, tests).
  bool per_process = false;
  // Cap on bytes held in staging buffers and the write queue together.
  size_t max_buffered_bytes = 64u << 20;
  // Raw bytes of records per chunk before it is handed to the writer thread.
  size_t chunk_bytes = 256u << 10;
  int zstd_level = 1;
  // The writer thread itself puts staged records on disk and writes a STATUS
  // chunk (counters) at least this often, however busy it is, unless nothing
  // changed (collectors also call Checkpoint() every flush period).
  std::chrono::milliseconds status_interval{1000};
  // Threads that compress chunks, the writer thread included: 0 or 1 means
  // the writer thread compresses alone; n > 1 adds n - 1 workers (at most 64).
  // Default: min(4, cores).
  unsigned compression_threads = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
};

class TraceWriter {
 public:
  // Creates the file and writes the header. `header` is a JSON object (see
  // docs/trace-format.md for the fields collectors fill in). Returns null and
  // sets *error if the file cannot be created.
  static std::unique_ptr<TraceWriter> Open(const WriterOptions& options, const nlohmann::json& header,
                                           std::string* error);
  ~TraceWriter();  // Close()s if still open
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Appends one record. Thread-safe, never blocks on I/O. Returns false if the
  // record was dropped (memory cap reached or writer closed); drops are counted.
  template <typename T>
  bool Append(const T& record) {
    return AppendRaw(RecordTypeOf<T>::value, &record, sizeof(T), 1);
  }
  template <typename T>
  bool AppendMany(const T* records, size_t n) {
    return AppendRaw(RecordTypeOf<T>::value, records, sizeof(T), n);
  }

  // Interns a string, returning its id (stable for the life of the writer).
  StringId Intern(std::string_view s);

  // Counters, written in every STATUS chunk and the SUMMARY chunk.
  void AddCounter(const std::string& name, uint64_t delta);
  void SetCounter(const std::string& name, uint64_t value);
  uint64_t Counter(const std::string& name) const;
  // Extra JSON fields of STATUS/SUMMARY objects ("devices", "tool_state"...).
  void SetMetadata(const std::string& key, nlohmann::json value);

  // Hands all staged records to the writer thread (does not wait).
  void Flush();
  // Flush() plus a STATUS chunk with the counters and metadata as set now,
  // queued after those records (so every record a counter counted before this
  // call precedes the STATUS in the file). Skipped when neither records nor
  // counters nor metadata changed since the last STATUS. Takes the writer's
  // lock briefly, no I/O: for a collector's background thread, once per flush
  // period, so a killed process's last counters are at most a period old.
  void Checkpoint();
  // Flushes, waits until everything is on disk, writes the SUMMARY chunk and
  // closes the file. Idempotent. Returns false and sets *error on I/O errors.
  bool Close(std::string* error = nullptr);

  // The stop request (docs/trace-format.md, "Stop request"): everything staged,
  // then a SUMMARY marked "at_stop_request": true, and waits (at most
  // `timeout`) until all of it is on disk. The writer stays open; a later
  // Close() writes the final SUMMARY. True if it is on disk in time.
  bool SummaryAtStopRequest(std::chrono::milliseconds timeout);

  // The file actually written (per_process: the claimed one).
  const std::string& path() const { return path_; }
  // per_process: keep the file at Close() even without GPU work (it says
  // something: a configuration error, a silent probe, launches of other kernels).
  void KeepFile() { keep_file_.store(true, std::memory_order_relaxed); }
  // per_process: Close() removed the file (no GPU work).
  bool removed() const { return removed_; }

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  uint64_t bytes_written() const { return bytes_written_.load(std::memory_order_relaxed); }

 private:
  static constexpr size_t kTypeSlots = 8;  // RecordType values are 1..7

  // One chunk on its way to the file. Created under mu_ (or by its appending
  // thread), compressed by the one thread that claimed it (outside mu_), then
  // written by the writer thread; `state` is read and written under mu_ only.
  struct Job {
    enum class State { kQueued, kCompressing, kCompressed };
    Job(ChunkKind k, RecordType t, uint32_t n, std::vector<uint8_t> raw)
        : kind(k), type(t), count(n), payload(std::move(raw)), raw_size(static_cast<uint32_t>(payload.size())) {}
    ChunkKind kind;
    RecordType type;
    uint32_t count;
    std::vector<uint8_t> payload;  // uncompressed; a records buffer is recycled once compressed
    uint32_t raw_size;             // payload's size, kept after the payload is recycled
    State state = State::kQueued;
    std::vector<uint8_t> stored;  // the zstd frame
    uint32_t stored_crc = 0;
    std::string error;  // compression failure, reported when the job's turn to be written comes
  };

  // One application thread's staging buffers. The owning thread appends under
  // `lock` (uncontended but for hand-offs), so appends from different threads
  // never wait for each other. A full buffer waits in `ready` until its thread
  // (or a collection, whichever takes mu_ first) queues it, so no record is
  // ever outside both the staging and the queue.
  struct ThreadStaging {
    std::atomic_flag lock = ATOMIC_FLAG_INIT;
    std::array<std::vector<uint8_t>, kTypeSlots> bufs;
    std::array<uint32_t, kTypeSlots> counts{};
    std::vector<Job> ready;
    void Lock() {
      while (lock.test_and_set(std::memory_order_acquire)) {
      }
    }
    void Unlock() { lock.clear(std::memory_order_release); }
  };

  TraceWriter() = default;
  bool AppendRaw(RecordType type, const void* data, size_t size, size_t n);
  ThreadStaging* LocalStaging();
  // Moves one staging buffer into a job (caller holds st->lock).
  Job TakeLocked(ThreadStaging* st, uint32_t slot);
  void PushLocked(Job job);                 // mu_ held; strings are queued first
  void PushReadyLocked(ThreadStaging* st);  // mu_ held: st's full buffers -> queue
  void EnqueueLocked(Job job);              // mu_ held: append to queue_ and to_compress_
  void CollectAllLocked();                  // mu_ held: every thread's staging -> queue
  void HandOffStringsLocked();
  // Queues a STATUS (or the SUMMARY); a STATUS that would repeat the last one
  // with no records queued since is skipped unless `always`.
  void QueueStatusLocked(bool summary, bool always, bool at_stop_request = false);
  nlohmann::json StatusObjectLocked(bool summary);
  bool HasGpuWorkLocked() const;
  void WriterLoop();
  void CompressLoop(size_t ctx_index);  // a compression worker
  // Compresses and checksums `job` (no lock held by the caller).
  void Compress(Job& job, void* zstd_ctx);
  bool WriteChunk(const Job& job);
  bool WriteAll(const void* data, size_t size);

  WriterOptions options_;
  std::string path_;
  std::atomic<bool> keep_file_{false};
  bool removed_ = false;
  std::array<std::atomic<uint64_t>, 8> appended_{};  // records accepted, by RecordType
  uint64_t id_ = 0;                                  // distinguishes writers in the thread-local staging cache
  int fd_ = -1;
  // One ZSTD_CCtx* per compressing thread: [0] the writer thread's, [i] worker i's.
  std::vector<void*> zstd_ctxs_;
  std::atomic<bool> closing_{false};
  std::atomic<uint64_t> queued_bytes_{0};  // bytes in jobs not yet written

  // Lock order: mu_ -> a ThreadStaging's lock -> free_mu_. No other mutex;
  // cv_ and work_cv_ wait on mu_.
  std::mutex free_mu_;
  static constexpr size_t kMaxFreeBuffers = 16;
  std::vector<std::vector<uint8_t>> free_buffers_;  // compressed chunks' buffers, for reuse

  mutable std::mutex mu_;            // guards everything below up to the threads
  std::condition_variable cv_;       // wakes the writer thread
  std::condition_variable work_cv_;  // wakes compression workers
  std::vector<std::shared_ptr<ThreadStaging>> stagings_;
  // Jobs not yet written, in submission (= file) order. Only the writer thread
  // pops, and only a compressed front job, so the Job* below stay valid.
  std::deque<std::unique_ptr<Job>> queue_;
  std::deque<Job*> to_compress_;  // the jobs of queue_ nobody has claimed yet, oldest first
  int writing_ = 0;               // jobs the writer thread took off queue_ and is writing
  bool stop_workers_ = false;
  bool closed_ = false;
  std::string io_error_;  // written by the writer thread only, under mu_
  std::unordered_map<std::string, StringId> string_ids_;
  std::vector<uint8_t> pending_strings_;
  StringId next_string_id_ = 1;
  std::map<std::string, uint64_t> counters_;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::chrono::steady_clock::time_point last_status_{};  // last STATUS queued, or skipped as unchanged
  std::string last_status_body_;                         // its JSON without the fields that always change
  uint64_t jobs_since_status_ = 0;                       // record and string chunks queued since
  std::thread thread_;
  std::vector<std::thread> workers_;

  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> bytes_written_{0};
};

}  // namespace twinscope
