// `twinscope twin --serve` end to end with two small test servers
// (test_server.cpp): start, health wait, the mirror in front, a clean stop on
// SIGINT or --duration, a shadow that dies, a primary that never becomes
// healthy, sizing flags given to both sides; --concurrent (a live twin) here, the sequential default in
// sequential_test.cpp. The servers make no CUDA calls, so the collector libraries only
// have to exist, and no trace is written (the run then says there is nothing
// to join).
#include <map>

#include "serve_fixture.h"

namespace twinscope {
namespace {

using serve_testing::Alive;
using serve_testing::Post;
using serve_testing::Serve;
using testutil::Slurp;
namespace fs = std::filesystem;

TEST_F(Serve, MirrorsRequestsAndStopsEverythingOnSigint) {
  Start({"--concurrent"});
  ASSERT_TRUE(WaitServing()) << Err();
  for (int i = 0; i < 3; ++i) {
    std::string r = Post(port_, "/v1/chat/completions");
    EXPECT_NE(r.find("200 OK"), std::string::npos) << r;
    EXPECT_NE(r.find("role=primary"), std::string::npos) << "the client gets the primary's answer: " << r;
  }
  ASSERT_EQ(PidFiles().size(), 2u) << "two servers, one per port";
  // Both servers got one shared autotune cache folder (twin/autotune_env.h), unless the user set their own.
  const std::string triton = "TRITON_CACHE_DIR=" + (dir_ / "run" / "autotune-cache" / "triton").string();
  for (const auto& p : PidFiles()) {
    pid_t pid = 0;
    std::ifstream(p) >> pid;
    std::string env = Slurp(fs::path("/proc") / std::to_string(pid) / "environ");
    std::replace(env.begin(), env.end(), '\0', '\n');
    if (!std::getenv("TRITON_CACHE_DIR")) {
      EXPECT_NE(env.find(triton + "\n"), std::string::npos) << p << ":\n" << env;
    }
  }
  kill(pid_, SIGINT);
  const int code = Wait();
  const std::string err = Err();
  EXPECT_NE(err.find("send requests to http://127.0.0.1:" + std::to_string(port_)), std::string::npos) << err;
  EXPECT_NE(err.find("stopping: mirror first"), std::string::npos) << err;
  for (const auto& p : PidFiles()) EXPECT_FALSE(Alive(p)) << p << " still running";
  // No CUDA here, so no trace: said plainly, and the run fails.
  EXPECT_EQ(code, 1) << err;
  EXPECT_NE(err.find("the primary wrote no trace"), std::string::npos) << err;
  auto twin = nlohmann::json::parse(Slurp(dir_ / "run" / "twin.json"));
  EXPECT_EQ(twin["serve"], true);
  EXPECT_EQ(twin["mirror"]["requests"], 3);
  EXPECT_EQ(twin["mirror"]["shadow_ok"], 3);
  EXPECT_EQ(twin["primary_exit"], 0) << "a server stopped by our SIGTERM ended as asked";
  EXPECT_EQ(twin["autotune"]["dir"], (dir_ / "run" / "autotune-cache").string());
  // The request log holds two lines per request: the request, then its end with both sides' outcomes.
  std::ifstream log(dir_ / "run" / "requests.jsonl");
  int lines = 0;
  for (std::string l; std::getline(log, l);) ++lines;
  EXPECT_EQ(lines, 6);
}

TEST_F(Serve, ShadowThatDiesNeverReachesTheClient) {
  Start({"--concurrent", "--shadow-args", "--exit-after-requests", "--shadow-args", "1"});
  ASSERT_TRUE(WaitServing()) << Err();
  for (int i = 0; i < 4; ++i) {
    std::string r = Post(port_, "/v1/x");
    EXPECT_NE(r.find("role=primary"), std::string::npos) << r;
  }
  kill(pid_, SIGINT);
  Wait();
  auto twin = nlohmann::json::parse(Slurp(dir_ / "run" / "twin.json"));
  EXPECT_EQ(twin["mirror"]["primary_ok"], 4);
  EXPECT_EQ(twin["mirror"]["shadow_ok"], 1) << twin.dump(2);
  EXPECT_GE(twin["mirror"]["shadow_failed"].get<int>(), 3);
  EXPECT_EQ(twin["shadow_exit"], 3);
  for (const auto& p : PidFiles()) EXPECT_FALSE(Alive(p)) << p;
}

TEST_F(Serve, PrimaryThatNeverBecomesHealthyIsAClearErrorAndNothingIsLeftRunning) {
  Start({"--health-timeout", "2", "--primary-args", "--never-healthy"});
  EXPECT_FALSE(WaitServing());
  const int code = Wait();
  EXPECT_EQ(code, 1);
  const std::string err = Err();
  EXPECT_NE(err.find("the primary server did not answer GET /health with 200"), std::string::npos) << err;
  EXPECT_NE(err.find("{port} or TWINSCOPE_PORT"), std::string::npos) << err;
  for (const auto& p : PidFiles()) EXPECT_FALSE(Alive(p)) << p;
}

TEST_F(Serve, AShadowThatNeverBecomesHealthyIsLeftAndThePrimaryServesAlone) {
  // --concurrent: the shadow may fail its health wait (twin/serve.h WaitForHealth, an optional target).
  Start({"--concurrent", "--health-timeout", "2", "--shadow-args", "--never-healthy"});
  ASSERT_TRUE(WaitServing()) << Err();
  std::string r = Post(port_, "/v1/x");
  EXPECT_NE(r.find("role=primary"), std::string::npos) << r;
  kill(pid_, SIGINT);
  Wait();
  const std::string err = Err();
  EXPECT_NE(err.find("the shadow server did not answer GET /health with 200 on port"), std::string::npos) << err;
  EXPECT_NE(err.find("serving without it"), std::string::npos) << err;
  EXPECT_NE(err.find("requests go to the primary alone"), std::string::npos) << err;
  auto twin = nlohmann::json::parse(Slurp(dir_ / "run" / "twin.json"));
  EXPECT_EQ(twin["mirror"]["primary_ok"], 1) << twin.dump(2);
  for (const auto& p : PidFiles()) EXPECT_FALSE(Alive(p)) << p;
}

TEST_F(Serve, ConcurrentSidesGetEachOthersSizingFlagsButNotAMemoryShare) {
  // The demo server's sizing flags (named by --engine-adapter demo: the test server takes any argument).
  Start({"--concurrent", "--engine-adapter", "demo", "--primary-args=--max-batch=8", "--primary-args",
         "--gpu-memory-fraction", "--primary-args", "0.5", "--shadow-args", "--block-size", "--shadow-args", "32"});
  ASSERT_TRUE(WaitServing()) << Err();
  Post(port_, "/v1/x");
  kill(pid_, SIGINT);
  Wait();
  const std::string err = Err();
  EXPECT_NE(err.find("twinscope twin: --max-batch 8 given to the primary only: passed to the shadow too"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("twinscope twin: --block-size 32 given to the shadow only: passed to the primary too"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("--gpu-memory-fraction 0.5 given to the primary only: not passed to the shadow, as both servers "
                     "run at once on one GPU"),
            std::string::npos)
      << err;
  // What each server was started with (test_server records its arguments with each request).
  std::map<std::string, std::string> argv;
  for (const auto& l : serve_testing::JsonLines(dir_ / "record.jsonl")) argv[l["role"]] = l["argv"];
  ASSERT_EQ(argv.size(), 2u) << err;
  EXPECT_NE(argv["shadow"].find("--block-size 32 --max-batch=8"), std::string::npos) << argv["shadow"];
  EXPECT_EQ(argv["shadow"].find("--gpu-memory-fraction"), std::string::npos) << argv["shadow"];
  EXPECT_NE(argv["primary"].find("--max-batch=8 --gpu-memory-fraction 0.5 --block-size 32"), std::string::npos)
      << argv["primary"];
  const auto sizing = nlohmann::json::parse(Slurp(dir_ / "run" / "twin.json"))["sizing"];
  EXPECT_EQ(sizing["engine"], "demo");
  EXPECT_EQ(sizing["shadow"], nlohmann::json({{"--block-size", "32"}, {"--max-batch", "8"}})) << sizing.dump(2);
  EXPECT_EQ(sizing["decisions"].size(), 3u) << sizing.dump(2);
}

TEST_F(Serve, DurationEndsTheRunByItself) {
  Start({"--duration", "1"});
  ASSERT_TRUE(WaitServing()) << Err();
  const auto t0 = std::chrono::steady_clock::now();
  Wait();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  EXPECT_NE(Err().find("stopping: mirror first"), std::string::npos) << Err();
  for (const auto& p : PidFiles()) EXPECT_FALSE(Alive(p)) << p;
}

TEST(ServePlaceholders, PortsAndFolderAreFilledIn) {
  EXPECT_EQ(twin::ExpandPlaceholders("--port={port}", 81, 80, "/d"), "--port=81");
  EXPECT_EQ(twin::ExpandPlaceholders("http://h:{primary_port}/x", 81, 80, "/d"), "http://h:80/x");
  EXPECT_EQ(twin::ExpandPlaceholders("{dir}/s-{port}.jsonl", 81, 80, "/d"), "/d/s-81.jsonl");
}

}  // namespace
}  // namespace twinscope
