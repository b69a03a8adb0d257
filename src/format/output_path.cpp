// Claims a trace file per process under TWINSCOPE_OUTPUT (output_path.h).
#include "format/output_path.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "format/run_dir.h"
#include "twinscope/records.h"

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

// Whether the earlier trace at `path` is this host's to remove (RemoveStaleTraces).
bool StaleOfThisHost(const std::string& path, const std::string& host, bool* other_host) {
  *other_host = false;
  char head[sizeof kFileMagic] = {};
  size_t n = 0;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    n = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
  }
  if (n > 0 && std::memcmp(head, kFileMagic, n) != 0) return true;  // not a trace
  const RunTrace t = ScanTrace(path);
  if (t.end == "unreadable") {
    // Empty or cut inside its header: a process of another host may be creating it right now.
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && st.st_mtime + 60 < std::time(nullptr);
  }
  if (t.process.host.empty() || t.process.host == host) return true;
  *other_host = true;
  return false;
}

bool RemoveStaleIn(const std::string& dir, const std::string& host, size_t* kept, std::string* error) {
  DIR* d = opendir(dir.c_str());
  if (!d) return true;
  bool ok = true;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".tsc") != 0) continue;
    const std::string p = dir + "/" + name;
    bool other = false;
    if (!StaleOfThisHost(p, host, &other)) {
      *kept += other ? 1 : 0;
      continue;
    }
    if (unlink(p.c_str()) != 0 && errno != ENOENT) {
      *error = "cannot remove " + p + " (left by an earlier run): " + std::strerror(errno);
      ok = false;
    }
  }
  closedir(d);
  return ok;
}

}  // namespace

std::string ThisHost() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

bool RemoveStaleTraces(const std::string& output, const std::string& host, size_t* kept_other_hosts,
                       std::string* error) {
  size_t kept = 0;
  bool ok = true;
  if ((!output.empty() && output.back() == '/') || IsFolder(output)) {
    std::string dir = output;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    ok = RemoveStaleIn(dir, host, &kept, error);
  } else {
    bool other = false;
    struct stat st {};
    if (stat(output.c_str(), &st) == 0) {
      if (StaleOfThisHost(output, host, &other)) {
        if (unlink(output.c_str()) != 0 && errno != ENOENT) {
          *error = "cannot replace the existing trace " + output + ": " + std::strerror(errno);
          ok = false;
        }
      } else {
        kept += other ? 1 : 0;
      }
    }
    ok = RemoveStaleIn(output + ".d", host, &kept, error) && ok;
    rmdir((output + ".d").c_str());  // when empty; fails harmlessly otherwise
  }
  if (kept_other_hosts) *kept_other_hosts = kept;
  return ok;
}

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
