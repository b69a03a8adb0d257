// `twinscope twin --serve` sequential (the default): the primary serves alone behind the mirror, the
// shadow server starts only after it stopped and gets the logged requests replayed (same ids, bodies,
// headers); --requests, --replay DIR, the engine adapters' environment and status files, the sizing flags
// given to both sides, and the faults (a primary or shadow that dies, a port taken, a shadow never healthy,
// an adapter that raised), with nothing left running.
#include <sys/socket.h>

#include "serve_fixture.h"

namespace twinscope {
namespace {

using serve_testing::Alive;
using serve_testing::JsonLines;
using serve_testing::Post;
using serve_testing::Serve;
using testutil::Slurp;
using Json = nlohmann::json;
namespace fs = std::filesystem;

class Sequential : public Serve {
 protected:
  // Three requests with their own ids, bodies and a header through the mirror.
  void SendThree() {
    for (int i = 0; i < 3; ++i) {
      const std::string r =
          Post(port_, "/v1/chat/completions?n=" + std::to_string(i), "{\"prompt\":\"p" + std::to_string(i) + "\"}",
               "X-Request-Id: seq-" + std::to_string(i) + "\r\nX-Hint: h" + std::to_string(i) +
                   "\r\nAuthorization: Bearer secret\r\n");
      EXPECT_NE(r.find("role=primary"), std::string::npos) << r;
    }
  }
  std::vector<Json> Recorded(const std::string& role) {
    std::vector<Json> v;
    for (const auto& l : JsonLines(dir_ / "record.jsonl"))
      if (l["role"] == role) v.push_back(l);
    return v;
  }
  // "start|exit ROLE NS" lines: the first such time of `role`.
  int64_t Life(const std::string& what, const std::string& role) {
    std::ifstream in(dir_ / "life.txt");
    std::string w, r;
    int64_t ns = 0;
    while (in >> w >> r >> ns)
      if (w == what && r == role) return ns;
    return 0;
  }
  Json TwinJson() { return Json::parse(Slurp(dir_ / "run" / "twin.json"), nullptr, false); }
  void ExpectNothingRunning() {
    for (const auto& p : PidFiles()) EXPECT_FALSE(Alive(p)) << p << " still running";
  }
};

TEST_F(Sequential, TheShadowStartsAfterThePrimaryStoppedAndGetsTheSameRequests) {
  Start({});
  ASSERT_TRUE(WaitServing()) << Err();
  SendThree();
  EXPECT_EQ(Recorded("shadow").size(), 0u) << "no shadow serves while the primary does";
  kill(pid_, SIGINT);
  Wait();
  const std::string err = Err();
  // The primary had its GPU to itself: the shadow started after it had exited.
  ASSERT_GT(Life("exit", "primary"), 0) << err;
  ASSERT_GT(Life("start", "shadow"), 0) << err;
  EXPECT_GT(Life("start", "shadow"), Life("exit", "primary"));
  const auto primary = Recorded("primary"), shadow = Recorded("shadow");
  ASSERT_EQ(primary.size(), 3u);
  ASSERT_EQ(shadow.size(), 3u) << err;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(shadow[i]["id"], primary[i]["id"]);
    EXPECT_EQ(shadow[i]["id"], "seq-" + std::to_string(i));
    EXPECT_EQ(shadow[i]["body"], primary[i]["body"]);
    EXPECT_EQ(shadow[i]["path"], primary[i]["path"]);
    EXPECT_EQ(shadow[i]["hint"], "h" + std::to_string(i));
  }
  const Json t = TwinJson();
  EXPECT_EQ(t["sequential"], true);
  EXPECT_EQ(t["concurrent"], false);
  EXPECT_EQ(t["mirror"]["shadow_sent"], 0);
  EXPECT_EQ(t["replay"]["ok"], 3);
  EXPECT_EQ(t["adapters"]["forced"], false);
  EXPECT_NE(err.find("the batches were not forced"), std::string::npos) << err;
  EXPECT_NE(err.find("at their logged arrival times"), std::string::npos) << err;
  EXPECT_EQ(Slurp(dir_ / "run" / "requests.jsonl").find("secret"), std::string::npos) << "credentials redacted";
  ExpectNothingRunning();
}

TEST_F(Sequential, RequestsNEndsTheServingByItself) {
  Start({"--requests", "2"});
  ASSERT_TRUE(WaitServing()) << Err();
  for (int i = 0; i < 2; ++i) Post(port_, "/v1/x", "{}", "X-Request-Id: n-" + std::to_string(i) + "\r\n");
  const auto t0 = std::chrono::steady_clock::now();
  Wait();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  EXPECT_NE(Err().find("2 requests served (--requests)"), std::string::npos) << Err();
  EXPECT_EQ(Recorded("shadow").size(), 2u) << Err();
  ExpectNothingRunning();
}

TEST_F(Sequential, AForcingAdapterGetsTheScheduleAndTheRequestsGoAllAtOnce) {
  // A shim folder of our own: both servers get it first on PYTHONPATH, the user's after it.
  fs::create_directories(dir_ / "engines" / "shim");
  std::ofstream(dir_ / "engines" / "shim" / "sitecustomize.py") << "# test\n";
  Start({}, {"--fake-adapter"}, {"TWINSCOPE_ENGINES_DIR=" + (dir_ / "engines").string(), "PYTHONPATH=/user/path"});
  ASSERT_TRUE(WaitServing()) << Err();
  SendThree();
  kill(pid_, SIGINT);
  Wait();
  const std::string err = Err();
  const auto shadow = Recorded("shadow");
  ASSERT_EQ(shadow.size(), 3u) << err;
  const std::string shim = (dir_ / "engines" / "shim").string();
  EXPECT_EQ(shadow[0]["pythonpath"], shim + ":/user/path");
  EXPECT_EQ(shadow[0]["adapter"], "auto");
  EXPECT_EQ(shadow[0]["follow"], (dir_ / "run" / "schedule-primary.jsonl").string());
  EXPECT_EQ(Recorded("primary")[0]["follow"], "") << "the primary records, it follows nothing";
  const Json t = TwinJson();
  EXPECT_EQ(t["adapters"]["forced"], true);
  EXPECT_EQ(t["adapters"]["primary"]["mode"], "record");
  EXPECT_EQ(t["adapters"]["shadow"]["mode"], "force");
  EXPECT_NE(err.find("all at once"), std::string::npos) << err;
  EXPECT_NE(err.find("the shadow's engine adapter (fake 1.0): force"), std::string::npos) << err;
  EXPECT_NE(err.find("fake: kv_blocks 10 < 20"), std::string::npos) << "capacity warnings shown: " << err;
  EXPECT_EQ(err.find("the batches were not forced"), std::string::npos) << err;
  ExpectNothingRunning();
}

TEST_F(Sequential, AnAdapterThatRaisedIsShownAndTheBatchesAreNotForced) {
  fs::create_directories(dir_ / "engines" / "shim");
  std::ofstream(dir_ / "engines" / "shim" / "sitecustomize.py") << "# test\n";
  Start({}, {"--fake-adapter-raises"}, {"TWINSCOPE_ENGINES_DIR=" + (dir_ / "engines").string()});
  ASSERT_TRUE(WaitServing()) << Err();
  SendThree();
  kill(pid_, SIGINT);
  Wait();
  const std::string err = Err();
  EXPECT_NE(err.find("ValueError in schedule_batch: disabled"), std::string::npos) << err;
  EXPECT_NE(err.find("the batches were not forced"), std::string::npos) << err;
  EXPECT_EQ(TwinJson()["adapters"]["primary"]["mode"], "disabled");
  EXPECT_EQ(Recorded("shadow").size(), 3u) << "the requests are still replayed";
  ExpectNothingRunning();
}

TEST_F(Sequential, EngineAdapterOffSetsNoShim) {
  Start({"--engine-adapter", "off"}, {}, {"PYTHONPATH=/user/path"});
  ASSERT_TRUE(WaitServing()) << Err();
  Post(port_, "/v1/x");
  kill(pid_, SIGINT);
  Wait();
  const auto shadow = Recorded("shadow");
  ASSERT_EQ(shadow.size(), 1u) << Err();
  EXPECT_EQ(shadow[0]["adapter"], "off");
  EXPECT_EQ(shadow[0]["pythonpath"], "/user/path");
  EXPECT_NE(Err().find("--engine-adapter off"), std::string::npos) << Err();
}

TEST_F(Sequential, ReplayDirReplaysASavedRunToANewShadow) {
  Start({});
  ASSERT_TRUE(WaitServing()) << Err();
  SendThree();
  kill(pid_, SIGINT);
  Wait();
  ASSERT_EQ(Recorded("shadow").size(), 3u) << Err();
  const std::string first_err = Err();
  // Again, from the folder alone: the command comes from its twin.json.
  std::vector<std::string> argv = {TWINSCOPE_BIN, "twin", "--kernel", "k", "--replay", (dir_ / "run").string()};
  const auto envs = testutil::EnvironmentWithout({"TWINSCOPE_"}, {"TWINSCOPE_LIB_DIR=" + (dir_ / "lib").string()});
  pid_ = testutil::SpawnWithOutput(argv, envs, (dir_ / "stdout.txt").string(), (dir_ / "stderr.txt").string());
  ASSERT_GT(pid_, 0);
  Wait();
  const std::string err = Err();
  const auto shadow = Recorded("shadow");
  ASSERT_EQ(shadow.size(), 6u) << err;
  EXPECT_EQ(shadow[3]["id"], "seq-0");
  EXPECT_EQ(shadow[5]["body"], shadow[2]["body"]);
  EXPECT_EQ(Recorded("primary").size(), 3u) << "no new primary";
  EXPECT_EQ(TwinJson()["replayed_from"], (dir_ / "run").string());
  EXPECT_EQ(TwinJson()["replay"]["ok"], 3);
  ExpectNothingRunning();
}

TEST_F(Sequential, TheShadowAndAReplaysShadowGetThePrimarysSizingFlags) {
  // The demo server's sizing flags (named by --engine-adapter demo: the test server takes any argument).
  Start({"--engine-adapter", "demo", "--primary-args=--max-batch=8"});
  ASSERT_TRUE(WaitServing()) << Err();
  SendThree();
  kill(pid_, SIGINT);
  Wait();
  EXPECT_NE(Err().find("twinscope twin: --max-batch 8 given to the primary only: passed to the shadow too"),
            std::string::npos)
      << Err();
  ASSERT_EQ(Recorded("shadow").size(), 3u) << Err();
  EXPECT_NE(Recorded("shadow")[0]["argv"].get<std::string>().find("--max-batch=8"), std::string::npos);
  EXPECT_EQ(TwinJson()["sizing"]["primary_args"], Json({"--max-batch=8"}));
  // --replay DIR: the saved primary's --max-batch reaches the new shadow; one given to it only is a difference.
  std::vector<std::string> argv = {TWINSCOPE_BIN,
                                   "twin",
                                   "--kernel",
                                   "k",
                                   "--engine-adapter",
                                   "demo",
                                   "--replay",
                                   (dir_ / "run").string(),
                                   "--shadow-args=--block-size=16"};
  const auto envs = testutil::EnvironmentWithout({"TWINSCOPE_"}, {"TWINSCOPE_LIB_DIR=" + (dir_ / "lib").string()});
  pid_ = testutil::SpawnWithOutput(argv, envs, (dir_ / "stdout.txt").string(), (dir_ / "stderr.txt").string());
  ASSERT_GT(pid_, 0);
  Wait();
  const std::string err = Err();
  const auto shadow = Recorded("shadow");
  ASSERT_EQ(shadow.size(), 6u) << err;
  EXPECT_NE(shadow[3]["argv"].get<std::string>().find("--block-size=16 --max-batch=8"), std::string::npos)
      << shadow[3]["argv"];
  EXPECT_NE(err.find("--block-size 16 given to the shadow only, and the saved primary ran with the engine's default"),
            std::string::npos)
      << err;
  ExpectNothingRunning();
}

TEST_F(Sequential, AShadowThatDiesDuringTheReplayIsSaidAndNothingIsLeft) {
  Start({"--shadow-args", "--exit-after-requests", "--shadow-args", "1"});
  ASSERT_TRUE(WaitServing()) << Err();
  SendThree();
  kill(pid_, SIGINT);
  Wait();
  const std::string err = Err();
  EXPECT_NE(err.find("the shadow server exited during the replay (code 3)"), std::string::npos) << err;
  EXPECT_NE(err.find("the shadow could not serve request seq-"), std::string::npos) << err;
  const Json t = TwinJson();
  EXPECT_EQ(t["replay"]["ok"], 1);
  EXPECT_EQ(t["replay"]["failed"].get<int>() + t["replay"]["not_sent"].get<int>(), 2);
  ExpectNothingRunning();
}

TEST_F(Sequential, APrimaryThatDiesMidServeStillGetsItsShadowReplay) {
  Start({"--primary-args", "--exit-after-requests", "--primary-args", "2"});
  ASSERT_TRUE(WaitServing()) << Err();
  for (int i = 0; i < 2; ++i) Post(port_, "/v1/x", "{}", "X-Request-Id: d-" + std::to_string(i) + "\r\n");
  Wait();  // the primary's exit ends the serving
  const std::string err = Err();
  EXPECT_NE(err.find("the primary server exited while serving (code 3)"), std::string::npos) << err;
  EXPECT_NE(err.find("the primary died while serving"), std::string::npos) << err;
  const auto shadow = Recorded("shadow");
  ASSERT_EQ(shadow.size(), 2u) << err;
  EXPECT_EQ(shadow[1]["id"], "d-1");
  ExpectNothingRunning();
}

TEST_F(Sequential, APortAlreadyTakenIsAClearErrorAndNothingIsLeft) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port_));
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  Start({});
  const int code = Wait();
  close(fd);
  EXPECT_EQ(code, 1);
  EXPECT_NE(Err().find("the mirror could not start"), std::string::npos) << Err();
  EXPECT_TRUE(Recorded("shadow").empty());
  ExpectNothingRunning();
}

TEST_F(Sequential, AShadowThatNeverBecomesHealthyIsSaidAndNothingIsLeft) {
  Start({"--health-timeout", "2", "--shadow-args", "--never-healthy"});
  ASSERT_TRUE(WaitServing()) << Err();
  Post(port_, "/v1/x");
  kill(pid_, SIGINT);
  const int code = Wait();
  EXPECT_EQ(code, 1);
  EXPECT_NE(Err().find("the shadow server did not answer GET /health with 200"), std::string::npos) << Err();
  EXPECT_TRUE(Recorded("shadow").empty());
  ExpectNothingRunning();
}

TEST_F(Sequential, FollowRunsTheScheduleFileInsteadOfAReplay) {
  Start({"--follow"});
  ASSERT_TRUE(WaitServing()) << Err();
  Post(port_, "/v1/x");
  kill(pid_, SIGINT);
  Wait();
  std::ifstream in(dir_ / "life.txt");
  std::string w, what;
  int64_t ns = 0;
  std::string followed;
  while (in >> w >> what >> ns)
    if (w == "follow") followed = what;
  EXPECT_EQ(followed, (dir_ / "run" / "schedule.jsonl").string()) << Err();
  EXPECT_TRUE(Recorded("shadow").empty()) << "no request replay: the schedule drives the shadow";
  EXPECT_NE(Err().find("a shadow follows the primary's schedule"), std::string::npos) << Err();
  ExpectNothingRunning();
}

}  // namespace
}  // namespace twinscope
