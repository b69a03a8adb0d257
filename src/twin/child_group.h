// Child processes of twinscope's runners (record, blocks, twin, twin --serve):
// starts programs with extra environment, forwards SIGINT/SIGTERM/SIGHUP sent
// to twinscope to every child still running, and reaps them. One ChildGroup
// at a time per process (signal forwarding is process-wide); main thread only.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace twinscope::twin {

struct ChildSpec {
  std::vector<std::string> argv;                         // argv[0] is looked up in PATH unless it contains '/'
  std::vector<std::pair<std::string, std::string>> env;  // set (overriding) in the child
  bool new_process_group = false;  // own process group: signals reach the whole tree (docs/design.md, "Process trees")
  // With new_process_group: the group takes the terminal (when twinscope has it in the foreground) until the
  // child ends, as a shell does, so Ctrl-C and reads from the terminal reach the program.
  bool foreground = false;
};

// The child gets TWINSCOPE_TOP_PID=<its own pid> (env_names.h): its trace's header says "top".

struct ChildExit {
  bool started = false;  // exec succeeded
  bool running = false;
  int exit_code = 0;    // the program's code, 128+signal if killed, 127/126 if it could not run
  int term_signal = 0;  // signal that killed the program, 0 if it exited
  std::string error;    // why it could not run (started == false)
  double elapsed_s = 0;
  int pid = 0;
  int64_t start_realtime_ns = 0, end_realtime_ns = 0;
};

class ChildGroup {
 public:
  // Installs the handlers for SIGINT/SIGTERM/SIGHUP. With `forward` they are
  // passed on to every running child; without, they are only noted
  // (ForwardedSignal()) and the caller stops its children itself.
  explicit ChildGroup(bool forward = true);
  ~ChildGroup();  // restores them; children still running are left running
  ChildGroup(const ChildGroup&) = delete;
  ChildGroup& operator=(const ChildGroup&) = delete;

  // Starts a child and returns its index. If it cannot be started (exec
  // failed), the child's exit says why and it is not running.
  size_t Start(const ChildSpec& spec);

  // Reaps children that ended; returns how many are still running.
  size_t Poll();
  // Waits until none is running, calling `tick` about every `period`.
  void WaitAll(const std::function<void()>& tick = {}, std::chrono::milliseconds period = std::chrono::seconds(1));
  // Waits until child `i` is no longer running, or `timeout` passed; true if it ended.
  bool WaitFor(size_t i, std::chrono::milliseconds timeout, const std::function<void()>& tick = {},
               std::chrono::milliseconds period = std::chrono::seconds(1));

  // Sends `sig` to child `i` (its process group if it has one), if running.
  void Signal(size_t i, int sig);
  // SIGTERM, then SIGKILL after `grace` if still running.
  void Stop(size_t i, std::chrono::milliseconds grace);

  const ChildExit& exit(size_t i) const { return children_[i].exit; }
  size_t size() const { return children_.size(); }
  // A signal arrived since this group was made (0 if none).
  static int ForwardedSignal();

 private:
  struct Child {
    ChildSpec spec;
    ChildExit exit;
    std::chrono::steady_clock::time_point start;
  };
  bool Reap(Child& c, bool block);
  void TakeBackTerminal();
  std::vector<Child> children_;
  int terminal_given_to_ = 0;  // the process group that has the terminal, 0 if we kept it
};

}  // namespace twinscope::twin
