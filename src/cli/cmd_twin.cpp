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
#include "twin/engine_env.h"
#include "twin/serve.h"
#include "twin/shadow_replay.h"
#include "twin/sizing_flags.h"
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
  if (const int no_gpu = RunOnceWithoutGpu(f.command); no_gpu >= 0) return no_gpu;  // said first, run once
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

// The engine adapters' setup for this run: the mode, the shim folder (said on stderr).
twin::EngineAdapterSetup AdapterSetup(const TwinSetup& f) {
  twin::EngineAdapterSetup a;
  a.mode = f.engine_adapter;
  a.follow_step_timeout_s = f.follow_step_timeout;
  if (a.mode == "off") {
    std::fprintf(stderr, "twinscope twin: engine adapters off (--engine-adapter off)\n");
    return a;
  }
  const twin::EngineShim shim = twin::FindEngineShim(ExecutableDir());
  a.shim_dir = shim.dir;
  if (shim.dir.empty())
    std::fprintf(stderr, "twinscope twin: engine adapters off: %s\n", shim.where.c_str());
  else
    std::fprintf(stderr, "twinscope twin: engine adapters %s, from %s\n", a.mode.c_str(), shim.where.c_str());
  return a;
}

// Both sides get the engine's sizing flags the user gave one of them (docs/sequential-serving.md, "The same
// capacity on both sides"), said on stderr. `primary_args`: the primary's extra arguments (a replay: the saved
// run's). The result's ToJson goes into twin.json.
twin::SizingAlignment AlignSizing(const TwinSetup& f, const std::vector<std::string>& primary_args,
                                  bool both_on_one_gpu, bool primary_ran) {
  std::string why;
  const std::string engine = twin::DetectServingEngine(f.command, f.engine_adapter, &why);
  twin::SizingAlignment a =
      twin::AlignSizingFlags(engine, f.command, primary_args, f.shadow_args, both_on_one_gpu, primary_ran);
  a.engine_why = why;
  for (const auto& d : a.decisions) std::fprintf(stderr, "twinscope twin: %s\n", d.message.c_str());
  if (!a.unknown_engine_message.empty()) std::fprintf(stderr, "twinscope twin: %s\n", a.unknown_engine_message.c_str());
  return a;
}

twin::EnvList Plus(twin::EnvList a, const twin::EnvList& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
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
  nlohmann::json sizing;
  if (!client) {  // twin --serve --concurrent: both record through their adapters (the demo has none)
    // The same sizing flags on both sides; a memory share stays per side when both share one GPU.
    const twin::SizingAlignment a = AlignSizing(f, f.primary_args, f.shadow_device < 0, false);
    r.primary_args = a.primary_args;
    r.shadow_args = a.shadow_args;
    sizing = a.ToJson();
    const twin::EngineAdapterSetup adapters = AdapterSetup(f);
    r.primary_env = Plus(r.primary_env, twin::EngineAdapterEnv(adapters, "primary", r.out_dir, false));
    r.shadow_env = Plus(r.shadow_env, twin::EngineAdapterEnv(adapters, "shadow", r.out_dir, false));
  }
  r.listen = f.listen;
  r.health_path = f.health_path;
  r.health_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.health_timeout * 1000));
  r.duration_s = f.duration;
  r.max_requests = f.max_requests;
  r.shadow_device = f.shadow_device;
  r.progress = isatty(STDERR_FILENO);
  r.client = client;
  r.shadow_follows = f.shadow_follows;
  std::fprintf(stderr, "twinscope twin --serve: primary and shadow servers at once, results in %s\n",
               r.out_dir.c_str());
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
  if (!client) {
    extra["sizing"] = sizing;
    extra["adapters"] = {{"primary", twin::ReadAdapterStatus(r.out_dir, "primary")},
                         {"shadow", twin::ReadAdapterStatus(r.out_dir, "shadow")}};
  }
  return FinishTwin(f, r.out_dir, primary, o.shadow, o.primary_dir, o.shadow_dir, false, extra, model);
}

namespace {

// The primary's exit as a saved run's twin.json has it (twin --replay DIR).
twin::ChildExit SavedPrimaryExit(const nlohmann::json& t) {
  twin::ChildExit e;
  e.started = true;
  e.exit_code = t.value("primary_exit", 0);
  e.elapsed_s = t.value("primary_elapsed_s", 0.0);
  e.start_realtime_ns = t.value("primary_start_realtime_ns", int64_t{0});
  e.end_realtime_ns = t.value("primary_end_realtime_ns", int64_t{0});
  return e;
}

}  // namespace

int ServeSequentialAndJoin(const TwinSetup& setup) {
  TwinSetup f = setup;
  f.concurrent = false;
  std::string primary_lib, shadow_lib;
  if (!Libraries(&primary_lib, &shadow_lib)) return 1;
  const bool replay_only = !f.replay_dir.empty();
  const std::string out = AbsolutePath(replay_only ? f.replay_dir : f.out);
  const twin::EngineAdapterSetup adapters = AdapterSetup(f);
  nlohmann::json extra = {{"serve", true}, {"sequential", true}};
  twin::ChildExit primary;
  std::string primary_dir = twin::SideDir(out, "primary"), shadow_dir = twin::SideDir(out, "shadow");
  int primary_port = 0;
  timespec started{};
  clock_gettime(CLOCK_REALTIME, &started);
  twin::SizingAlignment sizing;
  if (replay_only) {
    // A saved run: its primary stays; the shadow's outputs are replaced.
    std::ifstream saved(out + "/twin.json");
    nlohmann::json t = nlohmann::json::parse(saved, nullptr, false);
    if (!t.is_object()) {
      std::fprintf(stderr,
                   "twinscope twin: --replay %s: no twin.json there: give the folder of an earlier `twin --serve` "
                   "run (it holds twin.json, requests.jsonl and primary/)\n",
                   out.c_str());
      return 1;
    }
    primary = SavedPrimaryExit(t);
    primary_port = t.value("primary_port", 0);
    if (f.command.empty()) f.command = t.value("command", std::vector<std::string>{});
    // The new shadow gets the sizing flags the saved primary ran with (its extra arguments, in twin.json).
    std::vector<std::string> saved_primary_args = f.primary_args;
    if (t.contains("sizing") && t["sizing"].is_object() && t["sizing"].contains("primary_args"))
      saved_primary_args = t["sizing"].value("primary_args", saved_primary_args);
    sizing = AlignSizing(f, saved_primary_args, false, /*primary_ran=*/true);
    std::string error;
    if (!twin::RemoveStaleOutput(shadow_dir + "/", &error) || !twin::MakeDirs(shadow_dir, &error)) {
      std::fprintf(stderr, "twinscope twin: %s\n", error.c_str());
      return 1;
    }
    for (const char* name : {"adapter-shadow.json", "schedule-shadow.jsonl", "requests-shadow.jsonl"})
      unlink((out + "/" + name).c_str());
    std::fprintf(stderr, "twinscope twin --replay: a new shadow for the run in %s\n", out.c_str());
    extra["replayed_from"] = out;
    for (const char* k : {"mirror_url", "primary_port", "mirror", "autotune", "stop_request", "not_replayable"})
      if (t.contains(k)) extra[k] = t[k];
  } else {
    for (const char* name : {"adapter-primary.json", "adapter-shadow.json", "schedule-primary.jsonl",
                             "schedule-shadow.jsonl", "requests-primary.jsonl", "requests-shadow.jsonl"})
      unlink((out + "/" + name).c_str());
    // Both servers get the same sizing flags (they run one after the other: memory shares too).
    sizing = AlignSizing(f, f.primary_args, false, false);
    twin::ServeRequest r;
    r.command = f.command;
    r.primary_args = sizing.primary_args;
    r.out_dir = out;
    r.primary_library = primary_lib;
    r.shadow_library = shadow_lib;
    r.primary_env = Plus(PrimaryCuptiEnv(f.command), twin::EngineAdapterEnv(adapters, "primary", out, false));
    r.listen = f.listen;
    r.health_path = f.health_path;
    r.health_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.health_timeout * 1000));
    r.duration_s = f.duration;
    r.max_requests = f.max_requests;
    r.with_shadow = false;
    r.progress = isatty(STDERR_FILENO);
    std::fprintf(stderr,
                 "twinscope twin --serve: 1/2 the primary serves alone behind the mirror (its GPU to itself), "
                 "results in %s; then 2/2 a shadow replays its requests\n",
                 out.c_str());
    twin::ServeOutcome o = twin::RunServe(r);
    if (!o.error.empty()) {
      std::fprintf(stderr, "twinscope twin: %s\n", o.error.c_str());
      return 1;
    }
    primary = o.primary;
    if (primary.term_signal == SIGTERM)
      primary.exit_code = 0;  // stopped as asked
    else if (primary.exit_code || primary.term_signal)
      std::fprintf(stderr,
                   "twinscope twin: the primary died while serving: the shadow replays what it was sent, and the "
                   "join covers what it served\n");
    primary_port = o.primary_port;
    primary_dir = o.primary_dir;
    shadow_dir = o.shadow_dir;
    extra.update({{"mirror_url", o.mirror_url},
                  {"primary_port", o.primary_port},
                  {"request_log", o.request_log},
                  {"mirror", o.mirror_counters},
                  {"autotune", o.autotune},
                  {"not_replayable", o.not_replayable},
                  {"stop_request",
                   {{"asked", o.stop_request.asked},
                    {"answered", o.stop_request.answered},
                    {"no_answer", o.stop_request.waiting}}}});
    std::fprintf(stderr, "twinscope twin: mirror: %s requests, %s logged without a replayable body\n",
                 o.mirror_counters.value("requests", nlohmann::json(0)).dump().c_str(),
                 o.mirror_counters.value("log_not_replayable", nlohmann::json(0)).dump().c_str());
  }

  // 2/2: the shadow.
  const nlohmann::json pstatus = twin::ReadAdapterStatus(out, "primary");
  const bool forced = !f.shadow_follows && adapters.mode != "off" && twin::AdapterRecorded(pstatus);
  twin::ShadowReplayRequest q;
  q.command = f.command;
  q.shadow_args = sizing.shadow_args;
  q.out_dir = out;
  q.shadow_library = shadow_lib;
  q.shadow_env = Plus(BlocksEnv(f.kernels, f.sampling), twin::EngineAdapterEnv(adapters, "shadow", out, forced));
  q.request_log = out + "/requests.jsonl";
  q.primary_port = primary_port;
  q.shadow_device = f.shadow_device;
  q.health_path = f.health_path;
  q.health_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.health_timeout * 1000));
  q.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(f.request_timeout * 1000));
  q.all_at_once = forced;
  q.follow_schedule = f.shadow_follows;
  q.progress = isatty(STDERR_FILENO);
  if (f.shadow_follows)
    std::fprintf(stderr, "twinscope twin: 2/2 a shadow follows the primary's schedule (%s/schedule.jsonl)\n",
                 out.c_str());
  else
    std::fprintf(stderr, "twinscope twin: 2/2 a shadow server replays the logged requests (%s)\n",
                 q.request_log.c_str());
  twin::ShadowReplayOutcome so = twin::RunShadowReplay(q);
  if (!so.error.empty()) std::fprintf(stderr, "twinscope twin: %s\n", so.error.c_str());
  // A shadow stopped by our SIGTERM after its replay ended as asked.
  if (so.shadow.term_signal == SIGTERM && !so.shadow_died && so.error.empty()) {
    so.shadow.term_signal = 0;
    so.shadow.exit_code = 0;
  }
  const nlohmann::json sstatus = twin::ReadAdapterStatus(out, "shadow");
  extra["shadow_port"] = so.shadow_port;
  extra["replay"] = so.replay;
  extra["sizing"] = sizing.ToJson();
  if (!so.error.empty()) extra["shadow_error"] = so.error;
  extra["adapters"] = {{"mode", adapters.mode},
                       {"shim", adapters.shim_dir},
                       {"forced", forced},
                       {"primary", pstatus},
                       {"shadow", sstatus}};
  extra["request_trace"] = ServedFile(f.request_trace, "requests-primary.jsonl", out, primary_port, started);
  std::string schedule = ServedFile(f.schedule, "schedule.jsonl", out, primary_port, started);
  if (schedule.empty()) schedule = ServedFile("", "schedule-primary.jsonl", out, primary_port, started);
  extra["schedule"] = schedule;
  if (replay_only) {
    // The saved run's own inputs (written before this replay began).
    struct stat st {};
    if (extra["request_trace"] == "" && stat((out + "/requests-primary.jsonl").c_str(), &st) == 0)
      extra["request_trace"] = out + "/requests-primary.jsonl";
    for (const char* name : {"schedule.jsonl", "schedule-primary.jsonl"})
      if (extra["schedule"] == "" && stat((out + "/" + name).c_str(), &st) == 0) extra["schedule"] = out + "/" + name;
  }
  // What each side's adapter did, and whether the batches were forced.
  if (adapters.mode != "off" && !adapters.shim_dir.empty()) {
    for (const auto& [role, st] : {std::pair<std::string, const nlohmann::json&>{"primary", pstatus},
                                   std::pair<std::string, const nlohmann::json&>{"shadow", sstatus}}) {
      std::fprintf(stderr, "twinscope twin: %s\n", twin::DescribeAdapter(st, role).c_str());
      for (const auto& w : twin::AdapterWarnings(st))
        std::fprintf(stderr, "twinscope twin: the %s's adapter: %s\n", role.c_str(), w.c_str());
    }
  }
  if (!f.shadow_follows) {
    if (!forced) {
      std::fprintf(stderr,
                   "twinscope twin: the batches were not forced: %s; the shadow batched the replayed requests on its "
                   "own (sent at their arrival times), so its steps may differ from the primary's. To have them "
                   "forced, serve an engine twinscope has an adapter for (docs/engines.md) with --engine-adapter "
                   "auto\n",
                   adapters.mode == "off"      ? "--engine-adapter off"
                   : adapters.shim_dir.empty() ? "no engine adapter shim was found"
                   : !pstatus.is_object()      ? "the primary's server loaded no engine adapter"
                                               : "the primary's adapter recorded no schedule");
    } else if (sstatus.is_object() && sstatus.value("mode", std::string()) != "force") {
      std::fprintf(stderr, "twinscope twin: the shadow's adapter did not force the primary's batches (mode %s)\n",
                   sstatus.value("mode", std::string("?")).c_str());
    }
  }
  const int code = FinishTwin(f, out, primary, so.shadow, primary_dir, shadow_dir, false, extra, nullptr);
  if (!so.error.empty() && !so.aborted) return code ? code : 1;
  return code;
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
                    "GPU work. Default: the primary alone first, then the shadow (with --serve: the shadow server "
                    "starts after the primary stopped and the logged requests are replayed to it)");
      sub->add_option("--shadow-device", f->setup.shadow_device, "Run the shadow on this GPU (CUDA_VISIBLE_DEVICES)")
          ->check(CLI::NonNegativeNumber);
      sub->add_option("--top", f->setup.top, "Slowest matched launches to print")->capture_default_str();
      sub->add_option("command", f->setup.command,
                      "The program and its arguments, after '--' (--replay: the saved run's command if left out)");
      sub->footer("Example: twinscope twin --kernel reshape_and_cache_flash -o run -- python infer.py");
      sub->add_flag("--serve", f->serve,
                    "The command is a server (its port from {port} or TWINSCOPE_PORT). The primary serves alone "
                    "behind the mirror until Ctrl-C, --duration or --requests; then a shadow server starts, the "
                    "logged requests are replayed to it (the primary's batches forced by an engine adapter where "
                    "there is one), and the two are joined. --concurrent: both serve at once (a live twin)");
      sub->add_flag("--follow", f->follow,
                    "--serve, for twinscope-demo-server: the shadow follows the primary's step schedule, the file "
                    "DIR/schedule.jsonl after the primary (the primary gets '--schedule-out DIR/schedule.jsonl', the "
                    "shadow '--follow DIR/schedule.jsonl --exit-after-schedule'), or with --concurrent the live "
                    "primary ('--follow "
                    "http://127.0.0.1:{primary_port} --exit-after-schedule'; on stopping it finishes the schedule)");
      sub->add_option("--requests", f->setup.max_requests, "--serve: stop after this many requests were served")
          ->check(CLI::PositiveNumber);
      sub->add_option("--replay", f->setup.replay_dir,
                      "Replay a saved `twin --serve` run again: a new shadow server gets DIR/requests.jsonl, then "
                      "the join (DIR's primary is kept)");
      sub->add_option("--engine-adapter", f->setup.engine_adapter,
                      "--serve: the engine adapter loaded into both servers (docs/engines.md): auto, off, or an "
                      "adapter's name")
          ->capture_default_str();
      sub->add_option("--follow-step-timeout", f->setup.follow_step_timeout,
                      "--serve: seconds the shadow's adapter waits for a step's requests to arrive")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
      sub->add_option("--request-timeout", f->setup.request_timeout,
                      "--serve: seconds one replayed request may take, connect to last byte")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
      sub->add_option("--listen", f->setup.listen, "--serve: where the mirror listens (HOST:PORT; port 0 picks one)")
          ->capture_default_str();
      sub->add_option("--duration", f->setup.duration, "--serve: stop after this many seconds of serving")
          ->check(CLI::PositiveNumber);
      sub->add_option("--health-timeout", f->setup.health_timeout, "--serve: seconds to wait for both servers' /health")
          ->capture_default_str();
      sub->add_option("--health-path", f->setup.health_path, "--serve: the servers' health endpoint")
          ->capture_default_str();
      sub->add_option("--primary-args", f->setup.primary_args,
                      "--serve: extra arguments for the primary's command (an engine's sizing flag given here only "
                      "is passed to the shadow too: docs/sequential-serving.md)")
          ->allow_extra_args(false);
      sub->add_option("--request-trace", f->setup.request_trace,
                      "--serve: the primary's request trace (one JSON line per request with its steps, as "
                      "twinscope-demo-server --trace-requests writes it; {dir} is the output folder) for per-request "
                      "views. Default: DIR/requests-primary.jsonl if the run wrote it");
      sub->add_option("--schedule", f->setup.schedule,
                      "--serve: the primary's step schedule (twinscope-demo-server --schedule-out) for each step's "
                      "batch. Default: DIR/schedule.jsonl if the run wrote it");
      sub->add_option("--shadow-args", f->setup.shadow_args,
                      "--serve: extra arguments for the shadow's command (an engine's sizing flag given here only "
                      "is passed to the primary too; with --concurrent on one GPU a memory share stays the shadow's)")
          ->allow_extra_args(false);
      AddPairingFlags(sub, &f->setup.pairing);
      return [f]() {
        TwinSetup s = f->setup;
        if (!s.replay_dir.empty()) {
          if (s.concurrent || f->follow) {
            std::fprintf(stderr,
                         "twinscope twin: --replay replays the logged requests to a new shadow: it does not "
                         "go with --concurrent or --follow\n");
            return 2;
          }
          return ServeSequentialAndJoin(s);
        }
        if (s.command.empty()) {
          std::fprintf(stderr,
                       "twinscope twin: give the program to run after '--' (e.g. twinscope twin --kernel K "
                       "-- python infer.py)\n");
          return 2;
        }
        if (!f->serve) return RunTwinAndJoin(s);
        if (!s.concurrent) {
          if (s.shadow_device >= 0)
            std::fprintf(stderr,
                         "twinscope twin: the shadow replays on GPU %d after the primary (forced batches); "
                         "--concurrent for a live twin there instead\n",
                         s.shadow_device);
          if (f->follow) {
            // As `twinscope demo` runs it: the primary writes its schedule file, the shadow runs it after.
            if (std::find(s.primary_args.begin(), s.primary_args.end(), "--schedule-out") == s.primary_args.end())
              for (const char* a : {"--schedule-out", "{dir}/schedule.jsonl"}) s.primary_args.push_back(a);
            for (const char* a : {"--follow", "{dir}/schedule.jsonl", "--exit-after-schedule"})
              s.shadow_args.push_back(a);
            s.shadow_follows = true;
          }
          return ServeSequentialAndJoin(s);
        }
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
