#include "format/status_ticker.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "base/log.h"

namespace twinscope {

StatusTicker::StatusTicker(TraceWriter* writer, std::chrono::milliseconds period, std::function<void()> publish)
    : writer_(writer), period_(period), publish_(std::move(publish)), pid_(getpid()) {
  if (writer_ == nullptr || period_.count() <= 0) return;
  // The thread inherits this mask: every signal blocked.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  thread_ = std::thread([this] { Loop(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

StatusTicker::~StatusTicker() { Stop(); }

void StatusTicker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  if (getpid() == pid_)
    thread_.join();
  else
    thread_.detach();  // a forked child: the thread stayed in the parent
}

void StatusTicker::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (cv_.wait_for(lock, period_, [this] { return stop_; })) return;
    lock.unlock();
    Firewall("trace status thread", [this] {
      if (publish_) publish_();
      writer_->Checkpoint();
      if (stop_request_.Due()) {
        const bool on_disk = writer_->SummaryAtStopRequest(std::chrono::seconds(5));
        LogInfo("stop request: summary written to %s%s", writer_->path().c_str(),
                on_disk ? "" : " (not yet on disk after 5 s)");
        stop_request_.Acknowledge(on_disk);
      }
    });
    lock.lock();
  }
}

}  // namespace twinscope
