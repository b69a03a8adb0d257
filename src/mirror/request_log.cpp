#include "mirror/request_log.h"

#include <cerrno>
#include <cstring>

namespace twinscope::mirror {

RequestLog::~RequestLog() { Close(); }

Status RequestLog::Open(const std::string& path, size_t max_queued) {
  if (file_) return Status::Error("request log already open");
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) return Status::Error("cannot open request log '" + path + "': " + std::strerror(errno));
  max_queued_ = max_queued;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void RequestLog::Write(std::string line) {
  if (!file_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || queue_.size() >= max_queued_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    queue_.push_back(std::move(line));
  }
  cv_.notify_one();
}

void RequestLog::Run() {
  std::deque<std::string> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty() && stop_) break;
      batch.swap(queue_);
    }
    for (auto& line : batch) {
      line.push_back('\n');
      std::fwrite(line.data(), 1, line.size(), file_);
    }
    std::fflush(file_);
    written_.fetch_add(batch.size(), std::memory_order_relaxed);
    batch.clear();
  }
}

void RequestLog::Close() {
  if (!file_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  std::fclose(file_);
  file_ = nullptr;
}

}  // namespace twinscope::mirror
