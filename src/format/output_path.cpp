// Claims a trace file per process under TWINSCOPE_OUTPUT (output_path.h).
#include "format/output_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace twinscope {
namespace {

int CreateExclusive(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

// DIR/<name>-<pid>.tsc, or DIR/<name>-<pid>.N.tsc when that exists (a pid
// reused by a later process of the same run, or a trace left over).
bool ClaimInFolder(const std::string& dir, const std::string& name, int pid, ClaimedOutput* out, std::string* error) {
  if (!MakeFolders(dir, error)) return false;
  const std::string stem = dir + "/" + name + "-" + std::to_string(pid);
  for (int n = 0; n < 1000; ++n) {
    const std::string path = n == 0 ? stem + ".tsc" : stem + "." + std::to_string(n) + ".tsc";
    const int fd = CreateExclusive(path);
    if (fd >= 0) {
      out->fd = fd;
      out->path = path;
      return true;
    }
    if (errno != EEXIST) {
      *error = "cannot create trace file '" + path + "': " + std::strerror(errno);
      return false;
    }
  }
  *error = "cannot create a trace file in '" + dir + "': 1000 names taken for " + stem;
  return false;
}

bool IsFolder(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

bool MakeFolders(const std::string& dir, std::string* error) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty() && mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
        *error = "cannot make folder " + cur + ": " + std::strerror(errno);
        return false;
      }
      if (!cur.empty() && !IsFolder(cur)) {
        *error = "cannot make folder " + cur + ": a file of that name is in the way";
        return false;
      }
    }
    if (i < dir.size()) cur += dir[i];
  }
  return true;
}

bool ClaimOutput(const std::string& requested, const std::string& name, int pid, ClaimedOutput* out,
                 std::string* error) {
  *out = ClaimedOutput{};
  if (requested.empty()) {
    *error = "empty trace path";
    return false;
  }
  if (requested.back() == '/' || IsFolder(requested)) {
    std::string dir = requested;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return ClaimInFolder(dir, name, pid, out, error);
  }
  const int fd = CreateExclusive(requested);
  if (fd >= 0) {
    out->fd = fd;
    out->path = requested;
    return true;
  }
  if (errno != EEXIST) {
    *error = "cannot create trace file '" + requested + "': " + std::strerror(errno);
    return false;
  }
  // Another process of this run has the file: this one writes beside it.
  out->fallback = true;
  return ClaimInFolder(requested + ".d", name, pid, out, error);
}

}  // namespace twinscope
