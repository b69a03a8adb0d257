// twinscope-demo-server as a process (--engine cpu, no GPU): the port line on
// stdout, requests through the client, SIGTERM finishing the requests in
// flight and ending the schedule, then a replay of that schedule file
// (--follow FILE --exit-after-schedule) that runs the same steps and exits 0;
// bad options exit 2 with a message.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "client/chat_client.h"
#include "demo_test_util.h"

namespace twinscope::demo {
namespace {

using Json = nlohmann::json;

struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;  // its stdout
  std::string err_path;
};

Child Spawn(const std::vector<std::string>& args, const std::string& err_path) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  Child c;
  c.err_path = err_path;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(fds[1], 1);
    FILE* err = std::fopen(err_path.c_str(), "w");
    if (err) dup2(fileno(err), 2);
    close(fds[0]);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  c.out = fdopen(fds[0], "r");
  return c;
}

int WaitExit(Child& c, int timeout_s = 20) {
  for (int i = 0; i < timeout_s * 100; ++i) {
    int status = 0;
    pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid) {
      if (c.out) std::fclose(c.out);
      c.out = nullptr;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    usleep(10000);
  }
  kill(c.pid, SIGKILL);
  waitpid(c.pid, nullptr, 0);
  return -1;
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Schedule lines without what differs between runs (times, start date, end reason).
std::vector<Json> Comparable(const std::string& path) {
  std::vector<Json> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    Json j = Json::parse(line);
    j.erase("start_us");
    j.erase("dur_us");
    j.erase("started");
    j.erase("reason");
    out.push_back(j);
  }
  return out;
}

TEST(DemoServerProcess, ServesStopsCleanlyAndReplaysItsSchedule) {
  const std::string dir = ::testing::TempDir() + "demo_proc_" + std::to_string(getpid());
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  const std::string schedule = dir + "/schedule.jsonl", replay = dir + "/replay.jsonl", trace = dir + "/trace.jsonl";
  Child server = Spawn({TWINSCOPE_DEMO_SERVER, "--engine", "cpu", "--model", "small", "--port", "0", "--cpu-step-us",
                        "500", "--schedule-out", schedule, "--trace-requests", trace},
                       dir + "/server.err");
  char line[256] = {};
  ASSERT_TRUE(std::fgets(line, sizeof line, server.out)) << Slurp(server.err_path);
  int port = 0;
  ASSERT_EQ(std::sscanf(line, "listening on 127.0.0.1:%d", &port), 1) << line;

  ChatLoadOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(port);
  o.requests = 8;
  o.max_tokens = 36;
  ChatLoadReport rep = RunChatLoad(o);
  EXPECT_EQ(rep.ok, 8) << rep.results[0].error;
  // A request in flight when SIGTERM comes is finished, not cut.
  o.requests = 1;
  o.max_tokens = 200;
  ChatLoadReport late;
  std::thread t([&] { late = RunChatLoad(o); });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  kill(server.pid, SIGTERM);
  t.join();
  EXPECT_EQ(WaitExit(server), 0) << Slurp(server.err_path);
  EXPECT_EQ(late.ok, 1) << late.results[0].error;
  EXPECT_EQ(late.results[0].tokens(), 200);
  const std::string err = Slurp(server.err_path);
  EXPECT_NE(err.find("SIGTERM: finishing the requests in flight"), std::string::npos) << err;
  auto lines = Comparable(schedule);
  ASSERT_GT(lines.size(), 36u);
  EXPECT_EQ(lines.back()["type"], "end");
  const std::string traced = Slurp(trace);
  EXPECT_EQ(std::count(traced.begin(), traced.end(), '\n'), 9);

  Child follower = Spawn({TWINSCOPE_DEMO_SERVER, "--engine", "cpu", "--model", "small", "--port", "0", "--cpu-step-us",
                          "0", "--follow", schedule, "--exit-after-schedule", "--schedule-out", replay},
                         dir + "/follower.err");
  EXPECT_EQ(WaitExit(follower), 0) << Slurp(follower.err_path);
  EXPECT_EQ(Comparable(replay), lines);
  EXPECT_NE(Slurp(follower.err_path).find("the followed schedule ended after"), std::string::npos);

  // A replay with another model shape refuses to run it.
  Child wrong = Spawn({TWINSCOPE_DEMO_SERVER, "--engine", "cpu", "--model", "1b", "--port", "0", "--follow", schedule,
                       "--exit-after-schedule"},
                      dir + "/wrong.err");
  EXPECT_EQ(WaitExit(wrong), 1);
  EXPECT_NE(Slurp(wrong.err_path).find("start it with the primary's --model"), std::string::npos)
      << Slurp(wrong.err_path);
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

TEST(DemoServerProcess, BadOptionsExit2WithAMessage) {
  const std::string err = ::testing::TempDir() + "demo_bad_" + std::to_string(getpid()) + ".err";
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  const Case cases[] = {
      {{"--engine", "cpu", "--model", "70b"}, "unknown model '70b'"},
      {{"--engine", "tpu"}, "--engine must be gpu or cpu"},
      {{"--engine", "cpu", "--kv-heads", "5"}, "kv_heads"},
      {{"--engine", "cpu", "--follow", "/nonexistent/schedule.jsonl"}, "cannot read the schedule"},
      {{"--engine", "cpu", "--follow", "http://h:99999"}, "out of range"},
      {{"--engine", "cpu", "--gpu-memory-fraction", "2"}, "--gpu-memory-fraction"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {TWINSCOPE_DEMO_SERVER, "--port", "0"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Child child = Spawn(args, err);
    EXPECT_EQ(WaitExit(child), 2) << c.says;
    EXPECT_NE(Slurp(err).find(c.says), std::string::npos) << Slurp(err);
  }
  std::remove(err.c_str());
}

}  // namespace
}  // namespace twinscope::demo
