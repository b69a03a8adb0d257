#include "cuptilib/cupti_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <glob.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

extern char** environ;

namespace twinscope::cuptilib {
namespace {

constexpr int kProbeTimeoutMs = 10000;
constexpr int kPythonTimeoutMs = 5000;
constexpr char kLoaderName[] = "libcupti.so.13";

uint64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

// Reads `fd` to its end or until `timeout_ms`; false on timeout.
bool ReadAll(int fd, int timeout_ms, std::string* out) {
  const uint64_t deadline = NowMs() + uint64_t(timeout_ms);
  char buf[4096];
  for (;;) {
    const uint64_t now = NowMs();
    if (now >= deadline) return false;
    pollfd p{fd, POLLIN, 0};
    int n = poll(&p, 1, int(deadline - now));
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return false;
    ssize_t got = read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return true;
    out->append(buf, size_t(got));
  }
}

// Reads child `pid`'s output from `fd` (then closed) and reaps it; a child
// still running after `timeout_ms` is killed and false returned.
bool Collect(pid_t pid, int fd, int timeout_ms, std::string* out, int* status) {
  const bool done = ReadAll(fd, timeout_ms, out);
  close(fd);
  if (!done) kill(pid, SIGKILL);
  while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
  }
  return done;
}

// The child's side of ProbeLibrary: one line on `fd`, then _exit.
[[noreturn]] void ProbeInChild(int fd, const std::string& path) {
  std::string line;
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    line = std::string("ERR ") + (e ? e : "cannot be loaded");
  } else {
    using GetVersion = int (*)(uint32_t*);
    auto get = reinterpret_cast<GetVersion>(dlsym(lib, "cuptiGetVersion"));
    uint32_t version = 0;
    if (!get) {
      line = "ERR has no cuptiGetVersion: not a CUPTI library";
    } else if (get(&version) != 0 || version == 0) {
      line = "ERR cuptiGetVersion failed";
    } else {
      bool v2 = true;
      for (const char* name : {"cuptiSubscribe_v2", "cuptiActivityEnable_v2", "cuptiActivityRegisterCallbacks_v2",
                               "cuptiActivityGetNextRecord_v2", "cuptiActivityGetNumDroppedRecords_v2"})
        v2 = v2 && dlsym(lib, name);
      std::string real = path;
      link_map* map = nullptr;
      if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) real = map->l_name;
      line = "OK " + std::to_string(version) + " " + (v2 ? "1" : "0") + " " + real;
    }
  }
  line += "\n";
  ssize_t w = write(fd, line.data(), line.size());
  (void)w;
  _exit(0);
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

bool IsFile(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

std::vector<std::string> Glob(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
  globfree(&g);
  return out;
}

// The wheel's layouts: nvidia-cuda-cupti 13.x (nvidia/cu13/lib) and the
// older per-package one (nvidia/cuda_cupti/lib).
void AddSiteDir(const std::string& dir, const std::string& where,
                std::vector<std::pair<std::string, std::string>>* out) {
  if (dir.empty()) return;
  for (const char* sub : {"/nvidia/cu13/lib/", "/nvidia/cuda_cupti/lib/"}) {
    std::string p = dir + sub + kLoaderName;
    if (IsFile(p)) out->emplace_back(p, where);
  }
}

}  // namespace

Candidate ProbeLibrary(const std::string& path, const std::string& where) {
  Candidate c;
  c.path = path;
  c.where = where;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    c.error = std::string("pipe: ") + std::strerror(errno);
    return c;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    ProbeInChild(fds[1], path);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    c.error = std::string("fork: ") + std::strerror(errno);
    return c;
  }
  std::string out;
  int status = 0;
  const bool done = Collect(pid, fds[0], kProbeTimeoutMs, &out, &status);
  if (!done) {
    c.error = "loading it did not finish within " + std::to_string(kProbeTimeoutMs / 1000) + " s";
  } else if (out.rfind("OK ", 0) == 0) {
    std::istringstream in(out.substr(3));
    int v2 = 0;
    std::string real;
    in >> c.version >> v2;
    std::getline(in >> std::ws, real);
    if (!real.empty()) c.path = real;
    c.multi_subscriber = v2 == 1 && c.version >= kCuptiMultiSubscriberVersion;
  } else if (out.rfind("ERR ", 0) == 0) {
    c.error = out.substr(4, out.find('\n') - 4);
  } else {
    c.error = WIFSIGNALED(status) ? "loading it crashed (signal " + std::to_string(WTERMSIG(status)) + ")"
                                  : "loading it gave no answer";
  }
  return c;
}

std::vector<std::string> PythonSysPath(const std::string& python) {
  std::vector<std::string> dirs;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return dirs;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::string code = "import sys\nfor p in sys.path: print(p)";
  std::vector<char*> argv = {const_cast<char*>(python.c_str()), const_cast<char*>("-c"), code.data(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, python.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return dirs;
  }
  std::string out;
  int status = 0;
  if (!Collect(pid, fds[0], kPythonTimeoutMs, &out, &status) || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return {};
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] == '/') dirs.push_back(line);
  return dirs;
}

std::vector<Candidate> FindLibraries(const SearchOptions& options) {
  std::vector<std::pair<std::string, std::string>> paths;  // path, where
  if (options.standard_places) {
    paths.emplace_back(kLoaderName, "the loader's search path");
    std::vector<std::string> roots;
    if (const char* home = std::getenv("CUDA_HOME"); home && *home) roots.push_back(home);
    roots.push_back("/usr/local/cuda");
    for (const std::string& root : roots)
      for (const char* sub : {"/lib64/", "/extras/CUPTI/lib64/"})
        if (IsFile(root + sub + kLoaderName)) paths.emplace_back(root + sub + kLoaderName, "CUDA toolkit");
  }
  for (const std::string& py : options.pythons)
    for (const std::string& dir : PythonSysPath(py))
      AddSiteDir(dir, "pip package nvidia-cuda-cupti (" + py + ")", &paths);
  for (const std::string& dir : options.site_dirs) AddSiteDir(dir, "pip package nvidia-cuda-cupti", &paths);
  if (options.standard_places) {
    std::vector<std::string> patterns;
    for (const char* env : {"VIRTUAL_ENV", "CONDA_PREFIX"})
      if (const char* p = std::getenv(env); p && *p) patterns.push_back(std::string(p) + "/lib/python3*/site-packages");
    if (const char* home = std::getenv("HOME"); home && *home)
      patterns.push_back(std::string(home) + "/.local/lib/python3*/site-packages");
    patterns.push_back("/usr/local/lib/python3*/dist-packages");
    patterns.push_back("/usr/local/lib/python3*/site-packages");
    patterns.push_back("/usr/lib/python3/dist-packages");
    for (const std::string& pattern : patterns)
      for (const std::string& dir : Glob(pattern)) AddSiteDir(dir, "pip package nvidia-cuda-cupti", &paths);
  }
  std::vector<Candidate> found;
  std::set<std::string> seen;
  for (const auto& [path, where] : paths) {
    if (path.find('/') != std::string::npos && seen.count(RealPath(path))) continue;
    Candidate c = ProbeLibrary(path, where);
    if (c.path == kLoaderName && !c.usable()) continue;  // no libcupti on the loader's path: not an error
    if (!seen.insert(RealPath(c.path)).second) continue;
    found.push_back(std::move(c));
  }
  return found;
}

const Candidate* Newest(const std::vector<Candidate>& candidates) {
  const Candidate* best = nullptr;
  for (const Candidate& c : candidates)
    if (c.usable() && (!best || c.version > best->version)) best = &c;
  return best;
}

StatusOr<Choice> Choose(const SearchOptions& options) {
  Choice choice;
  if (const char* env = std::getenv(kCuptiLibraryEnv); env && *env) {
    choice.chosen = ProbeLibrary(env, kCuptiLibraryEnv);
    choice.from_env = true;
    if (!choice.chosen.usable())
      return Status::Error(std::string(kCuptiLibraryEnv) + "=" + env + " cannot be used: " + choice.chosen.error);
    return choice;
  }
  choice.found = FindLibraries(options);
  const Candidate* best = Newest(choice.found);
  if (!best) {
    std::string looked =
        "the loader's search path, $CUDA_HOME and /usr/local/cuda, and nvidia/cu13/lib in the "
        "site-packages of";
    for (const std::string& py : options.pythons) looked += " " + py;
    for (const Candidate& c : choice.found) looked += "; " + c.path + ": " + c.error;
    return Status::Error("no usable libcupti.so.13 found (looked in " + looked +
                         "); install the CUDA toolkit's CUPTI or `pip install nvidia-cuda-cupti`, or set " +
                         kCuptiLibraryEnv + "=/path/to/libcupti.so.13");
  }
  choice.chosen = *best;
  return choice;
}

std::string Describe(const Candidate& c) {
  return "CUPTI " + CuptiVersionText(c.version) + " (API " + std::to_string(c.version) + ") at " + c.path + " (" +
         c.where + ")";
}

}  // namespace twinscope::cuptilib
