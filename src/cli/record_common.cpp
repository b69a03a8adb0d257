#include "cli/record_common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>

#include "base/env_names.h"
#include "base/log.h"
#include "base/settings.h"
#include "cli/cli_text.h"
#include "cli/run_child.h"
#include "cuptilib/cupti_library.h"
#include "format/output_path.h"
#include "probe/gpu_check.h"
#include "twin/twin_runner.h"

namespace twinscope::cli {

std::string CheckKernelPattern(const std::string& p) {
  if (p.empty() || p == "re:") return "empty kernel pattern";
  if (p.find(';') != std::string::npos) return "a pattern cannot contain ';' (give --kernel once per pattern)";
  if (p.rfind("re:", 0) == 0) {
    try {
      std::regex re(p.substr(3));
    } catch (const std::regex_error& e) {
      return "bad regular expression '" + p.substr(3) + "': " + e.what();
    }
  }
  return "";
}

void AddBlocksSamplingFlags(CLI::App* sub, BlocksSampling* s, const std::string& p) {
  sub->add_option("--every", s->every, p + "Trace every Nth matching launch")->check(CLI::PositiveNumber);
  sub->add_option("--max-launches", s->max_launches, p + "Stop tracing after N launches")->check(CLI::PositiveNumber);
  sub->add_option("--per-second", s->per_second, p + "Trace at most R launches a second")->check(CLI::PositiveNumber);
  sub->add_option("--budget", s->budget,
                  p + "Sample so that the program's own time grows by at most PCT percent (estimated from what each "
                      "sample costs)")
      ->check(CLI::Range(0.001, 100.0));
  sub->add_option("--patch", s->patch,
                  p + "always: patch target modules for good; toggle: only around sampled launches (default: toggle "
                      "when sampling, always when tracing every launch)")
      ->check(CLI::IsMember({"always", "toggle"}));
}

std::vector<std::pair<std::string, std::string>> BlocksEnv(const std::vector<std::string>& kernels,
                                                           const BlocksSampling& s) {
  // As the probe reads them back (strtod): enough digits, no exponent surprises.
  auto decimal = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return std::string(buf);
  };
  std::vector<std::pair<std::string, std::string>> env;
  std::string patterns;
  for (const auto& p : kernels) patterns += (patterns.empty() ? "" : ";") + p;
  env.emplace_back(env::kKernelPatterns, patterns);
  if (s.every) env.emplace_back(env::kEvery, std::to_string(s.every));
  if (s.max_launches) env.emplace_back(env::kMaxLaunches, std::to_string(s.max_launches));
  if (s.per_second > 0) env.emplace_back(env::kPerSecond, decimal(s.per_second));
  if (s.budget > 0) env.emplace_back(env::kBudget, decimal(s.budget));
  if (!s.patch.empty()) env.emplace_back(env::kBlocksPatch, s.patch);
  return env;
}

namespace {

// Unless TWINSCOPE_GUARD=0, the primary gets the guard preloaded (src/guard).

bool IsFolderPath(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsPython(const std::string& arg0) {
  const std::string base = arg0.substr(arg0.rfind('/') + 1);
  return base.rfind("python", 0) == 0 && base.find_first_not_of("python0123456789.") == std::string::npos;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> PrimaryCuptiEnv(const std::vector<std::string>& command) {
  std::vector<std::pair<std::string, std::string>> env;
  cuptilib::SearchOptions search;
  if (!command.empty() && IsPython(command[0]) && command[0] != "python3") search.pythons.push_back(command[0]);
  if (std::string site = WheelSiteDir(); !site.empty()) search.site_dirs.push_back(site);  // pip's CUPTI beside us
  auto choice = cuptilib::Choose(search);
  const bool quiet = settings::Flag(env::kQuiet);
  if (!choice.ok()) {
    std::fprintf(stderr, "twinscope: %s\n", choice.status().message().c_str());
  } else {
    const cuptilib::Candidate& c = choice->chosen;
    env.emplace_back(cuptilib::kCuptiLibraryEnv, c.path);
    if (!quiet) {
      std::string line = "twinscope: " + cuptilib::Describe(c);
      size_t usable = 0;
      for (const auto& f : choice->found) usable += f.usable() ? 1 : 0;
      if (usable > 1) line += ", the newest of " + std::to_string(usable) + " found";
      line += c.multi_subscriber
                  ? "; a CUPTI client inside the program (torch.profiler) runs beside twinscope"
                  : "; a CUPTI client inside the program (torch.profiler) cannot run beside twinscope on it (CUPTI "
                    "13.5 can: pip install nvidia-cuda-cupti==13.5.25)";
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }
  if (!settings::Flag(env::kGuard)) return env;
  auto guard = FindCollectorLibrary("libtwinscope_guard.so");
  if (guard.ok()) {
    std::string preload = *guard;
    if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
    env.emplace_back("LD_PRELOAD", preload);
  } else {
    std::fprintf(stderr, "twinscope: %s; a CUPTI client inside the program may starve silently\n",
                 guard.status().message().c_str());
  }
  return env;
}

int RecordCommand(const RecordRequest& request) {
  if (request.command.empty()) {
    std::fprintf(stderr, "twinscope: no command to run: put it after '--', e.g. twinscope record -- ./app args\n");
    return 2;
  }
  auto library = FindCollectorLibrary(request.library);
  if (!library.ok()) {
    std::fprintf(stderr, "twinscope: %s\n", library.status().message().c_str());
    return 1;
  }
  // A folder (an existing one, or a path ending in '/') gets a trace per process; a file is the
  // first process's trace, with the others' beside it in FILE.d/ (docs/trace-format.md, "Run folders").
  const bool folder = !request.output.empty() && (request.output.back() == '/' || IsFolderPath(request.output));
  std::string output = AbsolutePath(request.output);
  while (output.size() > 1 && output.back() == '/') output.pop_back();
  std::string error;
  if (folder) {
    if (!twin::MakeDirs(output, &error)) {
      std::fprintf(stderr, "twinscope: cannot write the traces to %s: %s\n", output.c_str(), error.c_str());
      return 1;
    }
    if (access(output.c_str(), W_OK) != 0) {
      std::fprintf(stderr, "twinscope: cannot write the traces to folder %s: %s\n", output.c_str(),
                   std::strerror(errno));
      return 1;
    }
  } else {
    const auto slash = output.rfind('/');
    const std::string dir = slash == 0 ? "/" : output.substr(0, slash);
    if (access(dir.c_str(), W_OK) != 0) {
      std::fprintf(stderr, "twinscope: cannot write the trace to %s: folder %s: %s\n", output.c_str(), dir.c_str(),
                   std::strerror(errno));
      return 1;
    }
  }
  // Traces left from an earlier run must not pass for this run's; other hosts' traces in a shared
  // run folder stay (docs/processes.md, "Several hosts").
  size_t other_hosts = 0;
  if (!RemoveStaleTraces(folder ? output + "/" : output, ThisHost(), &other_hosts, &error)) {
    std::fprintf(stderr, "twinscope: %s\n", error.c_str());
    return 1;
  }
  if (other_hosts)
    std::fprintf(stderr, "twinscope: %s holds %zu trace(s) of other hosts: kept (a run shared by several hosts)\n",
                 output.c_str(), other_hosts);
  const std::string env_output = folder ? output + "/" : output;

  ChildOptions options;
  options.argv = request.command;
  options.env = request.env;
  options.env.emplace_back("CUDA_INJECTION64_PATH", *library);
  options.env.emplace_back("NVTX_INJECTION64_PATH", *library);
  options.env.emplace_back(env::kOutput, env_output);
  options.live_status = isatty(STDERR_FILENO);
  options.watch_file = env_output;
  options.status_label = request.label;
  ChildResult result = RunChild(options);
  if (!result.started) {
    std::fprintf(stderr, "twinscope: %s\n", result.error.c_str());
    return result.exit_code;
  }
  ReportRun(result, env_output, request.library);
  return result.exit_code;
}

bool GpuUsableOrSay(const char* tool, const char* then) {
  const probe::GpuCheck c = probe::CheckGpu();
  if (c.usable) {
    if (!c.finished) std::fprintf(stderr, "%s: %s: going on as if there were a GPU\n", tool, c.reason.c_str());
    return true;
  }
  std::fprintf(stderr, "%s: no usable NVIDIA GPU here: %s%s. %s\n", tool, c.reason.c_str(),
               c.driver_version ? (" (driver for " + probe::DriverVersionText(c.driver_version) + ")").c_str() : "",
               then);
  return false;
}

int RunOnceWithoutGpu(const std::vector<std::string>& command) {
  if (GpuUsableOrSay("twinscope twin",
                     "Running the program once, without tracing (no primary and shadow): nothing will be joined; "
                     "the exit code is the program's, or 1 where it exits 0"))
    return -1;
  ChildOptions options;
  options.argv = command;
  ChildResult result = RunChild(options);
  if (!result.started) {
    std::fprintf(stderr, "twinscope twin: %s\n", result.error.c_str());
    return result.exit_code;
  }
  if (result.term_signal)
    std::fprintf(stderr, "twinscope twin: the program was killed by %s after %.1fs; nothing joined (no GPU)\n",
                 SignalName(result.term_signal).c_str(), result.elapsed_s);
  else
    std::fprintf(stderr, "twinscope twin: the program exited with code %d after %.1fs; nothing joined (no GPU)\n",
                 result.exit_code, result.elapsed_s);
  return result.exit_code ? result.exit_code : 1;
}

}  // namespace twinscope::cli
