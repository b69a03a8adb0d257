#include "format/header.h"

#include <time.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "format/process_info.h"
#include "twinscope/records.h"

namespace twinscope {

uint64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

nlohmann::json BaseHeader(const std::string& role) {
  nlohmann::json h = nlohmann::json::object();
  h["role"] = role;
  h["format_version"] = kFormatVersion;
  h["twinscope_version"] = TWINSCOPE_VERSION;  // project(VERSION) in CMakeLists.txt
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  h["host"] = host;
  h["pid"] = getpid();
  std::vector<std::string> args;
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  size_t pos = 0;
  while (pos < all.size()) {
    size_t end = all.find('\0', pos);
    if (end == std::string::npos) end = all.size();
    args.push_back(all.substr(pos, end - pos));
    pos = end + 1;
  }
  h["command_line"] = args;
  h["start_realtime_ns"] = RealtimeNs();
  h["start_monotonic_ns"] = MonotonicNs();
  nlohmann::json process = ProcessObject();
  process["start_realtime_ns"] = h["start_realtime_ns"];
  h["process"] = std::move(process);
  return h;
}

}  // namespace twinscope
