// twinscope-demo-server's command line and run (server_main.h): options,
// the engine, the serving loop, the HTTP server, signals. Behaviour in
// docs/demo-server.md.
#include "server/server_main.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "net/beast.h"
#include "net/url.h"
#include "server/cpu_engine.h"
#include "server/http_server.h"
#include "server/schedule_fetcher.h"
#include "server/serving.h"

namespace twinscope::demo {
namespace {

constexpr const char* kName = "twinscope-demo-server";

struct Args {
  std::string host = "127.0.0.1";
  int port = -1;
  std::string engine = "gpu";
  std::string model = "1b";
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0, vocab = 0;
  std::string served_name;
  int max_batch = 64, max_model_len = 4096, max_prefill_tokens = 8192, block_size = 16;
  double memory_fraction = 0.3;
  int device = 0;
  bool enforce_eager = false;
  uint64_t seed = 0;
  int default_max_tokens = 128;
  std::string schedule_out, follow, trace_requests;
  int follow_wait_ms = 5000;
  double follow_timeout_s = 300;
  bool exit_after_schedule = false;
  int cpu_step_us = 2000;
  int64_t cpu_kv_blocks = 16384;
  double drain_timeout_s = 30;
};

int PortFromEnv() {
  const char* v = std::getenv("TWINSCOPE_DEMO_PORT");
  if (!v || !*v) return 8000;
  char* end = nullptr;
  long p = std::strtol(v, &end, 10);
  if (end == v || *end || p < 0 || p > 65535) {
    std::fprintf(stderr, "%s: TWINSCOPE_DEMO_PORT=%s is not a port (0-65535)\n", kName, v);
    std::exit(2);
  }
  return static_cast<int>(p);
}

StatusOr<ModelShape> ModelFromArgs(const Args& a) {
  auto m = ModelPreset(a.model);
  if (!m.ok()) return m.status();
  bool custom = false;
  for (auto [v, field] : {std::pair{a.layers, &m->layers},
                          {a.hidden, &m->hidden},
                          {a.heads, &m->heads},
                          {a.kv_heads, &m->kv_heads},
                          {a.head_dim, &m->head_dim},
                          {a.intermediate, &m->intermediate},
                          {a.vocab, &m->vocab}}) {
    if (v > 0) {
      *field = v;
      custom = true;
    }
  }
  if (custom) m->name = a.model + "-custom";
  Status s = ValidateModel(*m);
  if (!s.ok()) return s;
  return m;
}

std::string JoinSizes(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s.empty() ? "none (eager)" : s;
}

int Run(const Args& a, const EngineFactories& engines) {
  auto model = ModelFromArgs(a);
  if (!model.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, model.status().message().c_str());
    return 2;
  }
  if (a.max_batch < 1 || a.max_batch > 4096 || a.block_size < 1 || a.block_size > 1024 || a.max_model_len < 2 ||
      a.max_prefill_tokens < 1 || a.default_max_tokens < 1) {
    std::fprintf(stderr,
                 "%s: --max-batch (1-4096), --block-size (1-1024), --max-model-len (>= 2), "
                 "--max-prefill-tokens and --default-max-tokens (>= 1) are out of range\n",
                 kName);
    return 2;
  }
  if (a.memory_fraction <= 0 || a.memory_fraction > 0.95) {
    std::fprintf(stderr, "%s: --gpu-memory-fraction must be in (0, 0.95]\n", kName);
    return 2;
  }

  EngineConfig ec;
  ec.model = *model;
  ec.device = a.device;
  ec.memory_fraction = a.memory_fraction;
  ec.block_size = a.block_size;
  ec.max_batch = a.max_batch;
  ec.max_step_tokens = std::max(a.max_prefill_tokens, a.max_batch);
  ec.max_model_len = a.max_model_len;
  ec.enforce_eager = a.enforce_eager;
  ec.cpu_step_us = a.cpu_step_us;
  ec.cpu_kv_blocks = a.cpu_kv_blocks;
  auto factory = engines.find(a.engine);
  if (factory == engines.end()) {
    std::string names;
    for (auto it = engines.rbegin(); it != engines.rend(); ++it) names += (names.empty() ? "" : " or ") + it->first;
    std::fprintf(stderr, "%s: --engine must be %s, not '%s'\n", kName, names.c_str(), a.engine.c_str());
    return 2;
  }
  auto created = factory->second(ec);
  if (!created.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, created.status().message().c_str());
    return 1;
  }
  std::unique_ptr<Engine> engine = std::move(*created);
  const EngineInfo& info = engine->info();
  std::fprintf(stderr, "%s: model %s\n", kName, info.model.Describe().c_str());
  std::fprintf(stderr, "%s: engine %s on %s; KV cache %lld blocks x %d tokens; decode graphs for batch %s\n", kName,
               info.kind.c_str(), info.device.c_str(), static_cast<long long>(info.num_blocks), info.block_size,
               JoinSizes(info.graph_sizes).c_str());

  ServingOptions so;
  so.served_model = a.served_name.empty() ? "twinscope-demo-" + model->name : a.served_name;
  so.seed = a.seed;
  so.default_max_tokens = a.default_max_tokens;
  so.schedule_out = a.schedule_out;
  so.trace_requests = a.trace_requests;
  so.follow_wait = std::chrono::milliseconds(a.follow_wait_ms);
  so.exit_after_schedule = a.exit_after_schedule;
  so.drain_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.drain_timeout_s * 1000));
  StepFeed feed;
  std::unique_ptr<ScheduleFetcher> fetcher;
  if (!a.follow.empty()) {
    so.follow = &feed;
    if (a.follow.rfind("http://", 0) == 0 || a.follow.rfind("https://", 0) == 0) {
      auto url = ParseHttpUrl(a.follow);
      if (!url.ok()) {
        std::fprintf(stderr, "%s: --follow %s\n", kName, url.status().message().c_str());
        return 2;
      }
      FetcherOptions fo;
      fo.contact_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.follow_timeout_s * 1000));
      fetcher = std::make_unique<ScheduleFetcher>(*url, feed, fo);
    } else {
      ReadScheduleFile(a.follow, feed);
      so.follow_wait = std::chrono::milliseconds(0);  // a replay: the requests are the schedule's
      if (feed.drained() && !feed.close_status().ok()) {
        std::fprintf(stderr, "%s: --follow: %s\n", kName, feed.close_status().message().c_str());
        return 2;
      }
    }
  }

  ServingCore core(so, *engine);
  asio::io_context main_ioc(1);
  asio::signal_set signals(main_ioc, SIGINT, SIGTERM);
  core.SetOnStopped([&] { asio::post(main_ioc, [&] { main_ioc.stop(); }); });
  if (Status s = core.Start(); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, s.message().c_str());
    return 1;
  }
  HttpOptions ho;
  ho.host = a.host;
  ho.port = static_cast<uint16_t>(a.port >= 0 ? a.port : PortFromEnv());
  HttpServer http(ho, core);
  if (Status s = http.Start(); !s.ok()) {
    std::fprintf(stderr, "%s: %s\n", kName, s.message().c_str());
    core.StopNow();
    core.Wait();
    return 1;
  }
  std::printf("listening on %s\n", http.address().c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "%s: serving %s at http://%s%s; %s\n", kName, so.served_model.c_str(), http.address().c_str(),
               http.loopback_only() ? " (loopback only)" : " (reachable from other machines)",
               a.follow.empty() ? "batching on its own" : ("following the schedule of " + a.follow).c_str());
  if (fetcher) fetcher->Start();

  int signals_seen = 0;
  std::function<void(const beast::error_code&, int)> on_signal = [&](const beast::error_code& ec, int signo) {
    if (ec) return;
    if (++signals_seen == 1) {
      std::fprintf(stderr, "%s: %s: finishing the requests in flight (again to stop at once)\n", kName,
                   signo == SIGINT ? "SIGINT" : "SIGTERM");
      core.Drain();
      signals.async_wait(on_signal);
    } else {
      std::fprintf(stderr, "%s: stopping now\n", kName);
      core.StopNow();
    }
  };
  signals.async_wait(on_signal);
  main_ioc.run();
  core.Wait();

  // A live follower may still be fetching the last steps: give it the end line.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (http.schedule_polled_recently(std::chrono::milliseconds(500)) && !http.schedule_end_served() &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  http.Shutdown();
  if (!http.WaitFor(std::chrono::seconds(5))) {
    http.ShutdownNow();
    http.Wait();
  }
  if (fetcher) fetcher->Stop();
  nlohmann::json h = core.Health();
  std::fprintf(stderr, "%s: stopped after %llu steps (%llu prefill, %llu decode), %llu tokens, %llu requests%s\n",
               kName, static_cast<unsigned long long>(h["steps"].get<uint64_t>()),
               static_cast<unsigned long long>(h["prefill_steps"].get<uint64_t>()),
               static_cast<unsigned long long>(h["decode_steps"].get<uint64_t>()),
               static_cast<unsigned long long>(h["tokens"].get<uint64_t>()),
               static_cast<unsigned long long>(h["requests"]["received"].get<uint64_t>()),
               core.exit_code() ? " (with errors: see above)" : "");
  return core.exit_code();
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> CreateCpuEngine(const EngineConfig& c) {
  CpuEngineOptions o;
  o.model = c.model;
  o.block_size = c.block_size;
  o.num_blocks = c.cpu_kv_blocks;
  o.max_batch = c.max_batch;
  o.max_step_tokens = c.max_step_tokens;
  o.max_model_len = c.max_model_len;
  o.graph_sizes = c.enforce_eager ? std::vector<int>{} : DefaultGraphSizes(c.max_batch);
  o.step_time = std::chrono::microseconds(c.cpu_step_us);
  return std::unique_ptr<Engine>(std::make_unique<CpuEngine>(o));
}

int DemoServerMain(int argc, char** argv, EngineFactories engines) {
  if (!engines.count("cpu")) engines["cpu"] = CreateCpuEngine;
  Args a;
  CLI::App app{
      "twinscope-demo-server: an OpenAI-compatible chat server that behaves like an LLM decode server on "
      "the GPU, without a model download (docs/demo-server.md)"};
  app.add_option("--host", a.host, "address to listen on (loopback by default)");
  app.add_option("--port", a.port, "port (0 picks a free one; default: $TWINSCOPE_DEMO_PORT, else 8000)");
  app.add_option("--engine", a.engine, "gpu, or cpu (no GPU work: for tests and machines without a GPU)");
  app.add_option("--model", a.model, "model shape: " + ModelPresetNames());
  app.add_option("--layers", a.layers, "override the model's layers");
  app.add_option("--hidden", a.hidden, "override the model's hidden size");
  app.add_option("--heads", a.heads, "override the model's attention heads");
  app.add_option("--kv-heads", a.kv_heads, "override the model's key/value heads");
  app.add_option("--head-dim", a.head_dim, "override the model's head size");
  app.add_option("--intermediate", a.intermediate, "override the model's MLP size");
  app.add_option("--vocab", a.vocab, "override the model's vocabulary size");
  app.add_option("--served-model-name", a.served_name, "model name in replies (default twinscope-demo-<model>)");
  app.add_option("--max-batch", a.max_batch, "most sequences per step (default 64)");
  app.add_option("--max-model-len", a.max_model_len, "longest prompt + reply in tokens (default 4096)");
  app.add_option("--max-prefill-tokens", a.max_prefill_tokens, "most prompt tokens per prefill step (default 8192)");
  app.add_option("--block-size", a.block_size, "tokens per KV-cache block (default 16)");
  app.add_option("--gpu-memory-fraction", a.memory_fraction,
                 "share of the GPU's memory for this server (weights, buffers, KV cache; default 0.3)");
  app.add_option("--device", a.device, "CUDA device (default 0)");
  app.add_flag("--enforce-eager", a.enforce_eager, "no CUDA graphs: decode steps launch kernels one by one");
  app.add_option("--seed", a.seed, "sample seed of requests that bring none (default 0)");
  app.add_option("--default-max-tokens", a.default_max_tokens, "max_tokens of requests that bring none (default 128)");
  app.add_option("--schedule-out", a.schedule_out, "write the step schedule here (JSON lines, flushed per step)");
  app.add_option("--follow", a.follow,
                 "run exactly the steps of a primary's schedule: a FILE (replayed now, no client needed) or the "
                 "primary's URL (followed live; requests come through the mirror)");
  app.add_option("--follow-wait-ms", a.follow_wait_ms,
                 "live follower: how long a step waits for its requests before running them without (default 5000)");
  app.add_option("--follow-timeout", a.follow_timeout_s,
                 "live follower: give up after this many seconds without an answer from the primary (default 300)");
  app.add_flag("--exit-after-schedule", a.exit_after_schedule, "a follower exits when the schedule ends");
  app.add_option("--trace-requests", a.trace_requests, "write one JSON line per request: its id and its steps");
  app.add_option("--cpu-step-us", a.cpu_step_us, "cpu engine: time per step in microseconds (default 2000)");
  app.add_option("--cpu-kv-blocks", a.cpu_kv_blocks, "cpu engine: KV-cache blocks (default 16384)");
  app.add_option("--drain-timeout", a.drain_timeout_s,
                 "on SIGINT/SIGTERM, wait this many seconds for requests in flight (default 30)");
  CLI11_PARSE(app, argc, argv);
  return Run(a, engines);
}

}  // namespace twinscope::demo
