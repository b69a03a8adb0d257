// twinscope demo: the whole scene on one GPU with one command. The demo
// decode server (demo/) runs as the primary behind the mirror while a
// built-in client sends concurrent streaming chat requests; then a shadow of
// the server replays the primary's step schedule under the block probe
// (default), or runs beside it in lockstep (--live); the two are joined
// launch by launch and summed up.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "base/env_names.h"
#include "cli/cli_text.h"
#include "cli/command.h"
#include "cli/record_common.h"
#include "cli/run_child.h"
#include "cli/twin_command.h"
#include "client/chat_client.h"
#include "twin/serve.h"

namespace twinscope::cli {
namespace {

struct DemoFlags {
  bool live = false;
  std::string out = "twinscope-demo";
  int requests = 8;
  int max_tokens = 48;
  std::string model = "1b";
  std::string kernel = "reshape_and_cache_flash";
  std::string engine = "gpu";
  double shadow_memory = 0.4;
};

bool HaveGpu() {
  struct stat st {};
  return stat("/dev/nvidia0", &st) == 0 || stat("/dev/nvidiactl", &st) == 0;
}

std::vector<std::string> ServerArgs(const std::string& server, const DemoFlags& f) {
  return {server, "--port", "{port}", "--engine", f.engine, "--model", f.model};
}

void PrintClient(const demo::ChatLoadReport& c) {
  std::vector<double> ttft;
  for (const auto& r : c.results)
    if (r.ok() && r.ttft_ms >= 0) ttft.push_back(r.ttft_ms);
  std::printf("client: %d requests ok, %d failed, %" PRId64 " tokens in %.2f s (%.1f tokens/s), TTFT p50 %.1f ms\n",
              c.ok, c.failed, c.tokens, c.wall_ms / 1e3, c.tokens_per_s(), demo::Percentile(ttft, 50));
  for (const auto& r : c.results) {
    if (!r.ok()) std::printf("  request %s failed: %s\n", r.request_id.c_str(), r.error.c_str());
  }
  if (!c.results.empty() && c.results[0].ok()) {
    std::string text = c.results[0].content.substr(0, 100);
    std::printf("  reply to %s: \"%s%s\"\n", c.results[0].request_id.c_str(), text.c_str(),
                c.results[0].content.size() > 100 ? "..." : "");
  }
}

// The demo's summary: the figures seed 000 reported, from the joined model.
void PrintSummary(const join::JoinedModel& m, const demo::ChatLoadReport& client, const std::string& out) {
  uint64_t decode_steps = 0, cache_intervals = 0;
  for (const auto& s : m.steps) {
    if (s.range.rfind("decode", 0) != 0) continue;
    ++decode_steps;
    cache_intervals += s.targets;
  }
  const auto& pl = m.primary_side.stats.loss;
  const auto& sl = m.shadow_side.stats.loss;
  const uint64_t misses = pl.key_fallbacks + pl.no_launch_key;
  const uint64_t drops = pl.cupti_dropped + pl.writer_dropped + sl.writer_dropped;
  const auto& s = m.summary;
  uint64_t drifting = 0;
  for (const auto& d : m.drift) drifting += (d.time_only + d.unmatched + d.shape_differs) ? 1 : 0;
  std::printf("\n== twinscope demo ==\n");
  PrintClient(client);
  std::printf("decode steps: %" PRIu64 ", cache-kernel intervals: %" PRIu64 " (%.1f per step)\n", decode_steps,
              cache_intervals, decode_steps ? static_cast<double>(cache_intervals) / decode_steps : 0.0);
  std::printf("correlation misses: %" PRIu64 ", drops: %" PRIu64 ", kernel records missing: %" PRId64 "\n", misses,
              drops, std::max<int64_t>(0, pl.missing));
  std::printf("shadow launches of %s: %" PRIu64 ", matched exactly %" PRIu64 " (%.1f%%), by time only %" PRIu64
              ", unmatched %" PRIu64 "; drifting ranges %" PRIu64 " of %zu\n",
              s.target_kernels.empty() ? "the target" : "the target", s.shadow_launches, s.exact,
              s.shadow_launches ? 100.0 * s.exact / s.shadow_launches : 0.0, s.time_only, s.unmatched_shadow, drifting,
              m.drift.size());
  std::printf("joined model: %s/join.json; report: %s/report.html; again: twinscope stats %s\n", out.c_str(),
              out.c_str(), out.c_str());
}

// The default scene: the primary serves the client's requests alone (behind
// the mirror), then a shadow replays its step schedule under the block probe.
int ServeThenReplay(const TwinSetup& s, const std::string& server, const DemoFlags& f,
                    const std::function<void(const std::string&)>& client, join::JoinedModel* model) {
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
  shadow.env = twin::SideEnv(*shadow_lib, o.shadow_trace, "shadow", BlocksEnv(s.kernels, s.sampling));
  twin::ChildExit shadow_exit;
  {
    twin::ChildGroup group;
    const size_t i = group.Start(shadow);
    group.WaitAll();
    shadow_exit = group.exit(i);
  }
  twin::ChildExit primary = o.primary;
  if (primary.term_signal == SIGTERM) primary.exit_code = 0;  // stopped as asked
  nlohmann::json extra = {{"serve", true}, {"replay", true}, {"mirror", o.mirror_counters}, {"schedule", schedule}};
  TwinSetup sequential = s;
  sequential.concurrent = false;
  return FinishTwin(sequential, s.out, primary, shadow_exit, o.primary_trace, o.shadow_trace, false, extra, model);
}

CommandRegistration kDemo(
    "demo",
    "The whole scene on this GPU: a demo LLM decode server traced as primary and shadow, 8 chat requests, joined",
    [](CLI::App* sub) -> CommandRun {
      auto f = std::make_shared<DemoFlags>();
      sub->add_flag("--live", f->live,
                    "Run the shadow beside the primary in lockstep behind the mirror (default: it replays the "
                    "primary's schedule afterwards, so it cannot time-slice the primary's GPU)");
      sub->add_option("-o,--output", f->out, "Folder for the traces, the schedule, the joined model and the report")
          ->capture_default_str();
      sub->add_option("--requests", f->requests, "Concurrent streaming chat requests")->capture_default_str();
      sub->add_option("--max-tokens", f->max_tokens, "Tokens per reply (decode steps)")->capture_default_str();
      sub->add_option("--model", f->model, "Model shape of the demo server")->capture_default_str();
      sub->add_option("--kernel", f->kernel, "Kernel whose blocks the shadow traces")->capture_default_str();
      sub->add_option("--engine", f->engine, "gpu, or cpu (no GPU work at all: for trying the plumbing)")
          ->capture_default_str();
      return [f]() {
        if (f->engine == "gpu" && !HaveGpu()) {
          std::fprintf(stderr,
                       "twinscope demo: no NVIDIA GPU found (no /dev/nvidia0): the demo runs a decode server on the "
                       "GPU. On a machine without one, run the tests (scripts/test.sh)\n");
          return 1;
        }
        const std::string server = ExecutableDir() + "/twinscope-demo-server";
        if (access(server.c_str(), X_OK) != 0) {
          std::fprintf(stderr, "twinscope demo: %s not found: build the target twinscope-demo-server\n",
                       server.c_str());
          return 1;
        }
        TwinSetup s;
        s.kernels = {f->kernel};
        s.out = AbsolutePath(f->out);
        s.concurrent = f->live;
        s.listen = "127.0.0.1:0";
        s.command = ServerArgs(server, *f);
        s.primary_args = {"--schedule-out", "{dir}/schedule.jsonl", "--trace-requests", "{dir}/requests-primary.jsonl"};
        // The shadow runs its decode steps as CUDA graphs, as the primary does: the block probe traces
        // graph kernel nodes (docs/block-probe.md, "Graphs").
        s.shadow_args = {"--gpu-memory-fraction", std::to_string(f->shadow_memory), "--trace-requests",
                         "{dir}/requests-shadow.jsonl"};
        demo::ChatLoadReport client;
        auto run_client = [&](const std::string& url) {
          demo::ChatLoadOptions o;
          o.url = url;
          o.requests = f->requests;
          o.max_tokens = f->max_tokens;
          o.seed = 1234;
          std::fprintf(stderr, "twinscope demo: sending %d concurrent streaming chat requests to %s\n", f->requests,
                       url.c_str());
          client = demo::RunChatLoad(o);
        };
        join::JoinedModel model;
        int code = 0;
        if (f->live) {
          s.shadow_args.push_back("--follow");
          s.shadow_args.push_back("http://127.0.0.1:{primary_port}");
          code = ServeTwinAndJoin(s, run_client, &model);
        } else {
          code = ServeThenReplay(s, server, *f, run_client, &model);
        }
        if (code != 0 && model.shadow.empty()) return code;
        PrintSummary(model, client, s.out);
        return client.failed ? 1 : code;
      };
    });

}  // namespace
}  // namespace twinscope::cli
