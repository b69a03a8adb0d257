#include "blocks/coexistence.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <vector>

extern char** environ;

namespace twinscope::blocks {
namespace {

std::string Basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

}  // namespace

std::string LikelySeatHolder(std::string_view proc_maps, std::string_view injection_path, std::string_view ld_preload,
                             bool nsight_env) {
  std::vector<std::string> reasons;
  // Libraries mapped in the process whose presence means a CUPTI user.
  static const char* const kHolders[] = {"libcupti", "libtwinscope_cupti", "libToolsInjection", "libnvperf_host",
                                         "libpxcupti"};
  std::set<std::string> mapped;
  size_t pos = 0;
  while (pos < proc_maps.size()) {
    size_t end = proc_maps.find('\n', pos);
    if (end == std::string_view::npos) end = proc_maps.size();
    std::string_view line = proc_maps.substr(pos, end - pos);
    pos = end + 1;
    size_t path_at = line.find('/');
    if (path_at == std::string_view::npos) continue;
    std::string base = Basename(line.substr(path_at));
    for (const char* h : kHolders)
      if (base.find(h) != std::string::npos) mapped.insert(base);
  }
  for (const std::string& m : mapped) reasons.push_back(m + " is loaded in the process (a CUPTI user)");
  if (!injection_path.empty() && injection_path.find("twinscope_blocks") == std::string_view::npos)
    reasons.push_back("CUDA_INJECTION64_PATH names " + Basename(injection_path) + " (another injected tool)");
  for (const char* h : kHolders)
    if (ld_preload.find(h) != std::string_view::npos) {
      reasons.push_back("LD_PRELOAD names a CUPTI user (" + std::string(ld_preload) + ")");
      break;
    }
  if (nsight_env) reasons.push_back("the process runs under Nsight Systems/Compute (NSYS_/NV_NSIGHT environment)");
  std::string out;
  for (size_t i = 0; i < reasons.size(); ++i) {
    if (i) out += "; ";
    out += reasons[i];
  }
  return out;
}

std::string LikelySeatHolderOfThisProcess() {
  std::ifstream f("/proc/self/maps");
  std::string maps((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const char* inj = std::getenv("CUDA_INJECTION64_PATH");
  const char* pre = std::getenv("LD_PRELOAD");
  bool nsight = false;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "NSYS_", 5) == 0 || std::strncmp(*e, "NV_NSIGHT", 9) == 0) nsight = true;
  return LikelySeatHolder(maps, inj ? inj : "", pre ? pre : "", nsight);
}

std::string SilentProbeMessage(bool subscribe_failed, std::string_view error, std::string_view holder) {
  std::string msg;
  if (subscribe_failed) {
    msg = "the block probe could not subscribe to the Compute Sanitizer (" + std::string(error) +
          "): no block was traced.";
  } else {
    msg =
        "the block probe subscribed to the Compute Sanitizer but received no callback at all although the program "
        "used CUDA: no block was traced. On this stack that happens when a CUPTI user (Nsight, a profiler, "
        "libtwinscope_cupti) took the seat first.";
  }
  msg += holder.empty() ? std::string(" Likely holder: a CUPTI user (Nsight, a profiler, libtwinscope_cupti).")
                        : " Likely holder: " + std::string(holder) + ".";
  msg +=
      " CUPTI and the Sanitizer cannot share one process here (`twinscope probe` shows it); run the CUPTI collector "
      "and the block probe in two processes with `twinscope twin`.";
  return msg;
}

}  // namespace twinscope::blocks
