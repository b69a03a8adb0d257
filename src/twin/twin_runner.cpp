// The twin runner: both sides' environments, their order, the progress line.
#include "twin/twin_runner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "base/count_text.h"
#include "base/env_names.h"
#include "format/trace_tail.h"
#include "twin/autotune_env.h"

namespace twinscope::twin {
namespace {

std::string Count(uint64_t n) { return CountText(n); }

// "primary 1,234 launches (running)" for the progress line.
std::string Side(const char* name, TraceTail& tail, const ChildExit* e) {
  tail.Poll();
  std::string state = !e ? "waiting" : e->running ? "running" : !e->started ? "not started" : "done";
  return std::string(name) + " " + Count(tail.launches()) + " launches (" + state + ")";
}

}  // namespace

bool MakeDirs(const std::string& dir, std::string* error) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty() && mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
        *error = "cannot make folder " + cur + ": " + std::strerror(errno);
        return false;
      }
    }
    if (i < dir.size()) cur += dir[i];
  }
  return true;
}

EnvList SideEnv(const std::string& library, const std::string& output, const std::string& role, const EnvList& extra) {
  EnvList env = extra;
  env.emplace_back("CUDA_INJECTION64_PATH", library);
  env.emplace_back("NVTX_INJECTION64_PATH", library);
  env.emplace_back(env::kOutput, output);
  env.emplace_back("TWINSCOPE_ROLE", role);
  return env;
}

TwinOutcome RunTwin(const TwinRequest& r) {
  TwinOutcome out;
  if (!MakeDirs(r.out_dir, &out.error)) return out;
  out.primary_trace = r.out_dir + "/primary.tsc";
  out.shadow_trace = r.out_dir + "/shadow.tsc";
  for (const auto& p : {out.primary_trace, out.shadow_trace}) {
    // A trace left from an earlier run must not pass for this run's.
    if (unlink(p.c_str()) != 0 && errno != ENOENT) {
      out.error = "cannot replace " + p + ": " + std::strerror(errno);
      return out;
    }
  }
  ChildSpec primary{r.command, SideEnv(r.primary_library, out.primary_trace, "primary", r.primary_env), false};
  EnvList shadow_env = SideEnv(r.shadow_library, out.shadow_trace, "shadow", r.shadow_env);
  const AutotuneEnv tune = ShareAutotuneCaches(r.out_dir);  // the same autotune choices on both sides
  tune.Apply(&primary.env, &shadow_env, &out.autotune);
  if (r.shadow_device >= 0) shadow_env.emplace_back("CUDA_VISIBLE_DEVICES", std::to_string(r.shadow_device));
  ChildSpec shadow{r.command, shadow_env, false};

  ChildGroup group;
  TraceTail ptail(out.primary_trace), stail(out.shadow_trace);
  const auto t0 = std::chrono::steady_clock::now();
  size_t pi = SIZE_MAX, si = SIZE_MAX;
  auto tick = [&] {
    if (!r.progress) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string line = Side("primary", ptail, pi == SIZE_MAX ? nullptr : &group.exit(pi)) + ", " +
                       Side("shadow", stail, si == SIZE_MAX ? nullptr : &group.exit(si));
    std::fprintf(stderr, "\r\033[Ktwinscope twin: %.0fs, %s", s, line.c_str());
    std::fflush(stderr);
  };
  pi = group.Start(primary);
  if (r.concurrent) {
    si = group.Start(shadow);
    group.WaitAll(tick);
  } else {
    group.WaitAll(tick);
    if (ChildGroup::ForwardedSignal() && group.exit(pi).started) {
      out.shadow_skipped = true;  // the user stopped the run: do not start the second half
    } else {
      si = group.Start(shadow);
      group.WaitAll(tick);
    }
  }
  if (r.progress) std::fputs("\r\033[K", stderr);
  out.primary = group.exit(pi);
  if (si != SIZE_MAX) out.shadow = group.exit(si);
  return out;
}

}  // namespace twinscope::twin
