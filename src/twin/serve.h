// `twinscope twin --serve`: a primary and a shadow server of one command, each
// under its collector on its own port, health-checked, with the HTTP mirror
// (src/mirror) in front; runs until a signal, a duration, or a client
// function is done, then stops everything cleanly (mirror drained first, then
// the servers, SIGKILL only after a grace period). Main thread only.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "twin/twin_runner.h"

namespace twinscope::twin {

// Where a running serve answers, for ServeRequest::client.
struct ServeEndpoints {
  std::string mirror_url;   // "http://127.0.0.1:PORT": what clients should use
  std::string primary_url;  // the primary server itself (behind the mirror)
  std::string shadow_url;   // the shadow server itself; "" when it is not serving
};

struct ServeRequest {
  // The server command. "{port}" is replaced by each side's own port,
  // "{primary_port}" by the primary's, "{dir}" by out_dir; TWINSCOPE_PORT is
  // set to the side's port too.
  std::vector<std::string> command;
  std::vector<std::string> primary_args, shadow_args;  // appended to the command of each side (placeholders too)
  std::string out_dir, primary_library, shadow_library;
  EnvList primary_env, shadow_env;
  std::string listen = "127.0.0.1:8000";  // the mirror; port 0 picks a free one
  std::string health_path = "/health";
  std::chrono::milliseconds health_timeout{std::chrono::seconds(300)};
  std::chrono::milliseconds stop_grace{std::chrono::seconds(30)};
  // Before the servers are stopped, how long the stop request (format/stop_request.h) waits for every
  // traced process's summary.
  std::chrono::milliseconds stop_request_wait{std::chrono::seconds(10)};
  double duration_s = 0;  // > 0: stop after this long serving
  int max_requests = 0;   // > 0: stop once this many requests came through the mirror and ended
  uint64_t log_max_body_bytes = uint64_t{1} << 30;  // the request log's bound on body bytes (mirror.h)
  int shadow_device = -1;
  bool with_shadow = true;  // false: the primary alone behind the mirror (a shadow replays later)
  // The shadow follows the primary's schedule and exits at its end: on stopping, the primary gets SIGTERM
  // first and the shadow up to stop_grace to finish its last steps on its own before it gets SIGTERM.
  bool shadow_follows = false;
  bool progress = false;
  // Runs once both are healthy and the mirror listens, on this thread; the run
  // stops when it returns (the demo's built-in client). Empty: serve until a
  // signal or the duration.
  std::function<void(const ServeEndpoints& endpoints)> client;
};

// What the stop request got: traced processes still running when it was made, those that answered.
struct StopRequestOutcome {
  int asked = 0, answered = 0;
  std::vector<int> waiting;  // pids that did not answer in time
};

struct ServeOutcome {
  std::string error;                                 // why serving could not start (servers are stopped then)
  std::string primary_dir, shadow_dir, request_log;  // side folders (a trace per process each)
  StopRequestOutcome stop_request;
  ChildExit primary, shadow;
  bool primary_healthy = false, shadow_healthy = false;
  int primary_port = 0, shadow_port = 0;
  std::string mirror_url;
  nlohmann::json mirror_counters = nlohmann::json::object();
  std::vector<std::string> not_replayable;  // requests the log holds without their body (mirror.h)
  nlohmann::json autotune;                  // the shared autotune caches (twin/autotune_env.h), for twin.json
  int stop_signal = 0;                      // the signal that ended serving, 0 if none
};

ServeOutcome RunServe(const ServeRequest& request);

// The stop request (docs/trace-format.md): creates SIDE/.control/stop for
// each side folder and waits (at most `timeout`) until every traced process
// still running there has created its flushed-<pid> file. Says on stderr how
// many answered.
StopRequestOutcome RequestStopAndWait(const std::vector<std::string>& side_dirs, std::chrono::milliseconds timeout);

// One server a health wait waits for: the child, its port, and whether it may fail (exit or time out)
// without ending the wait.
struct HealthTarget {
  std::string name;  // "primary", "shadow": for the messages
  size_t child = 0;  // its index in the ChildGroup
  int port = 0;
  bool required = true;
  bool healthy = false;  // set by WaitForHealth
};

// How a health wait ended: every required target answered (and every optional one answered or exited),
// a forwarded signal, a required target that exited (answered or not: it is needed to serve), or the
// deadline with `target` (the first target, in order, that had not answered) still silent.
struct HealthWaitEnd {
  enum Kind { kHealthy, kSignal, kExited, kTimedOut } kind = kHealthy;
  size_t target = 0;  // kExited, kTimedOut: its index in the targets
  // kExited, kTimedOut: "the primary server exited (code 1) before it answered GET /health on port 41235"
  // / "the shadow server did not answer GET /health with 200 on port 41236 within 300 s: does it take
  // its port from {port} or TWINSCOPE_PORT? (--health-timeout to wait longer)".
  std::string message;
};

// Polls GET `path` on each target's port every 200 ms until the end above (the caller says it and stops
// what it started: the messages and stop actions are the caller's). Main thread only.
HealthWaitEnd WaitForHealth(ChildGroup& group, std::vector<HealthTarget>* targets, const std::string& path,
                            std::chrono::milliseconds timeout);

// Replaces the placeholders of ServeRequest::command in `arg`.
std::string ExpandPlaceholders(const std::string& arg, int port, int primary_port, const std::string& dir);

// GET http://127.0.0.1:port/path with a timeout; the status code, or 0 if no
// valid answer came.
int HttpGetStatus(int port, const std::string& path, std::chrono::milliseconds timeout);

// A TCP port on 127.0.0.1 free at the moment of asking (0 if none).
int FreeLoopbackPort();

}  // namespace twinscope::twin
