// `twinscope twin --serve` end to end with two small test servers
// (test_server.cpp): start, health wait, the mirror in front, a clean stop on
// SIGINT or --duration, a shadow that dies, a primary that never becomes
// healthy. The servers make no CUDA calls, so the collector libraries only
// have to exist, and no trace is written (the run then says there is nothing
// to join).
#include "twin/serve.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../testutil/spawn.h"

extern char** environ;

namespace twinscope {
namespace {

namespace fs = std::filesystem;

using testutil::Slurp;

// POST to 127.0.0.1:port; returns the whole response ("" if none).
std::string Post(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  std::string got;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    std::string req = "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return got;
}

bool Alive(const fs::path& pid_file) {
  std::ifstream f(pid_file);
  pid_t pid = 0;
  return (f >> pid) && pid > 0 && kill(pid, 0) == 0;
}

class Serve : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("twinscope_serve_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "lib");
    std::ofstream(dir_ / "lib" / "libtwinscope_cupti.so").put('x');
    std::ofstream(dir_ / "lib" / "libtwinscope_blocks.so").put('x');
    port_ = twin::FreeLoopbackPort();
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    fs::remove_all(dir_);
  }

  void Start(std::vector<std::string> args) {
    std::vector<std::string> argv = {TWINSCOPE_BIN,
                                     "twin",
                                     "--serve",
                                     "--kernel",
                                     "k",
                                     "-o",
                                     (dir_ / "run").string(),
                                     "--listen",
                                     "127.0.0.1:" + std::to_string(port_)};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--");
    argv.push_back(TEST_SERVER_BIN);
    argv.push_back("--pid-file");
    argv.push_back((dir_ / "{port}.pid").string());
    const auto envs = testutil::EnvironmentWithout({"TWINSCOPE_"}, {"TWINSCOPE_LIB_DIR=" + (dir_ / "lib").string()});
    const std::string out = (dir_ / "stdout.txt").string(), err = (dir_ / "stderr.txt").string();
    pid_ = testutil::SpawnWithOutput(argv, envs, out, err);
    ASSERT_GT(pid_, 0);
  }

  // Waits until the mirror answers (its own /health), up to 30 s.
  bool WaitServing() {
    for (int i = 0; i < 300; ++i) {
      if (twin::HttpGetStatus(port_, "/health", std::chrono::seconds(1)) == 200) return true;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 1000;
        pid_ = 0;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  int Wait() {
    if (pid_ <= 0) return code_;
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
  }

  std::vector<fs::path> PidFiles() {
    std::vector<fs::path> v;
    for (auto& e : fs::directory_iterator(dir_))
      if (e.path().extension() == ".pid") v.push_back(e.path());
    return v;
  }
  std::string Err() { return Slurp(dir_ / "stderr.txt"); }

  fs::path dir_;
  int port_ = 0;
  pid_t pid_ = 0;
  int code_ = -1;
};

TEST_F(Serve, MirrorsRequestsAndStopsEverythingOnSigint) {
  Start({});
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
  // The request log holds one line per request, with both sides' outcomes.
  std::ifstream log(dir_ / "run" / "requests.jsonl");
  int lines = 0;
  for (std::string l; std::getline(log, l);) ++lines;
  EXPECT_EQ(lines, 3);
}

TEST_F(Serve, ShadowThatDiesNeverReachesTheClient) {
  Start({"--shadow-args", "--exit-after-requests", "--shadow-args", "1"});
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
