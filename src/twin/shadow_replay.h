// The second half of sequential serving (`twin --serve` on one GPU, `twin --replay DIR`): after the primary
// has stopped, the shadow server starts under the block probe on a port of its own, twinscope waits for its
// health, replays the mirror's request log to it (mirror/replay.h) with progress and an ETA on stderr, then
// stops it (the stop request, SIGTERM, SIGKILL after a grace period). Main thread only.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "twin/serve.h"
#include "twin/twin_runner.h"

namespace twinscope::twin {

struct ShadowReplayRequest {
  std::vector<std::string> command, shadow_args;  // placeholders as in ServeRequest
  std::string out_dir, shadow_library;
  EnvList shadow_env;
  std::string request_log;  // the mirror's log of the primary's run
  int primary_port = 0;     // for {primary_port} (the primary is gone by now)
  int shadow_device = -1;
  std::string health_path = "/health";
  std::chrono::milliseconds health_timeout{std::chrono::seconds(300)};
  std::chrono::milliseconds stop_grace{std::chrono::seconds(30)};
  std::chrono::milliseconds stop_request_wait{std::chrono::seconds(10)};
  std::chrono::milliseconds request_timeout{std::chrono::minutes(10)};
  // true: a forcing adapter holds each step until its requests arrived, so they go all at once (in arrival
  // order); false: at their logged arrival offsets.
  bool all_at_once = false;
  // The shadow follows the primary's schedule file by itself (twinscope-demo-server --follow FILE
  // --exit-after-schedule, as `twinscope demo` runs it): no health wait, no replay; it is waited for.
  bool follow_schedule = false;
  bool progress = false;
};

struct ShadowReplayOutcome {
  std::string error;  // the shadow could not serve (not started, never healthy): said, nothing to replay to
  ChildExit shadow;
  bool healthy = false;
  int shadow_port = 0;
  StopRequestOutcome stop_request;
  size_t logged = 0, replayable = 0, ok = 0, cancelled = 0, failed = 0, not_sent = 0;
  bool shadow_died = false;         // the shadow exited during the replay
  bool aborted = false;             // a signal stopped the replay
  nlohmann::json replay = nullptr;  // mirror::ReplayOutcome::ToJson, for twin.json
};

ShadowReplayOutcome RunShadowReplay(const ShadowReplayRequest& request);

}  // namespace twinscope::twin
