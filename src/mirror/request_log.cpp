// The request log's writer thread: batches of lines appended, fsynced at most every sync_every.
#include "mirror/request_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace twinscope::mirror {

namespace {

constexpr size_t kMaxNamed = 1000;

// Writes all of `data`; false on an error.
bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

RequestLog::~RequestLog() { Close(); }

Status RequestLog::Open(const std::string& path, size_t max_queued) {
  RequestLogOptions o;
  o.max_queued = max_queued;
  return Open(path, o);
}

Status RequestLog::Open(const std::string& path, const RequestLogOptions& options) {
  if (fd_ >= 0) return Status::Error("request log already open");
  // Bodies and headers of real requests: readable by the owner only.
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd_ < 0) return Status::Error("cannot open request log '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) != 0600 && ::fchmod(fd_, 0600) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    return Status::Error("cannot make request log '" + path + "' private (mode 0600): " + why);
  }
  opt_ = options;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void RequestLog::Write(std::string line) {
  if (fd_ < 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || queued_end_lines_ >= opt_.max_queued) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    queue_.push_back(Line{std::move(line), {}});
    ++queued_end_lines_;
  }
  cv_.notify_one();
}

bool RequestLog::ReserveBody(uint64_t bytes) {
  uint64_t have = body_bytes_.load(std::memory_order_relaxed);
  do {
    if (have + bytes > opt_.max_body_bytes) return false;
  } while (!body_bytes_.compare_exchange_weak(have, have + bytes, std::memory_order_relaxed));
  return true;
}

void RequestLog::NameNotReplayable(const std::string& id) {
  not_replayable_.fetch_add(1, std::memory_order_relaxed);
  if (not_replayable_ids_.size() < kMaxNamed) not_replayable_ids_.push_back(id);
}

void RequestLog::WriteRequest(std::string line, const std::string& id, bool replayable) {
  if (fd_ < 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!replayable) NameNotReplayable(id);
    if (stop_) {
      if (replayable) NameNotReplayable(id);
      return;
    }
    queue_.push_back(Line{std::move(line), replayable ? id : std::string()});
  }
  cv_.notify_one();
}

std::vector<std::string> RequestLog::not_replayable_ids() const {
  std::lock_guard<std::mutex> lock(mu_);
  return not_replayable_ids_;
}

void RequestLog::Run() {
  std::deque<Line> batch;
  auto last_sync = std::chrono::steady_clock::now();
  bool unsynced = false;
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (unsynced) {
        // Lines are written: wait for more, but sync when sync_every has passed.
        cv_.wait_until(lock, last_sync + opt_.sync_every, [this] { return stop_ || !queue_.empty(); });
      } else {
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      }
      stopping = stop_ && queue_.empty();
      batch.swap(queue_);
      queued_end_lines_ = 0;
    }
    if (!batch.empty()) {
      std::string data;
      for (const auto& line : batch) {
        data += line.text;
        data += '\n';
      }
      if (WriteAll(fd_, data)) {
        written_.fetch_add(batch.size(), std::memory_order_relaxed);
        unsynced = true;
      } else {
        write_errors_.fetch_add(1, std::memory_order_relaxed);
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& line : batch)
          if (!line.request_id.empty()) NameNotReplayable(line.request_id);
      }
      batch.clear();
    }
    const auto now = std::chrono::steady_clock::now();
    if (unsynced && (stopping || now - last_sync >= opt_.sync_every)) {
      if (::fdatasync(fd_) != 0) write_errors_.fetch_add(1, std::memory_order_relaxed);
      syncs_.fetch_add(1, std::memory_order_relaxed);
      last_sync = now;
      unsynced = false;
    }
    if (stopping) break;
  }
}

void RequestLog::Close() {
  if (fd_ < 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  ::close(fd_);
  fd_ = -1;
}

}  // namespace twinscope::mirror
