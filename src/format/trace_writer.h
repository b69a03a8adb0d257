// Writer of twinscope trace files (format v1, docs/trace-format.md).
//
// Used by the collectors. Append() may be called from any thread (application
// threads, CUPTI's buffer thread, Sanitizer callbacks) and never does I/O: it
// copies the record into its thread's staging buffer. Full staging
// buffers are handed to one background thread that compresses (zstd),
// checksums and appends them as chunks. Memory is bounded by
// WriterOptions::max_buffered_bytes (bytes queued for the writer thread, plus
// at most one chunk_bytes staging buffer per record type per appending
// thread): past it, records are dropped and counted (counter
// "writer_dropped_records", written into the trace itself).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "twinscope/records.h"

namespace twinscope {

struct WriterOptions {
  std::string path;
  // Cap on bytes held in staging buffers and the write queue together.
  size_t max_buffered_bytes = 64u << 20;
  // Raw bytes of records per chunk before it is handed to the writer thread.
  size_t chunk_bytes = 256u << 10;
  int zstd_level = 1;
  // A STATUS chunk (counters) is written at most this often.
  std::chrono::milliseconds status_interval{1000};
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
  // Flushes, waits until everything is on disk, writes the SUMMARY chunk and
  // closes the file. Idempotent. Returns false and sets *error on I/O errors.
  bool Close(std::string* error = nullptr);

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  uint64_t bytes_written() const { return bytes_written_.load(std::memory_order_relaxed); }

 private:
  static constexpr size_t kTypeSlots = 8;  // RecordType values are 1..7

  struct Job {
    ChunkKind kind;
    RecordType type;
    uint32_t count;
    std::vector<uint8_t> payload;  // uncompressed
  };

  // One application thread's staging buffers. The owning thread appends under
  // `lock` (uncontended but for hand-offs), so appends from different threads
  // never wait for each other.
  struct ThreadStaging {
    std::atomic_flag lock = ATOMIC_FLAG_INIT;
    std::array<std::vector<uint8_t>, kTypeSlots> bufs;
    std::array<uint32_t, kTypeSlots> counts{};
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
  void PushLocked(Job job);  // mu_ held; strings are queued first
  void CollectAllLocked();   // mu_ held: every thread's staging -> queue
  void HandOffStringsLocked();
  void QueueStatusLocked(bool summary);
  nlohmann::json StatusObjectLocked(bool summary);
  void WriterLoop();
  bool WriteChunk(const Job& job);
  bool WriteAll(const void* data, size_t size);

  WriterOptions options_;
  uint64_t id_ = 0;  // distinguishes writers in the thread-local staging cache
  int fd_ = -1;
  void* zstd_ctx_ = nullptr;  // ZSTD_CCtx*, used by the writer thread only
  std::atomic<bool> closing_{false};
  std::atomic<uint64_t> queued_bytes_{0};  // bytes in jobs not yet written

  // Lock order: mu_ -> a ThreadStaging's lock -> free_mu_.
  std::mutex free_mu_;
  static constexpr size_t kMaxFreeBuffers = 16;
  std::vector<std::vector<uint8_t>> free_buffers_;  // written chunks' buffers, for reuse

  mutable std::mutex mu_;  // guards everything below up to the thread
  std::condition_variable cv_;  // wakes the writer thread
  std::vector<std::shared_ptr<ThreadStaging>> stagings_;
  std::deque<Job> queue_;
  bool closed_ = false;
  std::string io_error_;
  std::unordered_map<std::string, StringId> string_ids_;
  std::vector<uint8_t> pending_strings_;
  StringId next_string_id_ = 1;
  std::map<std::string, uint64_t> counters_;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::chrono::steady_clock::time_point last_status_{};
  std::thread thread_;

  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> bytes_written_{0};
};

}  // namespace twinscope
