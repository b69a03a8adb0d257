// The twin runner: both sides' environments, their order, the progress line.
#include "twin/twin_runner.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "base/count_text.h"
#include "base/env_names.h"
#include "format/output_path.h"
#include "format/trace_tail.h"
#include "twin/autotune_env.h"

namespace twinscope::twin {
namespace {

std::string Count(uint64_t n) { return CountText(n); }

// "primary 1,234 launches (running)" for the progress line.
std::string Side(const char* name, RunTail& tail, const ChildExit* e) {
  tail.Poll();
  std::string state = !e ? "waiting" : e->running ? "running" : !e->started ? "not started" : "done";
  std::string processes = tail.traces() > 1 ? ", " + std::to_string(tail.traces()) + " processes" : "";
  return std::string(name) + " " + Count(tail.launches()) + " launches (" + state + processes + ")";
}

bool IsFolder(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Removes the files in `dir` whose names end with `suffix` ("" = all), then `dir` itself if `rmdir_too`.
bool RemoveFilesIn(const std::string& dir, const std::string& suffix, bool rmdir_too, std::string* error) {
  DIR* d = opendir(dir.c_str());
  if (!d) return true;
  bool ok = true;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (!suffix.empty() &&
        (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0))
      continue;
    const std::string p = dir + "/" + name;
    if (unlink(p.c_str()) != 0 && errno != ENOENT) {
      *error = "cannot remove " + p + " (left by an earlier run): " + std::strerror(errno);
      ok = false;
    }
  }
  closedir(d);
  if (ok && rmdir_too && rmdir(dir.c_str()) != 0 && errno != ENOENT && errno != ENOTEMPTY) {
    *error = "cannot remove folder " + dir + ": " + std::strerror(errno);
    ok = false;
  }
  return ok;
}

}  // namespace

bool MakeDirs(const std::string& dir, std::string* error) { return MakeFolders(dir, error); }

std::string SideDir(const std::string& out_dir, const std::string& side) { return out_dir + "/" + side; }
std::string ControlDir(const std::string& side_dir) { return side_dir + "/.control"; }

EnvList SideEnv(const std::string& library, const std::string& side_dir, const std::string& role,
                const EnvList& extra) {
  EnvList env = extra;
  env.emplace_back("CUDA_INJECTION64_PATH", library);
  env.emplace_back("NVTX_INJECTION64_PATH", library);
  env.emplace_back(env::kOutput, side_dir + "/");  // a folder: a trace per process
  env.emplace_back(env::kControlDir, ControlDir(side_dir));
  env.emplace_back("TWINSCOPE_ROLE", role);
  return env;
}

bool RemoveStaleOutput(const std::string& output, std::string* error) {
  if ((!output.empty() && output.back() == '/') || IsFolder(output)) {
    std::string dir = output;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return RemoveFilesIn(dir, ".tsc", false, error) && RemoveFilesIn(ControlDir(dir), "", true, error);
  }
  if (unlink(output.c_str()) != 0 && errno != ENOENT) {
    *error = "cannot replace the existing trace " + output + ": " + std::strerror(errno);
    return false;
  }
  return RemoveFilesIn(output + ".d", ".tsc", true, error);
}

bool PrepareTwinFolder(const std::string& out_dir, std::string* error) {
  if (!MakeDirs(out_dir, error)) return false;
  for (const char* legacy : {"/primary.tsc", "/shadow.tsc"})
    if (!RemoveStaleOutput(out_dir + legacy, error)) return false;
  for (const char* side : {"primary", "shadow"}) {
    const std::string dir = SideDir(out_dir, side);
    if (!RemoveStaleOutput(dir + "/", error) || !MakeDirs(dir, error)) return false;
  }
  return true;
}

TwinOutcome RunTwin(const TwinRequest& r) {
  TwinOutcome out;
  // Traces left from an earlier run must not pass for this run's.
  if (!PrepareTwinFolder(r.out_dir, &out.error)) return out;
  out.primary_dir = SideDir(r.out_dir, "primary");
  out.shadow_dir = SideDir(r.out_dir, "shadow");
  // Each side in a process group of its own, so signals reach its whole tree; run one after the
  // other, each has the terminal while it runs.
  ChildSpec primary{r.command, SideEnv(r.primary_library, out.primary_dir, "primary", r.primary_env), true,
                    !r.concurrent};
  EnvList shadow_env = SideEnv(r.shadow_library, out.shadow_dir, "shadow", r.shadow_env);
  // The same autotune choices on both sides.
  const AutotuneEnv tune = ShareAutotuneCaches(r.out_dir, nullptr, /*at_once=*/r.concurrent);
  tune.Apply(&primary.env, &shadow_env, &out.autotune);
  if (r.shadow_device >= 0) shadow_env.emplace_back("CUDA_VISIBLE_DEVICES", std::to_string(r.shadow_device));
  ChildSpec shadow{r.command, shadow_env, true, !r.concurrent};

  ChildGroup group;
  RunTail ptail(out.primary_dir + "/"), stail(out.shadow_dir + "/");
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
