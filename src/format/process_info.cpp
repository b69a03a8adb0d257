// The header's "process" object and the per-process file name (process_info.h).
#include "format/process_info.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include "base/env_names.h"

namespace twinscope {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// The parent pid from /proc/<pid>/stat ("pid (comm) state ppid ..."; comm
// may hold spaces and parentheses, so parse after the last ')'). 0 if unknown.
int ParentOf(int pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(stat.substr(close + 1));
  std::string state;
  int ppid = 0;
  in >> state >> ppid;
  return in ? ppid : 0;
}

std::vector<std::string> CommandLine() {
  std::vector<std::string> args;
  const std::string all = ReadFile("/proc/self/cmdline");
  size_t pos = 0;
  while (pos < all.size()) {
    size_t end = all.find('\0', pos);
    if (end == std::string::npos) end = all.size();
    args.push_back(all.substr(pos, end - pos));
    pos = end + 1;
  }
  return args;
}

long EnvLong(const char* name, bool* found) {
  const char* v = std::getenv(name);
  *found = false;
  if (!v || !*v) return -1;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < 0) return -1;
  *found = true;
  return n;
}

// The rank a launcher gave this process: {"rank", "local_rank", "world_size",
// "source"}; null when no launcher variable is set.
nlohmann::json RankObject() {
  struct Source {
    const char* rank;
    const char* local_rank;
    const char* world_size;
  };
  static constexpr Source kSources[] = {
      {"RANK", "LOCAL_RANK", "WORLD_SIZE"},  // torchrun, torch.distributed, accelerate, deepspeed
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"},  // Open MPI
      {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},                               // srun
      {"PMI_RANK", nullptr, "PMI_SIZE"},                                               // MPICH, Intel MPI
  };
  for (const auto& s : kSources) {
    bool found = false;
    const long rank = EnvLong(s.rank, &found);
    if (!found) continue;
    nlohmann::json r = {{"rank", rank}, {"source", s.rank}};
    if (s.local_rank) {
      const long local = EnvLong(s.local_rank, &found);
      if (found) r["local_rank"] = local;
    }
    const long size = EnvLong(s.world_size, &found);
    if (found) r["world_size"] = size;
    return r;
  }
  return nullptr;
}

}  // namespace

std::vector<int> AncestorPids(int pid, int stop_at, size_t max) {
  std::vector<int> chain;
  int p = pid;
  while (chain.size() < max) {
    if (p == stop_at || p <= 1) break;
    p = ParentOf(p);
    if (p <= 0) break;
    chain.push_back(p);
  }
  return chain;
}

std::string SanitizeFileName(const std::string& name) {
  std::string s = name;
  for (char& c : s) {
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  while (!s.empty() && s[0] == '.') s.erase(0, 1);  // no hidden files, no "..": the name starts with a letter
  return s.empty() ? "process" : s;
}

std::string ProcessShortName() {
  std::string comm = ReadFile("/proc/self/comm");
  while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\0')) comm.pop_back();
  if (comm.empty()) {
    auto args = CommandLine();
    if (!args.empty()) comm = args[0].substr(args[0].rfind('/') + 1);
  }
  return SanitizeFileName(comm);
}

nlohmann::json ProcessObject() {
  nlohmann::json p = nlohmann::json::object();
  const int pid = getpid();
  p["pid"] = pid;
  p["ppid"] = getppid();
  bool found = false;
  const long top = EnvLong(env::kTopPid, &found);
  p["top"] = found && top == pid;
  if (found) p["top_pid"] = top;
  p["ancestors"] = AncestorPids(pid, found ? static_cast<int>(top) : 1);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  p["host"] = host;
  p["command_line"] = CommandLine();
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  p["exe"] = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
  p["name"] = ProcessShortName();
  p["rank"] = RankObject();
  return p;
}

}  // namespace twinscope
