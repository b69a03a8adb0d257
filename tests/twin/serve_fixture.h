// What the `twin --serve` tests share (serve_test.cpp, sequential_test.cpp): a fixture that runs
// `twinscope twin --serve` over test_server.cpp's servers, a POST client, and what the servers recorded.
#pragma once

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
#include "twin/serve.h"

extern char** environ;

namespace twinscope::serve_testing {

namespace fs = std::filesystem;

using testutil::Slurp;

// POST to 127.0.0.1:port; returns the whole response ("" if none).
inline std::string Post(int port, const std::string& path, const std::string& body = "{}",
                        const std::string& headers = "") {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  std::string got;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    std::string req = "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\n" + headers + "Connection: close\r\n\r\n" + body;
    send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return got;
}

inline bool Alive(const fs::path& pid_file) {
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

  void Start(std::vector<std::string> args, std::vector<std::string> server_args = {},
             std::vector<std::string> env = {}, bool serve = true) {
    std::vector<std::string> argv = {TWINSCOPE_BIN, "twin", "--kernel", "k"};
    if (serve) {
      for (const std::string& a : {std::string("--serve"), std::string("-o"), (dir_ / "run").string(),
                                   std::string("--listen"), "127.0.0.1:" + std::to_string(port_)})
        argv.push_back(a);
    }
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--");
    argv.push_back(TEST_SERVER_BIN);
    argv.push_back("--pid-file");
    argv.push_back((dir_ / "{port}.pid").string());
    for (const std::string& a : {std::string("--record"), (dir_ / "record.jsonl").string(), std::string("--life"),
                                 (dir_ / "life.txt").string()})
      argv.push_back(a);
    argv.insert(argv.end(), server_args.begin(), server_args.end());
    env.push_back("TWINSCOPE_LIB_DIR=" + (dir_ / "lib").string());
    const auto envs = testutil::EnvironmentWithout({"TWINSCOPE_", "PYTHONPATH"}, env);
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

// The JSON lines of a file.
inline std::vector<nlohmann::json> JsonLines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<nlohmann::json> v;
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) v.push_back(nlohmann::json::parse(l));
  return v;
}

}  // namespace twinscope::serve_testing
