// Test helper: runs a program with a given environment, its stdout and stderr
// into files (header-only; used by the CLI, twin, demo and serving end-to-end tests).
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace twinscope::testutil {

// This process's environment without the variables whose "NAME=" starts
// with one of `drop_prefixes` (e.g. "TWINSCOPE_"), plus `add` ("NAME=value").
inline std::vector<std::string> EnvironmentWithout(const std::vector<std::string>& drop_prefixes,
                                                   const std::vector<std::string>& add = {}) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    bool drop = false;
    for (const auto& p : drop_prefixes) drop = drop || kv.rfind(p, 0) == 0;
    if (!drop) env.push_back(kv);
  }
  env.insert(env.end(), add.begin(), add.end());
  return env;
}

// This process's environment with `set` ("NAME=value") put in, each
// replacing any value NAME had.
inline std::vector<std::string> EnvironmentWith(const std::vector<std::string>& set) {
  std::vector<std::string> names;
  for (const auto& kv : set) names.push_back(kv.substr(0, kv.find('=') + 1));
  return EnvironmentWithout(names, set);
}

// Starts argv[0] (a path) with `env`, stdout to `out_path`, stderr to
// `err_path`. Returns the pid, or -1 if it could not be started.
inline pid_t SpawnWithOutput(std::vector<std::string> argv, std::vector<std::string> env, const std::string& out_path,
                             const std::string& err_path) {
  std::vector<char*> av, envp;
  for (auto& a : argv) av.push_back(a.data());
  av.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, av[0], &fa, nullptr, av.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// A whole file's text ("" if unreadable).
inline std::string Slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Waits for `pid` to end: its exit code, 1000 + the signal if it was killed,
// -1 if `pid` is not a started program (SpawnWithOutput's -1).
inline int WaitForExit(pid_t pid) {
  if (pid <= 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
}

// How a program run to its end went: exit code (1000 + signal if killed), stdout, stderr.
struct Outcome {
  int code = -1;
  std::string out, err;
};

// Runs argv with `env`, its output into DIR/stdout.txt and DIR/stderr.txt;
// `then` (if any) runs once it started, with its pid; waits for its end.
inline Outcome RunToEnd(std::vector<std::string> argv, std::vector<std::string> env, const std::filesystem::path& dir,
                        const std::function<void(pid_t)>& then = {}) {
  const std::string out = (dir / "stdout.txt").string(), err = (dir / "stderr.txt").string();
  Outcome r;
  const pid_t pid = SpawnWithOutput(std::move(argv), std::move(env), out, err);
  if (pid <= 0) return r;
  if (then) then(pid);
  r.code = WaitForExit(pid);
  r.out = Slurp(out);
  r.err = Slurp(err);
  return r;
}

// DIR/lib with both collector libraries linked in (for TWINSCOPE_LIB_DIR).
inline void LinkCollectors(const std::filesystem::path& dir, const std::string& cupti_lib,
                           const std::string& blocks_lib) {
  std::filesystem::create_directories(dir / "lib");
  std::filesystem::create_symlink(cupti_lib, dir / "lib" / "libtwinscope_cupti.so");
  std::filesystem::create_symlink(blocks_lib, dir / "lib" / "libtwinscope_blocks.so");
}

}  // namespace twinscope::testutil
