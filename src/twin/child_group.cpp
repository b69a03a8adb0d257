// fork/exec, signal forwarding and reaping for ChildGroup.
#include "twin/child_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

#include "base/env_names.h"

extern char** environ;

namespace twinscope::twin {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kMaxChildren = 16;

// Pids to forward to (negative: a process group). Written on the main thread
// with forwarded signals blocked, read by the handler.
volatile sig_atomic_t g_pids[kMaxChildren] = {};
volatile sig_atomic_t g_forwarded = 0;
volatile sig_atomic_t g_forward = 1;
struct sigaction g_old_actions[3];

// Forwards a signal that was sent to twinscope alone (kill/sigqueue). Signals
// raised by the terminal (si_code SI_KERNEL) reached the children's process
// group already; forwarding them would deliver them twice. Children in a
// process group of their own get them either way.
void ForwardSignal(int sig, siginfo_t* info, void*) {
  g_forwarded = sig;
  if (!g_forward) return;
  const bool from_terminal = info && info->si_code == SI_KERNEL;
  for (int i = 0; i < kMaxChildren; ++i) {
    const pid_t p = g_pids[i];
    if (p > 0 && !from_terminal) kill(p, sig);
    if (p < 0) kill(p, sig);
  }
}

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

sigset_t ForwardedSet() {
  sigset_t s;
  sigemptyset(&s);
  for (int sig : kForwarded) sigaddset(&s, sig);
  return s;
}

}  // namespace

ChildGroup::ChildGroup(bool forward) {
  g_forwarded = 0;
  g_forward = forward ? 1 : 0;
  struct sigaction sa {};
  sa.sa_sigaction = ForwardSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &sa, &g_old_actions[i]);
}

ChildGroup::~ChildGroup() {
  for (auto& c : children_) Reap(c, false);
  if (terminal_given_to_) TakeBackTerminal();
  for (int i = 0; i < kMaxChildren; ++i) g_pids[i] = 0;
  for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &g_old_actions[i], nullptr);
}

int ChildGroup::ForwardedSignal() { return g_forwarded; }

size_t ChildGroup::Start(const ChildSpec& spec) {
  const size_t index = children_.size();
  children_.push_back(Child{spec, {}, std::chrono::steady_clock::now()});
  Child& c = children_.back();
  ChildExit& r = c.exit;
  if (spec.argv.empty()) {
    r.exit_code = 2;
    r.error = "no command given";
    return index;
  }
  if (index >= kMaxChildren) {
    r.exit_code = 126;
    r.error = "too many child processes";
    return index;
  }

  // Everything the child needs is built before fork().
  std::map<std::string, std::string> overrides(spec.env.begin(), spec.env.end());
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos && overrides.count(kv.substr(0, eq))) continue;
    if (eq != std::string::npos && kv.compare(0, eq, env::kTopPid) == 0) continue;  // ours replaces it below
    env_strings.push_back(std::move(kv));
  }
  for (const auto& [k, v] : overrides) env_strings.push_back(k + "=" + v);
  // TWINSCOPE_TOP_PID: the child writes its own pid here between fork and exec (no allocation there).
  const std::string top_prefix = std::string(env::kTopPid) + "=";
  env_strings.push_back(top_prefix + std::string(24, '\0'));
  const size_t top_index = env_strings.size() - 1;
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  char* top_digits = env_strings[top_index].data() + top_prefix.size();
  const bool take_terminal = spec.new_process_group && spec.foreground && isatty(STDIN_FILENO) &&
                             tcgetpgrp(STDIN_FILENO) == getpgrp() && terminal_given_to_ == 0;
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = spec.argv;
  std::vector<char*> argv;
  for (auto& s : argv_copy) argv.push_back(s.data());
  argv.push_back(nullptr);

  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.exit_code = 126;
    r.error = std::string("pipe failed: ") + std::strerror(errno);
    return index;
  }
  // The forwarded signals stay blocked until the child's pid is stored: one
  // that came between fork() and storing it would find no child to forward to.
  sigset_t forwarded = ForwardedSet(), old_mask;
  pthread_sigmask(SIG_BLOCK, &forwarded, &old_mask);
  std::fflush(nullptr);
  c.start = std::chrono::steady_clock::now();
  r.start_realtime_ns = RealtimeNs();
  pid_t pid = fork();
  if (pid < 0) {
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    close(err_pipe[0]);
    close(err_pipe[1]);
    r.exit_code = 126;
    r.error = std::string("fork failed: ") + std::strerror(errno);
    return index;
  }
  if (pid == 0) {
    // Child: the program's own dispositions and mask for the forwarded signals, then exec.
    for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &g_old_actions[i], nullptr);
    {
      char digits[24];
      int n = 0;
      for (long v = getpid(); v > 0 && n < 23; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
      for (int k = 0; k < n; ++k) top_digits[k] = digits[n - 1 - k];
      top_digits[n] = '\0';
    }
    if (spec.new_process_group) setpgid(0, 0);
    if (take_terminal) {
      // As a shell does: the new group becomes the terminal's foreground (SIGTTOU blocked meanwhile).
      sigset_t ttou, before;
      sigemptyset(&ttou);
      sigaddset(&ttou, SIGTTOU);
      pthread_sigmask(SIG_BLOCK, &ttou, &before);
      tcsetpgrp(STDIN_FILENO, getpid());
      pthread_sigmask(SIG_SETMASK, &before, nullptr);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    close(err_pipe[0]);
    execvpe(argv[0], argv.data(), envp.data());
    int e = errno;
    ssize_t ignored = write(err_pipe[1], &e, sizeof e);
    (void)ignored;
    _exit(127);
  }
  if (spec.new_process_group) setpgid(pid, pid);  // also here: no race with the child's own call
  if (take_terminal) {
    sigset_t ttou, before;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    pthread_sigmask(SIG_BLOCK, &ttou, &before);
    tcsetpgrp(STDIN_FILENO, pid);
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    terminal_given_to_ = pid;
  }
  g_pids[index] = spec.new_process_group ? -pid : pid;
  r.pid = pid;
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
    g_pids[index] = 0;
    if (take_terminal) TakeBackTerminal();
    r.exit_code = (exec_errno == ENOENT || exec_errno == ENOTDIR) ? 127 : 126;
    r.error = "cannot run '" + spec.argv[0] + "': " + std::strerror(exec_errno) +
              (exec_errno == ENOENT && spec.argv[0].find('/') == std::string::npos ? " (not found in PATH)" : "");
    r.end_realtime_ns = RealtimeNs();
    return index;
  }
  r.started = true;
  r.running = true;
  return index;
}

bool ChildGroup::Reap(Child& c, bool block) {
  if (!c.exit.running) return true;
  int status = 0;
  pid_t got;
  do {
    got = waitpid(c.exit.pid, &status, block ? 0 : WNOHANG);
  } while (got < 0 && errno == EINTR);
  if (got == 0) return false;
  const size_t index = static_cast<size_t>(&c - children_.data());
  if (index < kMaxChildren) g_pids[index] = 0;
  c.exit.running = false;
  if (terminal_given_to_ == c.exit.pid) TakeBackTerminal();
  c.exit.end_realtime_ns = RealtimeNs();
  c.exit.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
  if (got < 0) {
    c.exit.exit_code = 1;
    c.exit.error = std::string("waitpid failed: ") + std::strerror(errno);
  } else if (WIFEXITED(status)) {
    c.exit.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    c.exit.term_signal = WTERMSIG(status);
    c.exit.exit_code = 128 + c.exit.term_signal;
  }
  return true;
}

void ChildGroup::TakeBackTerminal() {
  sigset_t ttou, before;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  pthread_sigmask(SIG_BLOCK, &ttou, &before);
  tcsetpgrp(STDIN_FILENO, getpgrp());
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  terminal_given_to_ = 0;
}

size_t ChildGroup::Poll() {
  size_t running = 0;
  for (auto& c : children_)
    if (!Reap(c, false)) ++running;
  return running;
}

void ChildGroup::WaitAll(const std::function<void()>& tick, std::chrono::milliseconds period) {
  auto next = std::chrono::steady_clock::now() + period;
  while (Poll() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (tick && std::chrono::steady_clock::now() >= next) {
      tick();
      next += period;
    }
  }
}

bool ChildGroup::WaitFor(size_t i, std::chrono::milliseconds timeout, const std::function<void()>& tick,
                         std::chrono::milliseconds period) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  auto next = std::chrono::steady_clock::now() + period;
  while (!Reap(children_[i], false)) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (tick && std::chrono::steady_clock::now() >= next) {
      tick();
      next += period;
    }
  }
  Poll();
  return true;
}

void ChildGroup::Signal(size_t i, int sig) {
  Child& c = children_[i];
  if (!c.exit.running) return;
  kill(c.spec.new_process_group ? -c.exit.pid : c.exit.pid, sig);
}

void ChildGroup::Stop(size_t i, std::chrono::milliseconds grace) {
  Signal(i, SIGTERM);
  if (!WaitFor(i, grace)) {
    Signal(i, SIGKILL);
    Reap(children_[i], true);
  }
}

}  // namespace twinscope::twin
