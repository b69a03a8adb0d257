#include "cli/run_child.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "base/env_names.h"
#include "format/trace_tail.h"
#include "twin/child_group.h"

extern char** environ;

namespace twinscope::cli {

std::string ExecutableDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

StatusOr<std::string> FindCollectorLibrary(const std::string& file_name) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv(env::kLibDir); env && *env) dirs.push_back(env);
  std::string exe_dir = ExecutableDir();
  if (!exe_dir.empty()) {
    dirs.push_back(exe_dir + "/../lib");
    dirs.push_back(exe_dir);
  }
  std::string looked;
  for (const auto& dir : dirs) {
    std::string candidate = dir + "/" + file_name;
    if (access(candidate.c_str(), R_OK) == 0) {
      char real[PATH_MAX];
      if (realpath(candidate.c_str(), real)) return std::string(real);
      return candidate;
    }
    looked += (looked.empty() ? "" : ", ") + candidate;
  }
  return Status::Error("cannot find " + file_name + " (looked in: " + (looked.empty() ? "nowhere" : looked) +
                       "); build it, or set " + std::string(env::kLibDir) + " to the folder that holds it");
}

std::string WheelSiteDir() {
  const std::string exe_dir = ExecutableDir();  // SITE/twinscope/bin
  const std::string suffix = "/twinscope/bin";
  if (exe_dir.size() <= suffix.size() || exe_dir.compare(exe_dir.size() - suffix.size(), suffix.size(), suffix) != 0)
    return "";
  const std::string site = exe_dir.substr(0, exe_dir.size() - suffix.size());
  if (access((site + "/twinscope/__init__.py").c_str(), R_OK) != 0) return "";
  return site;
}

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

namespace {

class StatusLine {
 public:
  StatusLine(const ChildOptions& o) : options_(o), start_(std::chrono::steady_clock::now()) {
    if (o.live_status) thread_ = std::thread([this] { Loop(); });
  }
  ~StatusLine() { Stop(); }
  void Stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    RunTail tail(options_.watch_file);
    uint64_t last_records = 0;
    auto last_t = start_;
    while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
      auto now = std::chrono::steady_clock::now();
      double elapsed = std::chrono::duration<double>(now - start_).count();
      uint64_t records = tail.Poll();
      double dt = std::chrono::duration<double>(now - last_t).count();
      double rate = dt > 0 ? static_cast<double>(records - last_records) / dt : 0;
      last_records = records;
      last_t = now;
      const std::string processes = tail.traces() > 1 ? ", " + std::to_string(tail.traces()) + " traces" : "";
      std::fprintf(stderr, "\r\033[Ktwinscope: %s %.0fs, %llu records on disk (%.0f records/s), %s%s",
                   options_.status_label.c_str(), elapsed, static_cast<unsigned long long>(records), rate,
                   HumanBytes(static_cast<double>(tail.bytes())).c_str(), processes.c_str());
      std::fflush(stderr);
    }
  }

  const ChildOptions& options_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

ChildResult RunChild(const ChildOptions& options) {
  ChildResult result;
  twin::ChildGroup group;
  // Its own process group (signals reach the whole tree), with the terminal while it runs.
  const size_t i = group.Start(twin::ChildSpec{options.argv, options.env, true, true});
  if (!group.exit(i).started) {
    result.exit_code = group.exit(i).exit_code;
    result.error = group.exit(i).error;
    return result;
  }
  result.started = true;
  {
    StatusLine line(options);
    group.WaitAll();
  }
  const twin::ChildExit& e = group.exit(i);
  result.exit_code = e.exit_code;
  result.term_signal = e.term_signal;
  result.elapsed_s = e.elapsed_s;
  return result;
}

}  // namespace twinscope::cli
