// What the mirror's end-to-end tests share: starting a Mirror on loopback, request bodies, waiting for
// shadow copies, and reading the request log.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mirror/mirror.h"
#include "upstream_server.h"

namespace twinscope::mirror::testing {

// A started Mirror on 127.0.0.1:<ephemeral> with 2 I/O threads, after `tweak`.
inline std::unique_ptr<Mirror> StartMirror(const std::string& primary, const std::string& shadow,
                                           const std::function<void(MirrorOptions&)>& tweak = {}) {
  MirrorOptions o;
  o.listen = "127.0.0.1:0";
  o.primary = primary;
  o.shadow = shadow;
  o.threads = 2;
  o.drain_timeout = std::chrono::seconds(5);
  if (tweak) tweak(o);
  auto m = std::make_unique<Mirror>(o);
  Status s = m->Start();
  EXPECT_TRUE(s.ok()) << s.message();
  return m;
}

// A request-log path of this process alone: ctest runs in several build
// directories at once must not remove or read each other's logs.
inline std::string TempLogPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name + "." + std::to_string(::getpid()) + ".jsonl";
}

inline std::string ChatBody(int i = 0) {
  return nlohmann::json{{"model", "demo"},
                        {"messages", {{{"role", "user"}, {"content", "hello " + std::to_string(i)}}}}}
      .dump();
}

// Waits until both sides of every request sent so far have ended (the
// client may have its reply a moment before the mirror has counted it).
inline void WaitForShadows(const Mirror& m) {
  EXPECT_TRUE(
      TestUpstream::WaitFor([&] { return m.counters().shadow_inflight == 0 && m.counters().primary_inflight == 0; },
                            std::chrono::seconds(10)));
}

// The request log's end lines (one per request, both sides' outcomes) in arrival order (call after the
// mirror has stopped: Wait() flushes the log). The request lines: request_log_test.cpp.
inline std::vector<nlohmann::json> ReadRequestLog(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.value("type", "") == "end") lines.push_back(std::move(j));
  }
  std::sort(lines.begin(), lines.end(), [](auto& a, auto& b) { return a["arrival_unix_us"] < b["arrival_unix_us"]; });
  return lines;
}

}  // namespace twinscope::mirror::testing
