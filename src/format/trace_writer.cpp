#include "format/trace_writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/crc32c.h"
#include "base/log.h"
#include "format/chunk.h"
#include "format/header.h"
#include "format/output_path.h"
#include "format/process_info.h"
#include "twinscope/counters.h"

namespace twinscope {

namespace {
std::atomic<uint64_t> g_next_writer_id{1};
std::string DumpJson(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
}  // namespace

std::unique_ptr<TraceWriter> TraceWriter::Open(const WriterOptions& options, const nlohmann::json& header,
                                               std::string* error) {
  std::unique_ptr<TraceWriter> w(new TraceWriter());
  w->options_ = options;
  if (w->options_.chunk_bytes < 4096) w->options_.chunk_bytes = 4096;
  if (w->options_.chunk_bytes > format::kMaxChunkRawSize / 2) w->options_.chunk_bytes = format::kMaxChunkRawSize / 2;
  w->options_.status_interval = std::max(w->options_.status_interval, std::chrono::milliseconds(1));
  if (options.per_process) {
    ClaimedOutput claimed;
    std::string claim_error;
    if (!ClaimOutput(options.path, ProcessShortName(), getpid(), &claimed, &claim_error)) {
      if (error) *error = claim_error;
      return nullptr;
    }
    w->fd_ = claimed.fd;
    w->path_ = claimed.path;
    w->options_.path = claimed.path;
    if (claimed.fallback)
      LogInfo("%s is another process's trace: this process (pid %d) writes %s", options.path.c_str(),
              static_cast<int>(getpid()), claimed.path.c_str());
  } else {
    w->path_ = options.path;
    w->fd_ = ::open(options.path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (w->fd_ < 0) {
      if (error) *error = "cannot create trace file '" + options.path + "': " + std::strerror(errno);
      return nullptr;
    }
  }
  std::string json = DumpJson(header);
  format::FilePreamble pre{};
  std::memcpy(pre.magic, kFileMagic, sizeof pre.magic);
  pre.version = kFormatVersion;
  pre.header_size = static_cast<uint32_t>(json.size());
  pre.header_crc = Crc32c(json.data(), json.size());
  if (!w->WriteAll(&pre, sizeof pre) || !w->WriteAll(json.data(), json.size())) {
    if (error) *error = "cannot write trace header to '" + options.path + "': " + std::strerror(errno);
    ::close(w->fd_);
    w->fd_ = -1;
    return nullptr;
  }
  const unsigned threads = std::clamp(options.compression_threads, 1u, 64u);
  for (unsigned i = 0; i < threads; ++i) {
    ZSTD_CCtx* ctx = ZSTD_createCCtx();
    if (!ctx) {
      if (error) *error = "cannot create a zstd compression context for '" + options.path + "' (out of memory?)";
      ::close(w->fd_);
      w->fd_ = -1;
      return nullptr;
    }
    w->zstd_ctxs_.push_back(ctx);
  }
  w->id_ = g_next_writer_id.fetch_add(1);
  w->last_status_ = std::chrono::steady_clock::now();
  // All threads start here, so they inherit the caller's signal mask.
  w->thread_ = std::thread([raw = w.get()] { raw->WriterLoop(); });
  for (unsigned i = 1; i < threads; ++i) w->workers_.emplace_back([raw = w.get(), i] { raw->CompressLoop(i); });
  return w;
}

TraceWriter::~TraceWriter() {
  Close(nullptr);
  for (void* ctx : zstd_ctxs_) ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(ctx));
}

TraceWriter::ThreadStaging* TraceWriter::LocalStaging() {
  // Trivially destructible, so it stays usable from atexit handlers after the
  // thread's destructors ran; the writer owns the staging (stagings_).
  struct Cache {
    uint64_t writer_id;
    ThreadStaging* staging;
  };
  thread_local Cache cache{0, nullptr};
  if (cache.writer_id == id_) return cache.staging;
  auto st = std::make_shared<ThreadStaging>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stagings_.push_back(st);
  }
  cache = Cache{id_, st.get()};
  return cache.staging;
}

bool TraceWriter::AppendRaw(RecordType type, const void* data, size_t size, size_t n) {
  const auto slot = static_cast<uint32_t>(type);
  const size_t bytes = size * n;
  if (slot >= kTypeSlots) {
    dropped_.fetch_add(n, std::memory_order_relaxed);
    return false;
  }
  ThreadStaging* st = LocalStaging();
  st->Lock();
  auto& buf = st->bufs[slot];
  // closing_ is read under the staging lock: Close() sets it before it
  // collects, so a record is either collected or counted as dropped.
  if (closing_.load(std::memory_order_acquire) ||
      queued_bytes_.load(std::memory_order_relaxed) + buf.size() + bytes > options_.max_buffered_bytes) {
    st->Unlock();
    dropped_.fetch_add(n, std::memory_order_relaxed);
    return false;
  }
  if (buf.capacity() == 0) {
    // A recycled buffer from a compressing thread: no fresh pages to fault in.
    // (free_mu_, not mu_: CollectAllLocked() holds mu_ while it takes staging
    // locks, so taking mu_ here, under a staging lock, could deadlock.)
    std::lock_guard<std::mutex> lock(free_mu_);
    if (!free_buffers_.empty()) {
      buf = std::move(free_buffers_.back());
      free_buffers_.pop_back();
    }
    if (buf.capacity() == 0) buf.reserve(options_.chunk_bytes + 4096);
  }
  const auto* p = static_cast<const uint8_t*>(data);
  buf.insert(buf.end(), p, p + bytes);
  appended_[slot].fetch_add(n, std::memory_order_relaxed);
  st->counts[slot] += static_cast<uint32_t>(n);
  if (buf.size() < options_.chunk_bytes) {
    st->Unlock();
    return true;
  }
  st->ready.push_back(TakeLocked(st, slot));
  st->Unlock();
  std::lock_guard<std::mutex> lock(mu_);
  PushReadyLocked(st);  // unless a collection queued it meanwhile
  return true;
}

TraceWriter::Job TraceWriter::TakeLocked(ThreadStaging* st, uint32_t slot) {
  Job job{ChunkKind::kRecords, static_cast<RecordType>(slot), st->counts[slot], std::move(st->bufs[slot])};
  st->bufs[slot] = {};
  st->counts[slot] = 0;
  return job;
}

void TraceWriter::PushLocked(Job job) {
  if (job.payload.empty()) return;
  HandOffStringsLocked();  // strings first: records may refer to them
  queued_bytes_.fetch_add(job.payload.size(), std::memory_order_relaxed);
  EnqueueLocked(std::move(job));
}

void TraceWriter::PushReadyLocked(ThreadStaging* st) {
  st->Lock();
  std::vector<Job> ready = std::move(st->ready);
  st->ready.clear();
  st->Unlock();
  for (auto& job : ready) PushLocked(std::move(job));
}

void TraceWriter::EnqueueLocked(Job job) {
  if (job.kind == ChunkKind::kRecords || job.kind == ChunkKind::kStrings) ++jobs_since_status_;
  auto owned = std::make_unique<Job>(std::move(job));
  to_compress_.push_back(owned.get());
  queue_.push_back(std::move(owned));
  work_cv_.notify_one();
  cv_.notify_one();  // the writer thread compresses too
}

void TraceWriter::CollectAllLocked() {
  for (auto& st : stagings_) {
    PushReadyLocked(st.get());  // older than what is still staged
    for (uint32_t slot = 1; slot < kTypeSlots; ++slot) {
      st->Lock();
      Job job = TakeLocked(st.get(), slot);
      st->Unlock();
      PushLocked(std::move(job));
    }
  }
  HandOffStringsLocked();
}

void TraceWriter::HandOffStringsLocked() {
  if (pending_strings_.empty()) return;
  Job job{ChunkKind::kStrings, RecordType{}, 0, std::move(pending_strings_)};
  pending_strings_ = {};
  EnqueueLocked(std::move(job));
}

StringId TraceWriter::Intern(std::string_view s) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = string_ids_.find(std::string(s));
  if (it != string_ids_.end()) return it->second;
  StringId id = next_string_id_++;
  string_ids_.emplace(std::string(s), id);
  uint32_t header[2] = {id, static_cast<uint32_t>(s.size())};
  const auto* h = reinterpret_cast<const uint8_t*>(header);
  pending_strings_.insert(pending_strings_.end(), h, h + sizeof header);
  pending_strings_.insert(pending_strings_.end(), s.begin(), s.end());
  if (pending_strings_.size() >= options_.chunk_bytes) HandOffStringsLocked();
  return id;
}

void TraceWriter::AddCounter(const std::string& name, uint64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_[name] += delta;
}

void TraceWriter::SetCounter(const std::string& name, uint64_t value) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_[name] = value;
}

uint64_t TraceWriter::Counter(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = counters_.find(name);
  return it == counters_.end() ? 0 : it->second;
}

void TraceWriter::SetMetadata(const std::string& key, nlohmann::json value) {
  std::lock_guard<std::mutex> lock(mu_);
  metadata_[key] = std::move(value);
}

void TraceWriter::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!closing_.load()) CollectAllLocked();
}

void TraceWriter::Checkpoint() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_.load()) return;  // Close() writes the SUMMARY
  CollectAllLocked();
  QueueStatusLocked(/*summary=*/false, /*always=*/false);
}

nlohmann::json TraceWriter::StatusObjectLocked(bool summary) {
  nlohmann::json j = metadata_;
  nlohmann::json c = nlohmann::json::object();
  for (const auto& [k, v] : counters_) c[k] = v;
  c[counters::kWriterDropped] = dropped_.load(std::memory_order_relaxed);
  j["counters"] = c;
  j["summary"] = summary;
  if (!io_error_.empty()) j["io_error"] = io_error_;
  return j;
}

void TraceWriter::QueueStatusLocked(bool summary, bool always, bool at_stop_request) {
  last_status_ = std::chrono::steady_clock::now();
  nlohmann::json j = StatusObjectLocked(summary);
  if (at_stop_request) j["at_stop_request"] = true;
  std::string body = DumpJson(j);  // without the two fields below, which change every time
  if (!always && jobs_since_status_ == 0 && body == last_status_body_) return;  // nothing new to say
  last_status_body_ = std::move(body);
  jobs_since_status_ = 0;
  j["bytes_written"] = bytes_written_.load(std::memory_order_relaxed);
  j["monotonic_ns"] = MonotonicNs();  // when these counters were taken (the header's start_monotonic_ns clock)
  std::string s = DumpJson(j);
  Job job{summary ? ChunkKind::kSummary : ChunkKind::kStatus, RecordType{}, 0,
          std::vector<uint8_t>(s.begin(), s.end())};
  EnqueueLocked(std::move(job));
}

bool TraceWriter::Close(std::string* error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || closing_.load()) {
      if (error && !io_error_.empty()) *error = io_error_;
      return io_error_.empty();
    }
    closing_.store(true, std::memory_order_release);
    CollectAllLocked();
    QueueStatusLocked(/*summary=*/true, /*always=*/true);
  }
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_workers_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  closed_ = true;
  if (options_.per_process && io_error_.empty() && !HasGpuWorkLocked()) {
    // A process that initialized CUDA and launched nothing leaves no file (docs/trace-format.md).
    if (::unlink(path_.c_str()) == 0) {
      removed_ = true;
      LogInfo("pid %d launched no GPU work: its trace %s is removed", static_cast<int>(getpid()), path_.c_str());
      const size_t slash = path_.rfind('/');
      const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash);
      if (dir.size() > 2 && dir.compare(dir.size() - 2, 2, ".d") == 0) ::rmdir(dir.c_str());  // if empty
    }
  }
  if (error && !io_error_.empty()) *error = io_error_;
  return io_error_.empty();
}

bool TraceWriter::HasGpuWorkLocked() const {
  if (keep_file_.load(std::memory_order_relaxed)) return true;
  for (RecordType t :
       {RecordType::kKernel, RecordType::kLaunch, RecordType::kBlock, RecordType::kMemcpy, RecordType::kMemset})
    if (appended_[static_cast<size_t>(t)].load(std::memory_order_relaxed) > 0) return true;
  for (const char* c : {counters::kLaunchesSeen, counters::kLaunchesMatching, counters::kKernelRecords})
    if (auto it = counters_.find(c); it != counters_.end() && it->second > 0) return true;
  return dropped_.load(std::memory_order_relaxed) > 0;  // records it could not keep: still work
}

bool TraceWriter::SummaryAtStopRequest(std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_.load()) return false;
    CollectAllLocked();
    QueueStatusLocked(/*summary=*/true, /*always=*/true, /*at_stop_request=*/true);
  }
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty() && writing_ == 0) return io_error_.empty();
    }
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// The writer thread: writes compressed jobs strictly in queue order and, while
// the front job is not ready, compresses the oldest unclaimed job itself (with
// compression_threads <= 1 it is the only compressing thread). Every
// status_interval, busy or not, it puts what is staged on disk and a STATUS
// after it, so a crash loses at most one interval.
void TraceWriter::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const auto status_due = last_status_ + options_.status_interval;
    if (!closing_.load() && std::chrono::steady_clock::now() >= status_due) {
      CollectAllLocked();
      QueueStatusLocked(/*summary=*/false, /*always=*/false);
      continue;
    }
    if (!queue_.empty() && queue_.front()->state == Job::State::kCompressed) {
      std::unique_ptr<Job> job = std::move(queue_.front());
      queue_.pop_front();
      ++writing_;
      lock.unlock();
      bool ok = WriteChunk(*job);
      lock.lock();
      --writing_;
      if (job->kind == ChunkKind::kRecords) {
        // Released only now that the chunk is on disk (or failed: then counted as dropped).
        queued_bytes_.fetch_sub(job->raw_size, std::memory_order_relaxed);
        if (!ok) dropped_.fetch_add(job->count, std::memory_order_relaxed);
      }
      continue;
    }
    if (!to_compress_.empty()) {
      Job* job = to_compress_.front();
      to_compress_.pop_front();
      job->state = Job::State::kCompressing;
      lock.unlock();
      Compress(*job, zstd_ctxs_[0]);
      lock.lock();
      job->state = Job::State::kCompressed;
      continue;
    }
    if (queue_.empty() && closing_.load()) return;  // Close() queued the SUMMARY with closing_ set: all written
    // Idle, or a worker is compressing the front job: sleep until woken or the next STATUS is due.
    cv_.wait_until(lock, status_due);
  }
}

// A compression worker: claims the oldest unclaimed job, compresses it with its
// own zstd context and tells the writer thread. Ends at Close(), once the
// writer thread has written everything.
void TraceWriter::CompressLoop(size_t ctx_index) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stop_workers_ || !to_compress_.empty(); });
    if (to_compress_.empty()) return;
    Job* job = to_compress_.front();
    to_compress_.pop_front();
    job->state = Job::State::kCompressing;
    lock.unlock();
    Compress(*job, zstd_ctxs_[ctx_index]);
    lock.lock();
    job->state = Job::State::kCompressed;
    cv_.notify_one();
  }
}

void TraceWriter::Compress(Job& job, void* zstd_ctx) {
  job.stored.resize(ZSTD_compressBound(job.payload.size()));
  size_t n = ZSTD_compressCCtx(static_cast<ZSTD_CCtx*>(zstd_ctx), job.stored.data(), job.stored.size(),
                               job.payload.data(), job.payload.size(), options_.zstd_level);
  if (ZSTD_isError(n)) {
    job.error = std::string("zstd compression failed: ") + ZSTD_getErrorName(n);
    job.stored.clear();
  } else {
    job.stored.resize(n);
    job.stored_crc = Crc32c(job.stored.data(), n);
  }
  if (job.kind != ChunkKind::kRecords) return;
  // The raw bytes are no longer needed: hand the buffer back to the appenders.
  std::vector<uint8_t> buf = std::move(job.payload);
  buf.clear();
  std::lock_guard<std::mutex> lock(free_mu_);
  if (free_buffers_.size() < kMaxFreeBuffers) free_buffers_.push_back(std::move(buf));
}

bool TraceWriter::WriteAll(const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool TraceWriter::WriteChunk(const Job& job) {
  if (!io_error_.empty()) return false;  // after the first error the file is abandoned
  if (!job.error.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    io_error_ = job.error;
    return false;
  }
  format::ChunkHeader h{};
  h.magic = kChunkMagic;
  h.kind = static_cast<uint32_t>(job.kind);
  h.record_type = static_cast<uint32_t>(job.type);
  h.record_count = job.count;
  h.raw_size = job.raw_size;
  h.stored_size = static_cast<uint32_t>(job.stored.size());
  h.payload_crc = job.stored_crc;
  h.header_crc = Crc32c(&h, offsetof(format::ChunkHeader, header_crc));
  if (!WriteAll(&h, sizeof h) || !WriteAll(job.stored.data(), job.stored.size())) {
    std::lock_guard<std::mutex> lock(mu_);
    io_error_ = "write to '" + options_.path + "' failed: " + std::strerror(errno);
    return false;
  }
  bytes_written_.fetch_add(sizeof h + job.stored.size(), std::memory_order_relaxed);
  return true;
}

}  // namespace twinscope
