// What `twinscope twin` and `twinscope demo` share: run a twin (batch or
// serving), then write twin.json and the joined views and print the summary.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/record_common.h"
#include "join/join_model.h"
#include "procs/pairing.h"
#include "twin/child_group.h"
#include "twin/serve.h"

namespace twinscope::cli {

struct TwinSetup {
  std::vector<std::string> kernels;
  BlocksSampling sampling;
  std::string out = "twinscope-twin";
  bool concurrent = false;
  int shadow_device = -1;
  size_t top = 10;
  std::vector<std::string> command;
  // Serving only.
  std::string listen = "127.0.0.1:8000";
  double duration = 0;
  double health_timeout = 300;
  std::string health_path = "/health";
  std::vector<std::string> primary_args, shadow_args;
  bool shadow_follows = false;  // the shadow follows the primary's schedule and exits at its end (serve.h)
  int max_requests = 0;         // --requests: stop serving after this many requests
  // Sequential serving (the default with --serve): the engine adapters (docs/engines.md) and the replay.
  std::string engine_adapter = "auto";  // --engine-adapter: auto, off or an adapter's name
  double follow_step_timeout = 60;      // the shadow adapter's wait for a step's requests
  double request_timeout = 600;         // one replayed request, connect to last byte
  std::string replay_dir;               // --replay DIR: a saved run's primary, a new shadow
  // The primary's request trace and step schedule, for per-request views (join/requests.h); "{dir}" is
  // the output folder. Empty: DIR/requests-primary.jsonl and DIR/schedule.jsonl if this run wrote them.
  std::string request_trace, schedule;
  // How a run of several processes is paired (docs/processes.md): --pair, --pair-by.
  procs::PairingOptions pairing;
};

// Batch twin: the primary, then (or with --concurrent, beside) the shadow.
// Returns the primary's exit code (1 if nothing could run).
int RunTwinAndJoin(const TwinSetup& setup);

// Serving twin (twin --serve). `client` (may be empty) runs once the mirror
// listens, with its URL; serving stops when it returns. `model` (may be
// null) receives the joined model.
int ServeTwinAndJoin(const TwinSetup& setup, const std::function<void(const twin::ServeEndpoints&)>& client,
                     join::JoinedModel* model);

// Sequential serving twin (twin --serve without --concurrent): the primary serves alone behind the
// mirror until the stop, then the shadow starts and the logged requests are replayed to it (or, with
// shadow_follows, it follows the primary's schedule file); then the join. With `replay_dir` set: only the
// shadow and the join, over a saved run. Returns the primary's exit code, 1 if the shadow could not serve.
int ServeSequentialAndJoin(const TwinSetup& setup);

// After a twin run of either kind: reports both sides' exits (and each
// process of a side that wrote several traces, and any shadow process that
// died), writes DIR/twin.json (plus `extra`), joins each side's main trace
// (format/run_dir.h MainTrace) and writes the views. Returns the primary's
// exit code (1 if there is nothing to join).
int FinishTwin(const TwinSetup& setup, const std::string& out_dir, const twin::ChildExit& primary,
               const twin::ChildExit& shadow, const std::string& primary_dir, const std::string& shadow_dir,
               bool shadow_skipped, const nlohmann::json& extra, join::JoinedModel* model);

}  // namespace twinscope::cli
