// Polling for the stop request and acknowledging it (stop_request.h).
#include "format/stop_request.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/env_names.h"
#include "base/log.h"

namespace twinscope {

StopRequest::StopRequest() {
  const char* d = std::getenv(env::kControlDir);
  if (d && *d) dir_ = d;
}

bool StopRequest::Due() {
  if (dir_.empty() || done_) return false;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_) return false;
  next_ = now + std::chrono::milliseconds(100);
  struct stat st {};
  if (stat(StopFile(dir_).c_str(), &st) != 0) return false;
  done_ = true;
  return true;
}

void StopRequest::Acknowledge(bool on_disk) const {
  if (dir_.empty()) return;
  const std::string path = FlushedFile(dir_, static_cast<int>(getpid()));
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) {
    LogError("stop request: cannot create %s", tmp.c_str());
    return;
  }
  const char* text = on_disk ? "ok\n" : "late\n";
  ssize_t ignored = ::write(fd, text, on_disk ? 3 : 5);
  (void)ignored;
  ::close(fd);
  ::rename(tmp.c_str(), path.c_str());  // appears whole
}

}  // namespace twinscope
