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

#include "format/trace_tail.h"

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
  if (const char* env = std::getenv("TWINSCOPE_LIB_DIR"); env && *env) dirs.push_back(env);
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
                       "); build it, or set TWINSCOPE_LIB_DIR to the folder that holds it");
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

volatile sig_atomic_t g_child_pid = 0;

// Forwards a signal that was sent to twinscope alone (kill/sigqueue). Signals
// raised by the terminal (si_code SI_KERNEL) reached the child's process group
// already; forwarding them would deliver them twice.
void ForwardSignal(int sig, siginfo_t* info, void*) {
  if (info && info->si_code == SI_KERNEL) return;
  pid_t pid = g_child_pid;
  if (pid > 0) kill(pid, sig);
}

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

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
    TraceTail tail(options_.watch_file);
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
      std::fprintf(stderr, "\r\033[Ktwinscope: %s %.0fs, %llu records on disk (%.0f records/s), %s",
                   options_.status_label.c_str(), elapsed, static_cast<unsigned long long>(records), rate,
                   HumanBytes(static_cast<double>(tail.bytes())).c_str());
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
  if (options.argv.empty()) {
    result.exit_code = 2;
    result.error = "no command given";
    return result;
  }

  // Everything the child needs is built before fork().
  std::map<std::string, std::string> overrides(options.env.begin(), options.env.end());
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos && overrides.count(kv.substr(0, eq))) continue;
    env_strings.push_back(std::move(kv));
  }
  for (const auto& [k, v] : overrides) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = options.argv;
  std::vector<char*> argv;
  for (auto& s : argv_copy) argv.push_back(s.data());
  argv.push_back(nullptr);

  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    result.exit_code = 126;
    result.error = std::string("pipe failed: ") + std::strerror(errno);
    return result;
  }

  struct sigaction old_actions[3];
  struct sigaction sa {};
  sa.sa_sigaction = ForwardSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &sa, &old_actions[i]);

  // The forwarded signals stay blocked until the child's pid is known: one that
  // came between fork() and `g_child_pid = pid` (a busy machine can run the
  // child's exec first) would otherwise find no child to forward to and be lost.
  sigset_t forwarded, old_mask;
  sigemptyset(&forwarded);
  for (int sig : kForwarded) sigaddset(&forwarded, sig);
  pthread_sigmask(SIG_BLOCK, &forwarded, &old_mask);

  const auto start = std::chrono::steady_clock::now();
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &old_actions[i], nullptr);
    close(err_pipe[0]);
    close(err_pipe[1]);
    result.exit_code = 126;
    result.error = std::string("fork failed: ") + std::strerror(errno);
    return result;
  }
  if (pid == 0) {
    // Child: the program's own dispositions and mask for the forwarded signals, then exec.
    for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &old_actions[i], nullptr);
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    close(err_pipe[0]);
    execvpe(argv[0], argv.data(), envp.data());
    int e = errno;
    ssize_t ignored = write(err_pipe[1], &e, sizeof e);
    (void)ignored;
    _exit(127);
  }
  g_child_pid = pid;
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);  // a signal held meanwhile is forwarded now
  close(err_pipe[1]);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(err_pipe[0], &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  close(err_pipe[0]);

  if (n == sizeof exec_errno) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    g_child_pid = 0;
    for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &old_actions[i], nullptr);
    result.exit_code = (exec_errno == ENOENT || exec_errno == ENOTDIR) ? 127 : 126;
    result.error =
        "cannot run '" + options.argv[0] + "': " + std::strerror(exec_errno) +
        (exec_errno == ENOENT && options.argv[0].find('/') == std::string::npos ? " (not found in PATH)" : "");
    return result;
  }
  result.started = true;

  int status = 0;
  {
    StatusLine line(options);
    while (waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) break;
    }
  }
  g_child_pid = 0;
  for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &old_actions[i], nullptr);
  result.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
    result.exit_code = 128 + result.term_signal;
  }
  return result;
}

}  // namespace twinscope::cli
