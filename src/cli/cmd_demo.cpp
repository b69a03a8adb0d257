// twinscope demo: the whole scene on one GPU with one command. The demo
// decode server (demo/) runs as the primary behind the mirror while a
// built-in client sends concurrent streaming chat requests (and, with
// --mirror-latency, pairs of requests straight to the primary and through the
// mirror); then a shadow of the server replays the primary's step schedule
// under the block probe (default), or runs beside it in lockstep (--live;
// --no-lockstep: batching on its own); the two are joined launch by launch,
// per request too, and summed up. The client is the demo's own binary
// (twinscope-demo-client beside this one): the tracer links no demo code.
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "base/env_names.h"
#include "cli/cli_text.h"
#include "cli/command.h"
#include "cli/record_common.h"
#include "cli/run_child.h"
#include "cli/twin_command.h"
#include "twin/serve.h"

namespace twinscope::cli {
namespace {

// The demo server to run instead of the one beside this twinscope (a build elsewhere; the tests' fake-GPU one).
constexpr const auto& kDemoServerEnv = env::kDemoServer;
constexpr char kChatPrefix[] = "demo-";
constexpr char kClientName[] = "twinscope-demo-client";

extern "C" char** environ;

struct DemoFlags {
  bool live = false;
  bool no_lockstep = false;
  std::string out = "twinscope-demo";
  int requests = 8;
  int max_tokens = 48;
  int mirror_latency = 0;
  std::string model = "1b";
  std::string kernel = "reshape_and_cache_flash";
  std::string engine = "gpu";
  double shadow_memory = 0.4;
};

bool HaveGpu() {
  struct stat st {};
  return stat("/dev/nvidia0", &st) == 0 || stat("/dev/nvidiactl", &st) == 0;
}

std::string Mode(const DemoFlags& f) { return !f.live ? "replay" : f.no_lockstep ? "live-no-lockstep" : "live"; }

std::vector<std::string> ServerArgs(const std::string& server, const DemoFlags& f) {
  return {server, "--port", "{port}", "--engine", f.engine, "--model", f.model};
}

// What the client saw, beside the join: its reports as it wrote them
// (client.json: ChatLoadReport::ToJson; mirror-latency.json:
// MirrorLatencyReport::ToJson, demo/client/).
struct ClientRun {
  bool ran = false;
  nlohmann::json load = nlohmann::json::object();
  bool latency_ran = false;
  nlohmann::json latency = nlohmann::json::object();
  int exit_code = 0;
  std::string error;  // the client could not run or wrote no report
  int ok() const { return load.value("ok", 0); }
  int failed() const { return load.value("failed", 0); }
  int latency_failed() const {
    if (!latency_ran) return 0;
    auto failed = [](const nlohmann::json& s) { return s.value("requests", 0) - s.value("ok", 0); };
    return failed(latency.value("direct", nlohmann::json::object())) +
           failed(latency.value("mirror", nlohmann::json::object()));
  }
};

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream f(path);
  if (!f) return nullptr;
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str(), nullptr, false);
}

// Runs `argv` with its stdout on our stderr (the demo's own lines stay on
// stdout) and waits; returns its exit code, 127 if it could not start.
int RunAndWait(const std::vector<std::string>& argv, std::string* error) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    *error = "cannot run " + argv[0] + ": " + std::strerror(rc);
    return 127;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// The figures seed 000 reported, from the joined model: over the chat requests' steps where the join
// has the request trace (the mirror-latency requests' steps are counted apart), else over every step.
struct Figures {
  uint64_t decode_steps = 0, cache_intervals = 0, other_decode_steps = 0;
  uint64_t per_request_min = 0, per_request_max = 0;  // decode steps of each chat request
  uint64_t chat_requests_traced = 0;
  uint64_t misses = 0, drops = 0;
  int64_t missing = 0;
  uint64_t drifting = 0;
  uint64_t primary_in_steps = 0, primary_in_steps_exact = 0;  // target launches in served steps, matched exactly
  double exact_rate = 0;
};

Figures ComputeFigures(const join::JoinedModel& m) {
  Figures g;
  std::set<uint64_t> chat;
  const auto& t = m.requests;
  bool first = true;
  for (const auto& r : t.requests) {
    if (r.id.rfind(kChatPrefix, 0) != 0) continue;
    ++g.chat_requests_traced;
    chat.insert(r.steps.begin(), r.steps.end());
    g.per_request_min = first ? r.decode_steps : std::min(g.per_request_min, r.decode_steps);
    g.per_request_max = std::max(g.per_request_max, r.decode_steps);
    first = false;
  }
  if (!chat.empty()) {
    for (const auto& s : t.steps) {
      if (s.kind != "decode") continue;
      if (!chat.count(s.index)) {
        ++g.other_decode_steps;
        continue;
      }
      ++g.decode_steps;
      g.cache_intervals += s.targets;
    }
  } else {
    for (const auto& s : m.steps) {
      if (s.range.rfind("decode", 0) != 0) continue;
      ++g.decode_steps;
      g.cache_intervals += s.targets;
    }
  }
  for (const auto& s : t.steps) {
    g.primary_in_steps += s.target_launches.size();
    g.primary_in_steps_exact += s.shadow_exact;
  }
  const auto& pl = m.primary_side.stats.loss;
  const auto& sl = m.shadow_side.stats.loss;
  g.misses = pl.key_fallbacks + pl.no_launch_key;
  g.drops = pl.cupti_dropped + pl.writer_dropped + sl.writer_dropped;
  g.missing = std::max<int64_t>(0, pl.missing);
  for (const auto& d : m.drift) g.drifting += (d.time_only + d.unmatched + d.shape_differs) ? 1 : 0;
  g.exact_rate = m.summary.shadow_launches ? 100.0 * m.summary.exact / m.summary.shadow_launches : 0.0;
  return g;
}

void PrintClient(const ClientRun& run, const DemoFlags& f) {
  const nlohmann::json& c = run.load;
  if (!run.error.empty()) std::printf("client: %s\n", run.error.c_str());
  std::printf("client: %d requests ok, %d failed, %" PRId64
              " tokens in %.2f s (%.1f tokens/s, the primary %s), TTFT p50 %.1f ms\n",
              run.ok(), run.failed(), c.value("tokens", int64_t{0}), c.value("wall_ms", 0.0) / 1e3,
              c.value("tokens_per_s", 0.0), f.live ? "beside the shadow" : "alone behind the mirror",
              c.value("ttft_ms_p50", 0.0));
  const nlohmann::json results = c.value("results", nlohmann::json::array());
  for (const auto& r : results) {
    if (r.contains("error"))
      std::printf("  request %s failed: %s\n", r.value("request_id", "").c_str(), r.value("error", "").c_str());
  }
  if (!results.empty() && !results[0].contains("error")) {
    const std::string content = results[0].value("content", "");
    std::string text = content.substr(0, 100);
    std::printf("  reply to %s: \"%s%s\"\n", results[0].value("request_id", "").c_str(), text.c_str(),
                content.size() > 100 ? "..." : "");
  }
}

void PrintSummary(const join::JoinedModel& m, const Figures& g, const ClientRun& client, const DemoFlags& f,
                  const std::string& out) {
  const auto& s = m.summary;
  std::printf("\n== twinscope demo (%s) ==\n", Mode(f).c_str());
  PrintClient(client, f);
  std::printf("decode steps: %" PRIu64, g.decode_steps);
  if (g.chat_requests_traced)
    std::printf(" of the %" PRIu64 " chat requests (%" PRIu64 "-%" PRIu64 " each)", g.chat_requests_traced,
                g.per_request_min, g.per_request_max);
  if (g.other_decode_steps) std::printf(", %" PRIu64 " more of the mirror-latency requests", g.other_decode_steps);
  std::printf("; cache-kernel intervals: %" PRIu64 " (%.1f per step)\n", g.cache_intervals,
              g.decode_steps ? static_cast<double>(g.cache_intervals) / g.decode_steps : 0.0);
  std::printf("correlation misses: %" PRIu64 ", drops: %" PRIu64 ", kernel records missing: %" PRId64 "\n", g.misses,
              g.drops, g.missing);
  std::printf("shadow launches of the target: %" PRIu64 ", matched exactly %" PRIu64 " (%.1f%%), by time only %" PRIu64
              ", unmatched %" PRIu64 "; drifting ranges %" PRIu64 " of %zu\n",
              s.shadow_launches, s.exact, g.exact_rate, s.time_only, s.unmatched_shadow, g.drifting, m.drift.size());
  if (g.primary_in_steps)
    std::printf("the primary's target launches in served steps: %" PRIu64 ", matched exactly %" PRIu64 " (%.1f%%)\n",
                g.primary_in_steps, g.primary_in_steps_exact,
                100.0 * static_cast<double>(g.primary_in_steps_exact) / static_cast<double>(g.primary_in_steps));
  if (m.requests.present)
    std::printf("per request: %zu requests in %s (twinscope stats %s lists them; the report's Requests section)\n",
                m.requests.requests.size(), m.requests.trace_path.c_str(), out.c_str());
  if (client.latency_ran) std::printf("%s\n", client.latency.value("describe", "").c_str());
  std::printf("joined model: %s/join.json; report: %s/report.html; again: twinscope stats %s\n", out.c_str(),
              out.c_str(), out.c_str());
}

nlohmann::json SummaryJson(const join::JoinedModel& m, const Figures& g, const ClientRun& c, const DemoFlags& f,
                           const std::string& out) {
  const auto& s = m.summary;
  nlohmann::json j = {
      {"mode", Mode(f)},
      {"model", f.model},
      {"engine", f.engine},
      {"requests", {{"sent", c.load.value("requests", 0)}, {"ok", c.ok()}, {"failed", c.failed()}}},
      {"tokens", c.load.value("tokens", int64_t{0})},
      {"tokens_per_s", c.load.value("tokens_per_s", 0.0)},
      {"ttft_ms_p50", c.load.value("ttft_ms_p50", 0.0)},
      {"chat_requests_traced", g.chat_requests_traced},
      {"decode_steps", g.decode_steps},
      {"decode_steps_per_request", {g.per_request_min, g.per_request_max}},
      {"other_decode_steps", g.other_decode_steps},
      {"cache_intervals", g.cache_intervals},
      {"cache_intervals_per_step", g.decode_steps ? static_cast<double>(g.cache_intervals) / g.decode_steps : 0.0},
      {"correlation_misses", g.misses},
      {"drops", g.drops},
      {"kernel_records_missing", g.missing},
      {"shadow_launches", s.shadow_launches},
      {"exact", s.exact},
      {"exact_rate_pct", g.exact_rate},
      {"time_only", s.time_only},
      {"unmatched_shadow", s.unmatched_shadow},
      {"primary_target_in_steps", g.primary_in_steps},
      {"primary_target_in_steps_exact", g.primary_in_steps_exact},
      {"drifting_ranges", g.drifting},
      {"ranges", m.drift.size()},
      {"report", out + "/report.html"},
      {"mirror_latency", c.latency_ran ? c.latency : nlohmann::json(nullptr)}};
  if (c.latency_ran) {
    for (const char* k : {"direct_results", "mirror_results", "describe"}) j["mirror_latency"].erase(k);
  }
  return j;
}

// The default scene: the primary serves the client's requests alone (behind
// the mirror), then a shadow replays its step schedule under the block probe.
int ServeThenReplay(const TwinSetup& s, const std::function<void(const twin::ServeEndpoints&)>& client,
                    join::JoinedModel* model) {
  auto primary_lib = FindCollectorLibrary("libtwinscope_cupti.so");
  auto shadow_lib = FindCollectorLibrary("libtwinscope_blocks.so");
  for (auto* l : {&primary_lib, &shadow_lib}) {
    if (!l->ok()) {
      std::fprintf(stderr, "twinscope demo: %s\n", l->status().message().c_str());
      return 1;
    }
  }
  twin::ServeRequest r;
  r.command = s.command;
  r.primary_args = s.primary_args;
  r.out_dir = s.out;
  r.primary_library = *primary_lib;
  r.shadow_library = *shadow_lib;
  r.primary_env = PrimaryCuptiEnv(s.command);
  r.listen = s.listen;
  r.with_shadow = false;
  r.progress = isatty(STDERR_FILENO);
  r.client = client;
  std::fprintf(stderr, "twinscope demo: 1/2 the primary serves (CUPTI collector), results in %s\n", s.out.c_str());
  twin::ServeOutcome o = twin::RunServe(r);
  if (!o.error.empty()) {
    std::fprintf(stderr, "twinscope demo: %s\n", o.error.c_str());
    return 1;
  }
  const std::string schedule = s.out + "/schedule.jsonl";
  std::fprintf(stderr, "twinscope demo: 2/2 a shadow replays the primary's schedule (%s) under the block probe\n",
               schedule.c_str());
  twin::ChildSpec shadow;
  for (const auto& a : s.command) shadow.argv.push_back(twin::ExpandPlaceholders(a, 0, o.primary_port, s.out));
  for (const auto& a : s.shadow_args) shadow.argv.push_back(twin::ExpandPlaceholders(a, 0, o.primary_port, s.out));
  for (const char* a : {"--follow", schedule.c_str(), "--exit-after-schedule"}) shadow.argv.push_back(a);
  shadow.env = twin::SideEnv(*shadow_lib, o.shadow_dir, "shadow", BlocksEnv(s.kernels, s.sampling));
  shadow.new_process_group = true;  // signals reach its whole tree
  twin::ChildExit shadow_exit;
  {
    twin::ChildGroup group;
    const size_t i = group.Start(shadow);
    group.WaitAll();
    shadow_exit = group.exit(i);
  }
  twin::ChildExit primary = o.primary;
  if (primary.term_signal == SIGTERM) primary.exit_code = 0;  // stopped as asked
  nlohmann::json extra = {{"serve", true},
                          {"replay", true},
                          {"mirror", o.mirror_counters},
                          {"schedule", schedule},
                          {"request_trace", twin::ExpandPlaceholders(s.request_trace, 0, o.primary_port, s.out)}};
  TwinSetup sequential = s;
  sequential.concurrent = false;
  return FinishTwin(sequential, s.out, primary, shadow_exit, o.primary_dir, o.shadow_dir, false, extra, model);
}

bool WriteJson(const std::string& path, const nlohmann::json& j) {
  std::ofstream f(path, std::ios::trunc);
  f << j.dump(2) << "\n";
  f.close();
  if (!f) std::fprintf(stderr, "twinscope demo: cannot write %s\n", path.c_str());
  return static_cast<bool>(f);
}

CommandRegistration kDemo(
    "demo",
    "The whole scene on this GPU: a demo LLM decode server traced as primary and shadow, 8 chat requests, joined",
    [](CLI::App* sub) -> CommandRun {
      auto f = std::make_shared<DemoFlags>();
      sub->add_flag("--live", f->live,
                    "Run the shadow beside the primary in lockstep behind the mirror (default: it replays the "
                    "primary's schedule afterwards, so it cannot time-slice the primary's GPU)");
      sub->add_flag("--no-lockstep", f->no_lockstep,
                    "With --live: the shadow batches the mirrored requests on its own instead of following the "
                    "primary's schedule, so the join measures the drift");
      sub->add_option("-o,--output", f->out, "Folder for the traces, the schedule, the joined model and the report")
          ->capture_default_str();
      sub->add_option("--requests", f->requests, "Concurrent streaming chat requests")
          ->capture_default_str()
          ->check(CLI::Range(1, 4096));
      sub->add_option("--max-tokens", f->max_tokens, "Tokens per reply (decode steps)")
          ->capture_default_str()
          ->check(CLI::Range(1, 4000));
      sub->add_option("--mirror-latency", f->mirror_latency,
                      "After the chat requests, N more of them one at a time straight to the primary and N through "
                      "the mirror, interleaved: the mirror's added p50/p99 latency (DIR/mirror-latency.json)")
          ->capture_default_str()
          ->check(CLI::Range(0, 10000));
      sub->add_option("--model", f->model, "Model shape of the demo server")->capture_default_str();
      sub->add_option("--kernel", f->kernel, "Kernel whose blocks the shadow traces")->capture_default_str();
      sub->add_option("--engine", f->engine, "gpu, or cpu (no GPU work at all: for trying the plumbing)")
          ->capture_default_str();
      return [f]() {
        if (f->no_lockstep && !f->live) {
          std::fprintf(stderr, "twinscope demo: --no-lockstep goes with --live (the replay is lockstep by nature)\n");
          return 2;
        }
        if (f->engine == "gpu" && !HaveGpu()) {
          std::fprintf(stderr,
                       "twinscope demo: no NVIDIA GPU found (no /dev/nvidia0): the demo runs a decode server on the "
                       "GPU. On a machine without one, run the tests (scripts/test.sh)\n");
          return 1;
        }
        const char* env_server = std::getenv(kDemoServerEnv);
        const std::string server =
            env_server && *env_server ? std::string(env_server) : ExecutableDir() + "/twinscope-demo-server";
        if (access(server.c_str(), X_OK) != 0) {
          const std::string hint = env_server && *env_server ? std::string(" (or fix ") + kDemoServerEnv + ")" : "";
          std::fprintf(stderr, "twinscope demo: %s not found: build the target twinscope-demo-server%s\n",
                       server.c_str(), hint.c_str());
          return 1;
        }
        // The chat client is the demo's own program, beside this one (built with it: src/cli/CMakeLists.txt).
        const std::string client = ExecutableDir() + "/" + kClientName;
        if (access(client.c_str(), X_OK) != 0) {
          std::fprintf(stderr, "twinscope demo: %s not found: build the target %s\n", client.c_str(), kClientName);
          return 1;
        }
        TwinSetup s;
        s.kernels = {f->kernel};
        s.out = AbsolutePath(f->out);
        s.concurrent = f->live;
        s.listen = "127.0.0.1:0";
        s.command = ServerArgs(server, *f);
        s.primary_args = {"--schedule-out", "{dir}/schedule.jsonl", "--trace-requests", "{dir}/requests-primary.jsonl"};
        s.request_trace = "{dir}/requests-primary.jsonl";
        s.schedule = "{dir}/schedule.jsonl";
        // The shadow runs its decode steps as CUDA graphs, as the primary does: the block probe traces
        // graph kernel nodes (docs/block-probe.md, "Graphs").
        s.shadow_args = {"--gpu-memory-fraction", std::to_string(f->shadow_memory), "--trace-requests",
                         "{dir}/requests-shadow.jsonl"};
        // This run's own outputs replace an earlier run's (the traces are replaced by the serve itself).
        for (const char* name : {"summary.json", "mirror-latency.json", "client.json"})
          unlink((s.out + "/" + name).c_str());
        ClientRun run;
        auto run_client = [&](const twin::ServeEndpoints& ep) {
          const std::string client_json = s.out + "/client.json", latency_json = s.out + "/mirror-latency.json";
          std::vector<std::string> argv = {client,
                                           "--url",
                                           ep.mirror_url,
                                           "--requests",
                                           std::to_string(f->requests),
                                           "--max-tokens",
                                           std::to_string(f->max_tokens),
                                           "--seed",
                                           "1234",
                                           "--id-prefix",
                                           kChatPrefix,
                                           "--json",
                                           client_json,
                                           "--quiet"};
          std::fprintf(stderr, "twinscope demo: sending %d concurrent streaming chat requests to %s (%s)\n",
                       f->requests, ep.mirror_url.c_str(), kClientName);
          if (f->mirror_latency > 0) {
            // live: the shadow gets each direct request too, as mirrored ones
            for (const std::string& a :
                 {std::string("--mirror-latency"), std::to_string(f->mirror_latency), std::string("--direct-url"),
                  ep.primary_url, std::string("--latency-json"), latency_json})
              argv.push_back(a);
            if (!ep.shadow_url.empty()) argv.insert(argv.end(), {"--shadow-url", ep.shadow_url});
            std::fprintf(stderr,
                         "twinscope demo: then mirror latency: %d requests straight to the primary (%s) and %d "
                         "through the mirror, one at a time, interleaved\n",
                         f->mirror_latency, ep.primary_url.c_str(), f->mirror_latency);
          }
          run.exit_code = RunAndWait(argv, &run.error);
          run.ran = true;
          const nlohmann::json load = ReadJson(client_json);
          if (load.is_object()) {
            run.load = load;
          } else if (run.error.empty()) {
            run.error = client + " exited with " + std::to_string(run.exit_code) + " and wrote no " + client_json;
          }
          std::fprintf(stderr, "twinscope demo: %d of %d requests ok, %.1f tokens/s\n", run.ok(), f->requests,
                       run.load.value("tokens_per_s", 0.0));
          if (f->mirror_latency <= 0) return;
          const nlohmann::json latency = ReadJson(latency_json);
          run.latency_ran = latency.is_object();
          if (run.latency_ran) run.latency = latency;
        };
        join::JoinedModel model;
        int code = 0;
        if (f->live) {
          if (!f->no_lockstep) {
            for (const char* a : {"--follow", "http://127.0.0.1:{primary_port}", "--exit-after-schedule"})
              s.shadow_args.push_back(a);
            s.shadow_follows = true;
          }
          code = ServeTwinAndJoin(s, run_client, &model);
        } else {
          code = ServeThenReplay(s, run_client, &model);
        }
        if (run.ran && !run.error.empty()) std::fprintf(stderr, "twinscope demo: client: %s\n", run.error.c_str());
        if (code != 0 && model.shadow.empty()) return code;
        const Figures g = ComputeFigures(model);
        PrintSummary(model, g, run, *f, s.out);
        WriteJson(s.out + "/summary.json", SummaryJson(model, g, run, *f, s.out));
        if (run.latency_ran && run.latency_failed()) return 1;
        if (f->mirror_latency > 0 && !run.latency_ran) return 1;  // asked for and not measured
        return run.failed() || !run.error.empty() ? 1 : code;
      };
    });

}  // namespace
}  // namespace twinscope::cli
