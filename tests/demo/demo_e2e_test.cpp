// `twinscope demo` end to end without a GPU: the real CLI, mirror, collectors
// and join over the demo server with its CPU engine, whose launches go through
// the fake CUPTI (primary) and the fake Sanitizer (shadow): tests/demo's
// fake_gpu_server, given to the demo through TWINSCOPE_DEMO_SERVER. The
// summary's figures are checked against the run's own schedule and request
// trace; the report must hold the per-request section. Also: no GPU, bad flags.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../testutil/spawn.h"
#include "twin/serve.h"

namespace twinscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kRequests = 4, kMaxTokens = 12, kLayers = 4;  // --model small: 4 layers

using testutil::Outcome;
using testutil::Slurp;

std::vector<json> JsonLines(const fs::path& p) {
  std::vector<json> v;
  std::ifstream f(p);
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) v.push_back(json::parse(line));
  return v;
}

class DemoE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(TWINSCOPE_TEST_WORKDIR) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    testutil::LinkCollectors(dir_, TWINSCOPE_TEST_CUPTI_LIB, TWINSCOPE_TEST_BLOCKS_LIB);
  }

  // `server`: TWINSCOPE_DEMO_SERVER ("" = not set).
  // `env`: more "NAME=value" for the demo and the servers it starts.
  Outcome Demo(const std::vector<std::string>& args, const std::string& server = TWINSCOPE_TEST_FAKE_SERVER,
               const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv = {"demo"};
    argv.insert(argv.end(), args.begin(), args.end());
    return Twinscope(argv, server, {}, env);
  }

  // Runs `twinscope ARGS...`; `then` (if any) runs while it does, with its pid.
  Outcome Twinscope(const std::vector<std::string>& args, const std::string& server,
                    const std::function<void(pid_t)>& then = {}, const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv = {TWINSCOPE_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> add = {"TWINSCOPE_LIB_DIR=" + (dir_ / "lib").string(),
                                    std::string("LD_LIBRARY_PATH=") + TWINSCOPE_TEST_FAKE_CUPTI_DIR};
    add.insert(add.end(), env.begin(), env.end());
    if (!server.empty()) add.push_back("TWINSCOPE_DEMO_SERVER=" + server);
    Outcome r =
        testutil::RunToEnd(argv, testutil::EnvironmentWithout({"TWINSCOPE_", "LD_LIBRARY_PATH="}, add), dir_, then);
    EXPECT_NE(r.code, -1) << "cannot start " << argv[0];
    return r;
  }

  std::vector<std::string> Args(const fs::path& out, std::vector<std::string> more = {}) {
    std::vector<std::string> a = {"--engine",     "cpu",
                                  "--model",      "small",
                                  "--requests",   std::to_string(kRequests),
                                  "--max-tokens", std::to_string(kMaxTokens),
                                  "-o",           out.string()};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }

  // The figures the summary must give, worked out from the run's own schedule and request trace.
  void ExpectFiguresOfTheRun(const fs::path& out, const Outcome& r, int latency_pairs) {
    SCOPED_TRACE(r.out + r.err);
    json s = json::parse(Slurp(out / "summary.json"));
    EXPECT_EQ(s["requests"]["ok"], kRequests);
    EXPECT_EQ(s["requests"]["failed"], 0);
    EXPECT_EQ(s["tokens"], kRequests * kMaxTokens);
    // Decode steps: the distinct decode steps the chat requests were in, by the schedule.
    std::map<uint64_t, std::string> kind;
    for (const auto& l : JsonLines(out / "schedule.jsonl"))
      if (l["type"] == "step") kind[l["step"].get<uint64_t>()] = l["kind"];
    std::set<uint64_t> chat_decode;
    int traced = 0, latency = 0;
    for (const auto& q : JsonLines(out / "requests-primary.jsonl")) {
      std::string id = q["id"];
      if (id.rfind("demo-", 0) == 0) {
        ++traced;
        int decode = 0;
        for (const auto& st : q["steps"])
          if (kind.at(st.get<uint64_t>()) == "decode") chat_decode.insert(st.get<uint64_t>()), ++decode;
        EXPECT_EQ(decode, kMaxTokens - 1) << id << ": one prefill step gives the first token";
      } else {
        EXPECT_EQ(id.rfind("lat-", 0), 0u) << id;
        ++latency;
      }
    }
    EXPECT_EQ(traced, kRequests);
    EXPECT_EQ(latency, 2 * latency_pairs);
    EXPECT_EQ(s["decode_steps"], chat_decode.size());
    EXPECT_GE(chat_decode.size(), static_cast<size_t>(kMaxTokens - 1));
    EXPECT_EQ(s["decode_steps_per_request"], json({kMaxTokens - 1, kMaxTokens - 1}));
    EXPECT_EQ(s["cache_intervals"], kLayers * chat_decode.size());
    EXPECT_EQ(s["cache_intervals_per_step"], static_cast<double>(kLayers));
    EXPECT_EQ(s["correlation_misses"], 0);
    EXPECT_EQ(s["drops"], 0);
    EXPECT_EQ(s["kernel_records_missing"], 0);
    // Every step the server ran has one cache-kernel launch per layer, in both traces, matched by key.
    EXPECT_EQ(s["shadow_launches"], kLayers * kind.size());
    EXPECT_EQ(s["exact"], s["shadow_launches"]);
    EXPECT_EQ(s["exact_rate_pct"], 100.0);
    EXPECT_EQ(s["time_only"], 0);
    EXPECT_EQ(s["unmatched_shadow"], 0);
    EXPECT_EQ(s["primary_target_in_steps"], kLayers * kind.size());
    EXPECT_EQ(s["primary_target_in_steps_exact"], kLayers * kind.size());
    EXPECT_EQ(s["drifting_ranges"], 0);
    // The printed summary says the same.
    EXPECT_NE(r.out.find("client: " + std::to_string(kRequests) + " requests ok, 0 failed"), std::string::npos);
    EXPECT_NE(
        r.out.find("decode steps: " + std::to_string(chat_decode.size()) + " of the 4 chat requests (11-11 each)"),
        std::string::npos);
    EXPECT_NE(r.out.find("(4.0 per step)"), std::string::npos);
    EXPECT_NE(r.out.find("correlation misses: 0, drops: 0"), std::string::npos);
    EXPECT_NE(r.out.find("(100.0%)"), std::string::npos);

    // The join carries every request, and the report a Requests section that names them.
    json j = json::parse(Slurp(out / "join.json"));
    // Both sides ran decode steps as CUDA graphs; every traced shadow launch has all its blocks.
    EXPECT_EQ(j["summary"]["shadow_without_blocks"], 0);
    int graph_nodes = 0;
    for (const auto& l : j["launches"]) {
      graph_nodes += l["primary"]["graph"].get<bool>();
      EXPECT_EQ(l["shadow"]["blocks_seen"], l["shadow"]["blocks_expected"]) << l.dump();
    }
    EXPECT_EQ(graph_nodes, kLayers * static_cast<int>(std::count_if(kind.begin(), kind.end(), [](const auto& k) {
                             return k.second == "decode";
                           })));
    ASSERT_TRUE(j.contains("requests"));
    EXPECT_EQ(j["requests"]["total"], kRequests + 2 * latency_pairs);
    for (const auto& row : j["requests"]["rows"]) {
      EXPECT_EQ(row["target_launches"], kLayers * row["steps"].size()) << row.dump();
      EXPECT_EQ(row["shadow_exact"], row["target_launches"]) << row.dump();
      // The server's arrival time, put on the primary's CUPTI clock by its header's clock pair, comes before
      // the request's first kernel (the fake CUPTI stamps records on cuptiGetTimestamp's clock, as CUPTI does).
      ASSERT_TRUE(row["arrival_ns"].is_number_integer()) << row.dump();
      ASSERT_TRUE(row["gpu_start_ns"].is_number_integer()) << row.dump();
      EXPECT_LT(row["arrival_ns"].get<int64_t>(), row["gpu_start_ns"].get<int64_t>()) << row.dump();
    }
    const std::string html = Slurp(out / "report.html");
    EXPECT_NE(html.find("<section id=\"requests\">"), std::string::npos);
    for (int i = 0; i < kRequests; ++i)
      EXPECT_NE(html.find(">demo-" + std::to_string(i) + "<"), std::string::npos) << "demo-" << i;
    EXPECT_NE(html.find("id=\"ts-request-select\""), std::string::npos);
  }

  fs::path dir_;
};

TEST_F(DemoE2E, ReplayGivesTheSummarysFiguresAndAReportWithRequests) {
  const fs::path out = dir_ / "run";
  Outcome r = Demo(Args(out, {"--mirror-latency", "3"}));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("1/2 the primary serves"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("2/2 a shadow replays"), std::string::npos) << r.err;
  ExpectFiguresOfTheRun(out, r, 3);
  // The mirror's added latency: 3 requests each way, sane numbers, kept as JSON and printed.
  json lat = json::parse(Slurp(out / "mirror-latency.json"));
  EXPECT_EQ(lat["pairs"], 3);
  for (const char* side : {"direct", "mirror"}) {
    SCOPED_TRACE(side);
    EXPECT_EQ(lat[side]["requests"], 3);
    EXPECT_EQ(lat[side]["ok"], 3);
    EXPECT_GT(lat[side]["ttft_ms_p50"].get<double>(), 0);
    EXPECT_GE(lat[side]["ttft_ms_p99"].get<double>(), lat[side]["ttft_ms_p50"].get<double>());
    EXPECT_GE(lat[side]["total_ms_p50"].get<double>(), lat[side]["ttft_ms_p50"].get<double>());
  }
  EXPECT_DOUBLE_EQ(lat["added_ms"]["ttft_p50"].get<double>(),
                   lat["mirror"]["ttft_ms_p50"].get<double>() - lat["direct"]["ttft_ms_p50"].get<double>());
  EXPECT_EQ(lat["shadow_copies"], 0);  // no shadow serves while the primary does
  EXPECT_EQ(lat["direct_results"][1]["request_id"], "lat-direct-1");
  EXPECT_EQ(lat["mirror_results"][2]["request_id"], "lat-mirror-2");
  EXPECT_NE(r.out.find("mirror added latency (3 pairs): TTFT p50 "), std::string::npos) << r.out;
  EXPECT_TRUE(json::parse(Slurp(out / "summary.json"))["mirror_latency"].is_object());
  // The mirror logged every request, and `stats` on the folder shows the requests again.
  // (a request line before forwarding and an end line after, per request: docs/mirror.md, "Request log")
  const auto log_lines = JsonLines(out / "requests.jsonl");
  EXPECT_EQ(std::count_if(log_lines.begin(), log_lines.end(), [](const json& l) { return l["type"] == "end"; }),
            kRequests + 3);
  EXPECT_EQ(log_lines.size(), static_cast<size_t>(2 * (kRequests + 3)));
  EXPECT_NE(r.out.find("requests (requests-primary.jsonl): 10, 10 with status 200"), std::string::npos) << r.out;
}

// The fake GPU server flushes the fake CUPTI after every step unless told not to: without that flush, the
// collector's own buffering and flushes must still deliver every kernel record and correlate every launch.
TEST_F(DemoE2E, ReplayWithoutAFlushPerStepStillMissesNoRecord) {
  const fs::path out = dir_ / "run";
  Outcome r = Demo(Args(out), TWINSCOPE_TEST_FAKE_SERVER, {"FAKE_GPU_STEP_FLUSH=0"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  ExpectFiguresOfTheRun(out, r, 0);
}

TEST_F(DemoE2E, LiveLockstepMatchesEveryLaunchAndCopiesDirectRequestsToTheShadow) {
  const fs::path out = dir_ / "run";
  Outcome r = Demo(Args(out, {"--live", "--mirror-latency", "2"}));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("== twinscope demo (live) =="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the primary beside the shadow"), std::string::npos) << r.out;
  ExpectFiguresOfTheRun(out, r, 2);
  json lat = json::parse(Slurp(out / "mirror-latency.json"));
  EXPECT_EQ(lat["shadow_copies"], 2);
  EXPECT_EQ(lat["shadow_copies_failed"], 0);
  // Stopping: the primary first; the shadow ran the whole schedule and ended on its own.
  size_t steps = 0;
  for (const auto& l : JsonLines(out / "schedule.jsonl")) steps += l["type"] == "step";
  EXPECT_NE(r.err.find("the followed schedule ended after " + std::to_string(steps) + " steps"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("the shadow exited with code 0"), std::string::npos) << r.err;
  // The lockstep shadow ran the direct requests from their copies, not synthesized after a wait.
  int synthesized = 0;
  for (const auto& q : JsonLines(out / "requests-shadow.jsonl")) synthesized += q.value("synthesized", false);
  EXPECT_EQ(synthesized, 0);
}

// `twin --serve` on the same server: the request trace the primary writes (given only to the server)
// reaches the join, a stale file of an earlier run does not, and `stats` on the folder shows the requests.
TEST_F(DemoE2E, TwinServeJoinsTheRequestTraceItsPrimaryWrote) {
  const fs::path out = dir_ / "serve";
  fs::create_directories(out);
  std::ofstream(out / "schedule.jsonl") << R"({"type":"header","version":1})"
                                        << "\n";  // an earlier run's
  fs::last_write_time(out / "schedule.jsonl", fs::file_time_type::clock::now() - std::chrono::hours(2));
  const int port = twin::FreeLoopbackPort();
  ASSERT_GT(port, 0);
  int client_rc = -1;
  Outcome r =
      Twinscope({"twin",
                 "--serve",
                 "--concurrent",  // the live twin: the shadow follows the live primary's schedule
                 "--follow",
                 "--kernel",
                 "reshape_and_cache_flash",
                 "--listen",
                 "127.0.0.1:" + std::to_string(port),
                 "--duration",
                 "600",  // a bound only: the test stops it (Ctrl-C) once its client is done
                 "-o",
                 out.string(),
                 "--primary-args=--trace-requests",
                 "--primary-args={dir}/requests-primary.jsonl",
                 "--",
                 TWINSCOPE_TEST_FAKE_SERVER,
                 "--port",
                 "{port}",
                 "--engine",
                 "cpu",
                 "--model",
                 "small"},
                "", [&](pid_t twin_pid) {
                  // The mirror answers /health once both servers do; then three requests through it.
                  for (int i = 0; i < 200 && twin::HttpGetStatus(port, "/health", std::chrono::seconds(1)) != 200; ++i)
                    std::this_thread::sleep_for(std::chrono::milliseconds(50));
                  const std::string cmd = std::string(TWINSCOPE_TEST_DEMO_CLIENT) +
                                          " --url http://127.0.0.1:" + std::to_string(port) +
                                          " -n 3 --max-tokens 5 -q > " + (dir_ / "client.txt").string() + " 2>&1";
                  client_rc = std::system(cmd.c_str());
                  kill(twin_pid, SIGINT);  // served all three, however long they took: stop, then join
                });
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(client_rc, 0) << Slurp(dir_ / "client.txt");
  json tj = json::parse(Slurp(out / "twin.json"));
  EXPECT_EQ(tj["request_trace"], (out / "requests-primary.jsonl").string());
  EXPECT_EQ(tj["schedule"], "") << "the stale schedule.jsonl is not this run's";
  json j = json::parse(Slurp(out / "join.json"));
  ASSERT_TRUE(j.contains("requests")) << r.out;
  EXPECT_EQ(j["requests"]["total"], 3);
  EXPECT_EQ(j["summary"]["unmatched_shadow"], 0);
  for (const auto& row : j["requests"]["rows"]) {
    EXPECT_EQ(row["decode_steps"], 4) << row.dump();
    EXPECT_EQ(row["shadow_exact"], row["target_launches"]) << row.dump();
  }
  EXPECT_NE(r.out.find("requests (requests-primary.jsonl): 3, 3 with status 200"), std::string::npos) << r.out;
  Outcome st = Twinscope({"stats", out.string()}, "");
  EXPECT_EQ(st.code, 0) << st.err;
  EXPECT_NE(st.out.find("requests (requests-primary.jsonl): 3, 3 with status 200"), std::string::npos) << st.out;
}

TEST_F(DemoE2E, WithoutAGpuPlainDemoSaysSoAndFails) {
  struct stat st {};
  const bool gpu = stat("/dev/nvidia0", &st) == 0 || stat("/dev/nvidiactl", &st) == 0;
  // Plain `twinscope demo` (the GPU engine); a server path that does not exist stops it right after the check.
  Outcome r = Demo({"-o", (dir_ / "run").string()}, (dir_ / "no-such-server").string());
  EXPECT_EQ(r.code, 1) << r.err;
  if (gpu) {  // a GPU machine passes the check and gets to the server
    EXPECT_EQ(r.err.find("no NVIDIA GPU found"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("no-such-server not found"), std::string::npos) << r.err;
    return;
  }
  EXPECT_NE(r.err.find("twinscope demo: no NVIDIA GPU found (no /dev/nvidia0): the demo runs a decode server on the "
                       "GPU. On a machine without one, run the tests (scripts/test.sh)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "run")) << "nothing is started without a GPU";
}

TEST_F(DemoE2E, BadFlagsAreClearErrors) {
  Outcome r = Demo(Args(dir_ / "run", {"--no-lockstep"}));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--no-lockstep goes with --live"), std::string::npos) << r.err;
  Outcome m = Demo(Args(dir_ / "run"), (dir_ / "no-such-server").string());
  EXPECT_EQ(m.code, 1);
  EXPECT_NE(m.err.find("no-such-server not found: build the target twinscope-demo-server (or fix "
                       "TWINSCOPE_DEMO_SERVER)"),
            std::string::npos)
      << m.err;
}

}  // namespace
}  // namespace twinscope
