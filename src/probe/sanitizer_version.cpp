// The Sanitizer API library a program would load and its version (probe/sanitizer_version.h).
#include "probe/sanitizer_version.h"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

extern char** environ;

namespace twinscope::probe {
namespace {

// The dynamic loader this process runs under (its mapping in /proc/self/maps), "" if not found.
std::string OwnLoader() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string base = path.substr(path.rfind('/') + 1);
    if (base.rfind("ld-linux", 0) == 0 || base.rfind("ld64.so", 0) == 0) return path;
  }
  return "";
}

// Runs `argv` and returns its stdout (stderr too), "" on failure to start.
std::string Capture(const std::vector<std::string>& argv, int* exit_code) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  std::string out;
  if (rc == 0) {
    char buf[4096];
    for (;;) {
      const ssize_t n = read(fds[0], buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fds[0]);
  int status = 0;
  if (rc == 0)
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  *exit_code = rc != 0 ? -1 : (WIFEXITED(status) ? WEXITSTATUS(status) : 128);
  return out;
}

std::string Parent(const std::string& p) {
  const size_t slash = p.find_last_of('/');
  return slash == std::string::npos || slash == 0 ? "/" : p.substr(0, slash);
}

}  // namespace

std::string PipRequirementFor(const std::string& library) {
  if (library.rfind("libsanitizer-public", 0) == 0) return kSanitizerRequirement;
  if (library.rfind("libcupti", 0) == 0) return "nvidia-cuda-cupti>=13.5,<14";
  if (library.rfind("libcudart", 0) == 0) return "nvidia-cuda-runtime>=13.0,<14";
  if (library.rfind("libcublas", 0) == 0) return "nvidia-cublas>=13.0,<14";
  return "";
}

std::string SanitizerVersionAt(const std::string& path, std::string* source) {
  char real[PATH_MAX];
  const std::string file = realpath(path.c_str(), real) ? std::string(real) : path;
  // The pip wheel: SITE/nvidia/cu13/lib/libsanitizer-public.so beside SITE/nvidia_cuda_sanitizer_api-V.dist-info.
  std::string dir = Parent(file);
  for (int up = 0; up < 4 && dir != "/"; ++up, dir = Parent(dir)) {
    DIR* d = opendir(dir.c_str());
    if (!d) continue;
    std::string found;
    const std::string prefix = "nvidia_cuda_sanitizer_api-";
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind(prefix, 0) == 0 && n.size() > prefix.size() + 10 && n.substr(n.size() - 10) == ".dist-info")
        found = n.substr(prefix.size(), n.size() - prefix.size() - 10);
    }
    closedir(d);
    if (!found.empty()) {
      if (source) *source = "pip package nvidia-cuda-sanitizer-api";
      return found;
    }
    // A CUDA toolkit: version.json at its root names every component's version.
    std::ifstream vf(dir + "/version.json");
    if (vf) {
      const auto j = nlohmann::json::parse(vf, nullptr, false);
      if (j.is_object() && j.contains("cuda_sanitizer_api") && j["cuda_sanitizer_api"].is_object()) {
        if (source) *source = "CUDA toolkit at " + dir;
        return j["cuda_sanitizer_api"].value("version", std::string());
      }
    }
  }
  if (source) source->clear();
  return "";
}

SanitizerLibrary ResolveSanitizer(const std::string& elf) {
  SanitizerLibrary s;
  const std::string loader = OwnLoader();
  if (loader.empty()) {
    s.error = "the dynamic loader of this process was not found";
    return s;
  }
  int code = 0;
  const std::string out = Capture({loader, "--list", elf}, &code);
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find(kSanitizerLibrary);
    const size_t arrow = line.find("=>");
    if (at == std::string::npos || arrow == std::string::npos || at > arrow) continue;
    std::string rest = line.substr(arrow + 2);
    rest.erase(0, rest.find_first_not_of(" \t"));
    if (rest.rfind("not found", 0) == 0) {
      s.missing = true;
      s.error = std::string(kSanitizerLibrary) + " not found";
      return s;
    }
    const size_t paren = rest.find(" (");
    s.path = paren == std::string::npos ? rest : rest.substr(0, paren);
    s.resolved = !s.path.empty();
    s.version = SanitizerVersionAt(s.path, &s.source);
    return s;
  }
  s.error =
      code == 0 ? elf + " does not need " + kSanitizerLibrary : "the loader could not list the libraries of " + elf;
  return s;
}

bool SanitizerVersionMeasured(const std::string& version) {
  const auto& v = MeasuredSanitizerVersions();
  return std::find(v.begin(), v.end(), version) != v.end();
}

std::string DescribeSanitizer(const SanitizerLibrary& s, const std::string& tool) {
  std::string measured;
  for (const auto& v : MeasuredSanitizerVersions()) measured += (measured.empty() ? "" : ", ") + v;
  if (!s.resolved) {
    if (s.missing)  // the loader answered: it will fail to load
      return tool + ": the Compute Sanitizer API (" + kSanitizerLibrary + ") cannot be found: pip install '" +
             kSanitizerRequirement + "' (a dependency of the twinscope wheel; it is missing after --no-deps)\n";
    return "";  // could not tell: say nothing
  }
  std::string line = tool + ": Compute Sanitizer API " + (s.version.empty() ? "(version unknown)" : s.version) +
                     " at " + s.path + (s.source.empty() ? "" : " (" + s.source + ")") + "\n";
  if (!SanitizerVersionMeasured(s.version))
    line += tool + ": warning: the block probe was measured with the Sanitizer API " + measured + " only; " +
            (s.version.empty() ? "this one's version cannot be told" : s.version + " is not among them") +
            ": block pictures may be missing or wrong (pip install 'nvidia-cuda-sanitizer-api==" +
            MeasuredSanitizerVersions().back() + "' gives a measured one)\n";
  return line;
}

}  // namespace twinscope::probe
