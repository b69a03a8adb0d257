// Headless Chromium driven through the DevTools protocol over a pipe (--remote-debugging-pipe), for
// the report's browser test and benchmark: load a file:// page, wait for a promise of the page,
// evaluate expressions, collect console errors and uncaught exceptions, take a full-page PNG.
// The binary is found at configure time (TWINSCOPE_CHROMIUM); the environment variable of that name
// overrides it. One Browser per test; not thread-safe.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace twinscope::testing_report {

// The Chromium binary, or "" when none was found (callers fail with InstallHint()).
std::string ChromiumPath();
std::string InstallHint();
std::string FileUrl(const std::string& path);

class Browser {
 public:
  Browser() = default;
  ~Browser();
  Browser(const Browser&) = delete;
  Browser& operator=(const Browser&) = delete;

  // Starts Chromium with a fresh profile and a viewport of width x height; false (see error()) if it
  // cannot be started or does not answer.
  bool Start(int width = 1400, int height = 1000);
  // Navigates and waits for the load event.
  bool Navigate(const std::string& url, double timeout_s = 60);
  // Evaluates a JavaScript expression in the page, awaiting it if it is a promise; the value (JSON), or
  // null with error() set if it threw or timed out.
  nlohmann::json Evaluate(const std::string& expression, double timeout_s = 60);
  // A PNG of the whole page (beyond the viewport) at the viewport's width.
  bool Screenshot(const std::string& png_path, double timeout_s = 60);

  // console.error / console.assert calls, uncaught exceptions and error-level log entries since Start.
  const std::vector<std::string>& console_errors() const { return console_errors_; }
  const std::string& error() const { return error_; }
  // CPU time (user + system) of all of Chromium's processes so far, including reaped helpers: what a
  // load costs on a machine busy with other work, where wall time says little.
  double CpuSeconds() const;
  // The tail of Chromium's own stderr, for failure messages.
  std::string LogTail() const;

 private:
  nlohmann::json Call(const std::string& method, nlohmann::json params, double timeout_s, bool session = true);
  bool ReadMessage(double timeout_s, nlohmann::json* out);
  void HandleEvent(const nlohmann::json& m);

  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string profile_, buffer_, session_, error_;
  int next_id_ = 1;
  bool loaded_ = false;
  std::vector<std::string> console_errors_;
};

std::string DecodeBase64(const std::string& in);

}  // namespace twinscope::testing_report
