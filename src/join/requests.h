// Per-request views of a joined serving run (docs/join.md, "Requests"): for
// each request a server handled, the steps it was in, the primary's kernel
// time in those steps, the target kernel's intervals there and the shadow
// launches matched to them. Fed by the server's request trace (the demo
// server's --trace-requests: one JSON line per request, its id and the
// indices of its steps) and, where there is one, its step schedule (batch
// and padding per step); a step's kernels are found by the index that leads
// its NVTX range name ("decode step 17 [..]"). CUDA-free; single-threaded.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace twinscope::join {

struct JoinedModel;

// One step of the server as the primary ran it.
struct ServedStep {
  uint64_t index = 0;
  std::string kind;     // "prefill" / "decode" (from the range name, else the schedule)
  int64_t batch = -1;   // requests in the step: the schedule's, else how many requests name it; -1 unknown
  int64_t padded = -1;  // the batch a decode step ran at (schedule only)
  int64_t tokens = -1;  // tokens the step fed (schedule only)
  std::string range;    // the primary's top-level range instance ("" = no kernel of the primary in it)
  uint64_t kernels = 0, kernel_ns = 0;              // the primary's kernels in the step (valid times)
  uint64_t targets = 0, target_ns = 0;              // of them, the target kernels
  uint64_t first_start_ns = 0, last_end_ns = 0;     // CUPTI clock; 0/0 without kernels
  std::vector<size_t> target_launches;              // indices in JoinedModel::primary, launch order
  std::vector<int64_t> target_matches;              // each one's index in JoinedModel::matches (-1: none)
  uint64_t shadow_exact = 0, shadow_time_only = 0;  // of those, matched in the shadow
};

// One request, as the server's request trace tells it, with what the join
// found in its steps.
struct ServedRequest {
  std::string id;
  int64_t status = 0;
  std::string finish_reason, error;
  int64_t prompt_tokens = -1, completion_tokens = -1, max_tokens = -1;
  int64_t queued_us = -1, first_token_us = -1, done_us = -1;  // after its arrival, as the server measured
  int64_t arrival_unix_us = -1;                               // its arrival, the server's CLOCK_REALTIME; -1 unknown
  int64_t prefill_step = -1;
  std::vector<uint64_t> steps;  // step indices, in order
  // Derived by the join.
  uint64_t prefill_steps = 0, decode_steps = 0;
  uint64_t steps_without_kernels = 0;               // its steps where the primary has no kernel
  uint64_t kernels = 0, kernel_ns = 0;              // the primary's kernels in its steps (shared with the step's batch)
  uint64_t kernel_share_ns = 0;                     // its share: each step's kernel time split by tokens fed
  uint64_t targets = 0, target_ns = 0;              // target kernel records in its steps
  uint64_t target_launches = 0;                     // target launches in its steps (with or without a kernel record)
  uint64_t shadow_exact = 0, shadow_time_only = 0;  // of those, matched in the shadow
  uint64_t first_start_ns = 0, last_end_ns = 0;     // its steps' GPU span, CUPTI clock (0/0: none)
  // Its arrival on the primary's CUPTI clock (JoinedModel::primary_to_realtime_ns); 0 unknown.
  uint64_t arrival_ns = 0;
};

struct RequestInputs {
  std::string trace;     // request trace (JSON lines); "" = no per-request views
  std::string schedule;  // step schedule (JSON lines); "" = none
};

struct RequestTable {
  bool present = false;  // a request trace was given
  std::string trace_path, schedule_path;
  std::vector<ServedRequest> requests;  // in the trace's order
  std::vector<ServedStep> steps;        // by index: every step a request names or the primary ran
  // Reading.
  uint64_t lines = 0, bad_lines = 0;  // request trace lines, those that are not a request
  std::string first_bad;              // "line 3: ..." of the first bad one
  uint64_t requests_left_out = 0;     // past kMaxRequests (counted, not kept)
  uint64_t schedule_steps = 0, schedule_bad_lines = 0;
  // Consistency.
  uint64_t steps_without_kernels = 0;          // steps named by requests with no primary kernel
  uint64_t primary_steps_without_request = 0;  // step ranges of the primary that no request names
  std::vector<std::string> warnings;

  static constexpr size_t kMaxRequests = 200000;
  static constexpr size_t kMaxStepsPerRequest = 1u << 20;
};

// The step index an NVTX range instance names: "decode step 17 [r3:1]#0" ->
// 17 and kind "decode" (kinds: prefill, decode, mixed: an engine step of
// prefill chunks and decode tokens); false for any other range (warmup,
// capture). Only the leading "<kind> step <N>" is read, so request ids (which may hold '/', ',' or ':') never
// matter.
bool ParseStepRange(std::string_view range, uint64_t* index, std::string* kind);

// Reads the inputs and builds m->requests from the model's steps, target
// launches and matches. Never fails: missing files and bad lines are counted
// and said in the table's warnings (and the model's).
void BuildRequestTable(JoinedModel* m, const RequestInputs& inputs);

// Shadow seqs whose blocks the views should draw for the requests: for each
// request (in order, at most `max_requests`), its slowest exactly matched
// target launch.
std::vector<uint64_t> RequestDetailSeqs(const JoinedModel& m, size_t max_requests);

// Bounds of the "requests" part of the join's JSON (written by views::MakeJoinDoc, src/views/join_doc.h).
struct RequestJsonBounds {
  size_t max_rows = 0;   // requests; 0 = all
  size_t max_steps = 0;  // steps, those of the kept requests first; 0 = all
};

}  // namespace twinscope::join
