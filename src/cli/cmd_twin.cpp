// twinscope twin: run one command as a primary (CUPTI collector) and a shadow
// (block probe), then join them launch by launch (src/twin, src/join).
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "cli/cli_text.h"
#include "cli/command.h"
#include "cli/join_outputs.h"
#include "cli/record_common.h"
#include "cli/run_child.h"
#include "cli/run_pairs.h"
#include "cli/twin_command.h"
#include "twin/serve.h"
#include "twin/twin_runner.h"

namespace twinscope::cli {
namespace {

// The flags: a TwinSetup and the two that only choose between its uses.
struct TwinFlags {
  TwinSetup setup;
  bool serve = false;
  bool follow = false;
};

// How a side's top process ended; `command` names it.
void ReportSide(const char* side, const twin::ChildExit& e, const std::string& command) {
  if (!e.started) {
    std::fprintf(stderr, "twinscope twin: the %s could not run: %s\n", side, e.error.c_str());
  } else if (e.term_signal) {
    std::fprintf(stderr, "twinscope twin: the %s was killed by %s after %.1fs (pid %d: %s)\n", side,
                 SignalName(e.term_signal).c_str(), e.elapsed_s, e.pid, command.c_str());
  } else {
    std::fprintf(stderr, "twinscope twin: the %s exited with code %d after %.1fs\n", side, e.exit_code, e.elapsed_s);
  }
}

// When the pattern matched nothing: the kernels the primary launched most.
void SuggestKernels(const std::string& primary_trace, const std::vector<std::string>& patterns) {
  std::string list;
  for (const auto& p : patterns) list += (list.empty() ? "'" : ", '") + p + "'";
  std::fprintf(stderr, "twinscope twin: the kernel pattern %s matched no launched kernel: the shadow traced nothing\n",
               list.c_str());
  auto s = stats::ComputeTraceStats(primary_trace);
  if (!s.ok() || s->kernels.empty()) return;
  auto kernels = s->kernels;
  std::stable_sort(kernels.begin(), kernels.end(), [](auto& a, auto& b) { return a.count > b.count; });
  std::fprintf(stderr, "  the kernels launched most (give a substring of one with --kernel):\n");
  for (size_t i = 0; i < kernels.size() && i < 10; ++i)
    std::fprintf(stderr, "    %10s  %s\n", FormatCount(kernels[i].count).c_str(), kernels[i].name.c_str());
}

std::string Joined(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// Seconds between the side's start and a trace's last sign of life (its last status block).
double LastSignOfLife(const RunTrace& t, int64_t side_start_realtime_ns) {
  const uint64_t start_mono = t.header.value("start_monotonic_ns", uint64_t{0});
  const uint64_t last_mono = t.last_status.value("monotonic_ns", start_mono);
  const double at = static_cast<double>(t.process.start_realtime_ns) + static_cast<double>(last_mono - start_mono);
  return (at - static_cast<double>(side_start_realtime_ns)) / 1e9;
}

// A line per process when a side wrote several traces; a line per shadow process that did not end
// cleanly (part of the shadow's tree dying mid-run). Returns how many shadow processes did not.
size_t ReportSideTraces(const RunSide& side, const twin::ChildExit& e) {
  if (side.traces.size() > 1) {
    std::fprintf(stderr, "twinscope twin: the %s wrote %zu traces (%zu with GPU work) in %s:\n", side.name.c_str(),
                 side.traces.size(), side.WithGpuWork(), side.dir.c_str());
    for (const auto& t : side.traces) std::fprintf(stderr, "  %s\n", ProcessLine(t).c_str());
  }
  size_t unclean = 0;
  for (const auto& t : side.traces) {
    if (t.end == "complete") continue;
    if (side.name == "shadow") ++unclean;
    std::fprintf(stderr,
                 "twinscope twin: %s process pid %d (%s) did not shut down cleanly (%s): killed about %.1fs into the "
                 "run (its last status block); what it left is read\n",
                 side.name.c_str(), t.process.pid, Joined(t.process.command_line).c_str(), t.end.c_str(),
                 LastSignOfLife(t, e.start_realtime_ns));
  }
  return unclean;
}

}  // namespace

int FinishTwin(const TwinSetup& f, const std::string& out_dir, const twin::ChildExit& primary,
               const twin::ChildExit& shadow, const std::string& primary_dir, const std::string& shadow_dir,
               bool shadow_skipped, const nlohmann::json& extra, join::JoinedModel* model) {
  const std::string command = Joined(f.command);
  ReportSide("primary", primary, command);
  if (shadow_skipped) {
    std::fprintf(stderr, "twinscope twin: stopped by a signal: the shadow was not started\n");
  } else {
    ReportSide("shadow", shadow, command);
  }
  const int code = primary.exit_code;
  nlohmann::json twin_json = {{"concurrent", f.concurrent},
                              {"primary_exit", primary.exit_code},
                              {"shadow_exit", shadow.exit_code},
                              {"shadow_signal", shadow.term_signal},
                              {"primary_elapsed_s", primary.elapsed_s},
                              {"shadow_elapsed_s", shadow.elapsed_s},
                              {"shadow_start_realtime_ns", shadow.start_realtime_ns},
                              {"shadow_end_realtime_ns", shadow.end_realtime_ns},
                              {"primary_start_realtime_ns", primary.start_realtime_ns},
                              {"primary_end_realtime_ns", primary.end_realtime_ns},
                              {"command", f.command},
                              {"kernels", f.kernels}};
  for (const auto& [k, v] : extra.items()) twin_json[k] = v;
  std::ofstream(out_dir + "/twin.json") << twin_json.dump(2) << "\n";
  auto listing = ListRun(out_dir);
  const RunSide* pside = listing.ok() ? listing->Side("primary") : nullptr;
  const RunSide* sside = listing.ok() ? listing->Side("shadow") : nullptr;
  if (pside) ReportSideTraces(*pside, primary);
  const size_t shadow_unclean = sside ? ReportSideTraces(*sside, shadow) : 0;
  std::string pwhy, swhy;
  const RunTrace* pmain = pside ? MainTrace(*pside, &pwhy) : nullptr;
  const RunTrace* smain = sside ? MainTrace(*sside, &swhy) : nullptr;
  if (!pmain) {
    std::fprintf(stderr,
                 "twinscope twin: the primary wrote no trace with GPU work (%s): nothing to join. Did the program "
                 "make CUDA calls? Look for 'twinscope:' messages above\n",
                 primary_dir.c_str());
    return code ? code : 1;
  }
  const bool shadow_died = shadow.term_signal || (shadow.exit_code && !primary.exit_code) || shadow_unclean > 0;
  if (!smain) {
    if (shadow_died)
      std::fprintf(stderr,
                   "twinscope twin: the shadow died before it launched GPU work (no trace with GPU work in %s): "
                   "nothing to join; the primary's trace is complete on its own\n",
                   shadow_dir.c_str());
    else
      std::fprintf(stderr,
                   "twinscope twin: the shadow wrote no trace with GPU work (%s): nothing to join; the primary's trace "
                   "is complete on its own\n",
                   shadow_dir.c_str());
    return code;
  }
  if (shadow_died)
    std::fprintf(stderr, "twinscope twin: the shadow did not finish cleanly: joining with what it left\n");
  // Several processes with GPU work on a side: pair them and join each pair (docs/processes.md).
  RunJoinRequest rr;
  rr.out_dir = out_dir;
  rr.options = TwinOptions(out_dir);
  rr.pairing = f.pairing;
  rr.top = f.top;
  if (JoinRunPairs(*pside, *sside, rr, model) != 0) return code ? code : 1;
  // "Matched nothing" only when no shadow process traced a matching launch and the shadow lived to the end.
  uint64_t traced = 0, matching = 0;
  for (const auto& t : sside->traces) {
    traced += t.launch_records;
    if (t.last_status.contains("counters") && t.last_status["counters"].is_object())
      matching += t.last_status["counters"].value("launches_matching", uint64_t{0});
  }
  if (traced == 0 && matching == 0) {
    if (shadow_died)
      std::fprintf(stderr,
                   "twinscope twin: the shadow traced no matching launch before it died: the pattern may match "
                   "launches it never reached\n");
    else
      SuggestKernels(pmain->path, f.kernels);
  }
  return code;
}

namespace {

bool Libraries(std::string* primary, std::string* shadow) {
  auto p = FindCollectorLibrary("libtwinscope_cupti.so");
  auto s = FindCollectorLibrary("libtwinscope_blocks.so");
  for (auto* l : {&p, &s}) {
    if (!l->ok()) {
      std::fprintf(stderr, "twinscope twin: %s\n", l->status().message().c_str());
      return false;
    }
  }
  *primary = *p;
  *shadow = *s;
  return true;
}

}  // namespace

int RunTwinAndJoin(const TwinSetup& f) {
  twin::TwinRequest r;
  if (!Libraries(&r.primary_library, &r.shadow_library)) return 1;
  r.command = f.command;
  r.out_dir = AbsolutePath(f.out);
  r.shadow_env = BlocksEnv(f.kernels, f.sampling);
  r.primary_env = PrimaryCuptiEnv(f.command);
  r.concurrent = f.concurrent;
  r.shadow_device = f.shadow_device;
  r.progress = isatty(STDERR_FILENO);
  std::fprintf(stderr, "twinscope twin: %s, results in %s\n",
               f.concurrent ? "primary and shadow at once" : "primary first, then the shadow", r.out_dir.c_str());
  twin::TwinOutcome o = twin::RunTwin(r);
  if (!o.error.empty()) {
    std::fprintf(stderr, "twinscope twin: %s\n", o.error.c_str());
    return 1;
  }
  return FinishTwin(f, r.out_dir, o.primary, o.shadow, o.primary_dir, o.shadow_dir, o.shadow_skipped,
                    {{"autotune", o.autotune}}, nullptr);
}

namespace {

// A serving run's input to the per-request views: `given` (placeholders expanded) if the user named
// one, else DIR/`name` if this run wrote it (not a file left by an earlier run); "" if none.
std::string ServedFile(const std::string& given, const char* name, const std::string& dir, int primary_port,
                       const timespec& since) {
  if (!given.empty()) return AbsolutePath(twin::ExpandPlaceholders(given, 0, primary_port, dir));
  const std::string p = dir + "/" + name;
  struct stat st {};
  if (stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  return st.st_mtim.tv_sec + 1 >= since.tv_sec ? p : "";  // coarse file clocks: a second's slack
}

}  // namespace

int ServeTwinAndJoin(const TwinSetup& f, const std::function<void(const twin::ServeEndpoints&)>& client,
                     join::JoinedModel* model) {
  twin::ServeRequest r;
  if (!Libraries(&r.primary_library, &r.shadow_library)) return 1;
  r.command = f.command;
  r.primary_args = f.primary_args;
  r.shadow_args = f.shadow_args;
  r.out_dir = AbsolutePath(f.out);
  r.shadow_env = BlocksEnv(f.kernels, f.sampling);
  r.primary_env = PrimaryCuptiEnv(f.command);
  r.listen = f.listen;
  r.health_path = f.health_path;
  r.health_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.health_timeout * 1000));
  r.duration_s = f.duration;
  r.shadow_device = f.shadow_device;
  r.progress = isatty(STDERR_FILENO);
  r.client = client;
  r.shadow_follows = f.shadow_follows;
  std::fprintf(stderr, "twinscope twin --serve: primary and shadow servers, results in %s\n", r.out_dir.c_str());
  timespec started{};
  clock_gettime(CLOCK_REALTIME, &started);
  twin::ServeOutcome o = twin::RunServe(r);
  if (!o.error.empty()) {
    std::fprintf(stderr, "twinscope twin: %s\n", o.error.c_str());
    return 1;
  }
  nlohmann::json extra = {
      {"serve", true},
      {"mirror_url", o.mirror_url},
      {"primary_port", o.primary_port},
      {"shadow_port", o.shadow_port},
      {"request_log", o.request_log},
      {"mirror", o.mirror_counters},
      {"autotune", o.autotune},
      {"request_trace", ServedFile(f.request_trace, "requests-primary.jsonl", r.out_dir, o.primary_port, started)},
      {"schedule", ServedFile(f.schedule, "schedule.jsonl", r.out_dir, o.primary_port, started)}};
  std::fprintf(stderr, "twinscope twin: mirror: %s requests, shadow copies ok %s, failed %s\n",
               o.mirror_counters.value("requests", nlohmann::json(0)).dump().c_str(),
               o.mirror_counters.value("shadow_ok", nlohmann::json(0)).dump().c_str(),
               o.mirror_counters.value("shadow_failed", nlohmann::json(0)).dump().c_str());
  // A server stopped by our SIGTERM ended as asked: report the run's code as 0.
  twin::ChildExit primary = o.primary;
  if (primary.term_signal == SIGTERM) primary.exit_code = 0;
  extra["stop_request"] = {
      {"asked", o.stop_request.asked}, {"answered", o.stop_request.answered}, {"no_answer", o.stop_request.waiting}};
  return FinishTwin(f, r.out_dir, primary, o.shadow, o.primary_dir, o.shadow_dir, false, extra, model);
}

namespace {

CommandRegistration kTwin(
    "twin", "Run a program twice, a primary (CUPTI) and a shadow (block probe), and join them launch by launch",
    [](CLI::App* sub) -> CommandRun {
      auto f = std::make_shared<TwinFlags>();
      sub->add_option("--kernel", f->setup.kernels,
                      "Kernel to trace blocks of (substring of the mangled or demangled name; 're:' prefix for a "
                      "regex); repeat for more")
          ->required()
          ->allow_extra_args(false)  // one pattern per --kernel: a '--' after it still starts the command
          ->check(CLI::Validator(CheckKernelPattern, "PATTERN"));
      AddBlocksSamplingFlags(sub, &f->setup.sampling, "Shadow: ");
      sub->add_option("-o,--output", f->setup.out,
                      "Folder for primary/ and shadow/ (a trace per process each) and the joined views")
          ->capture_default_str();
      sub->add_flag("--concurrent", f->setup.concurrent,
                    "Run both at once (live input); the join flags primary kernels that ran while the shadow had "
                    "GPU work. Default: the primary alone first, then the shadow");
      sub->add_option("--shadow-device", f->setup.shadow_device, "Run the shadow on this GPU (CUDA_VISIBLE_DEVICES)")
          ->check(CLI::NonNegativeNumber);
      sub->add_option("--top", f->setup.top, "Slowest matched launches to print")->capture_default_str();
      sub->add_option("command", f->setup.command, "The program and its arguments, after '--'")->required();
      sub->footer("Example: twinscope twin --kernel reshape_and_cache_flash -o run -- python infer.py");
      sub->add_flag("--serve", f->serve,
                    "The command is a server: start a primary and a shadow of it on their own ports ({port} or "
                    "TWINSCOPE_PORT), wait for GET /health, put the mirror in front, serve until Ctrl-C or --duration, "
                    "then join");
      sub->add_flag("--follow", f->follow,
                    "--serve: the shadow follows the primary's step schedule (appends '--follow "
                    "http://127.0.0.1:{primary_port} --exit-after-schedule' to the shadow's command, as "
                    "twinscope-demo-server takes it); on stopping, the shadow finishes the schedule first");
      sub->add_option("--listen", f->setup.listen, "--serve: where the mirror listens (HOST:PORT; port 0 picks one)")
          ->capture_default_str();
      sub->add_option("--duration", f->setup.duration, "--serve: stop after this many seconds of serving")
          ->check(CLI::PositiveNumber);
      sub->add_option("--health-timeout", f->setup.health_timeout, "--serve: seconds to wait for both servers' /health")
          ->capture_default_str();
      sub->add_option("--health-path", f->setup.health_path, "--serve: the servers' health endpoint")
          ->capture_default_str();
      sub->add_option("--primary-args", f->setup.primary_args, "--serve: extra arguments for the primary's command")
          ->allow_extra_args(false);
      sub->add_option("--request-trace", f->setup.request_trace,
                      "--serve: the primary's request trace (one JSON line per request with its steps, as "
                      "twinscope-demo-server --trace-requests writes it; {dir} is the output folder) for per-request "
                      "views. Default: DIR/requests-primary.jsonl if the run wrote it");
      sub->add_option("--schedule", f->setup.schedule,
                      "--serve: the primary's step schedule (twinscope-demo-server --schedule-out) for each step's "
                      "batch. Default: DIR/schedule.jsonl if the run wrote it");
      sub->add_option("--shadow-args", f->setup.shadow_args,
                      "--serve: extra arguments for the shadow's command (e.g. a smaller GPU memory share)")
          ->allow_extra_args(false);
      AddPairingFlags(sub, &f->setup.pairing);
      return [f]() {
        TwinSetup s = f->setup;
        s.concurrent = s.concurrent || f->serve;
        if (!f->serve) return RunTwinAndJoin(s);
        if (f->follow) {
          s.shadow_args.push_back("--follow");
          s.shadow_args.push_back("http://127.0.0.1:{primary_port}");
          s.shadow_args.push_back("--exit-after-schedule");  // so it can finish the schedule after the primary
          s.shadow_follows = true;
        }
        return ServeTwinAndJoin(s, {}, nullptr);
      };
    });

}  // namespace
}  // namespace twinscope::cli
