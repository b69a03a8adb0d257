// The step schedule: what a primary demo server ran, step by step (which
// requests, how many tokens each), so that a follower can run exactly the
// same steps and both produce the same NVTX ranges and launch keys. One JSON
// object per line (docs/demo-server.md, "Schedule"):
//   {"type":"header","version":1,"model":{...},"block_size":16,...}
//   {"type":"step","step":0,"kind":"prefill","padded":57,"batch":[{"id":"r1","tokens":57,"max_tokens":48,"seed":...}],
//    "aborted":[],"finished":[],"name":"prefill step 0 [r1:57]","start_us":...,"dur_us":...}
//   {"type":"end","steps":N,"reason":"shutdown"}
// ScheduleLog holds the lines a primary publishes (file, and GET
// /v1/schedule); StepFeed hands lines to a follower's serving loop.
// CUDA-free and Boost-free.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "common/engine.h"
#include "common/model.h"

namespace twinscope::demo {

inline constexpr int kScheduleVersion = 1;

struct ScheduleHeader {
  int version = kScheduleVersion;
  ModelShape model;
  std::string engine;  // "gpu" / "cpu"
  int block_size = 0;
  int max_batch = 0;
  std::vector<int> graph_sizes;
  std::string started;  // ISO-8601 UTC
};

struct StepEntry {
  std::string id;
  int tokens = 0;  // prefill: the prompt's tokens; decode: 1
  // Prefill only (a sequence's first step): what a follower needs to run it.
  int max_tokens = 0;
  uint64_t seed = 0;  // sample seed
};

struct ScheduledStep {
  uint64_t index = 0;
  StepKind kind = StepKind::kDecode;
  int padded = 0;
  std::vector<StepEntry> batch;
  std::vector<std::string> aborted;    // released before this step (their clients went away)
  std::vector<std::string> finished;   // released after this step (reached max_tokens)
  std::string name;                    // StepName(kind, index, batch)
  int64_t start_us = -1, dur_us = -1;  // when it ran, microseconds after the server started (informational)
};

struct ScheduleEnd {
  uint64_t steps = 0;
  std::string reason;  // "shutdown", "engine error: ...", ...
};

struct ScheduleLine {
  enum class Type { kHeader, kStep, kEnd } type = Type::kStep;
  ScheduleHeader header;
  ScheduledStep step;
  ScheduleEnd end;
};

// "decode step 17 [r3:1,r5:1]": the NVTX range of a step. Equal schedules give
// equal names, so two servers in lockstep open identical ranges.
std::string StepName(StepKind kind, uint64_t index, const std::vector<StepEntry>& batch);

std::string FormatHeader(const ScheduleHeader& h);
std::string FormatStep(const ScheduledStep& s);
std::string FormatEnd(const ScheduleEnd& e);
// Parses one line; errors say which field is wrong.
StatusOr<ScheduleLine> ParseScheduleLine(std::string_view line);

// The schedule a primary publishes: the header, the last `keep_steps` step
// lines (older ones are dropped from memory, never from the file) and the end
// line. The file (if any) gets every line, flushed as it is written. Append
// and End are called by the serving loop; Read by HTTP handlers. Thread-safe.
class ScheduleLog {
 public:
  explicit ScheduleLog(size_t keep_steps = 100000) : keep_(keep_steps ? keep_steps : 1) {}
  ~ScheduleLog();
  Status OpenFile(const std::string& path);  // truncates

  void SetHeader(std::string line);
  void Append(uint64_t index, std::string line);  // index = the step's number, consecutive from 0
  void End(std::string line);

  struct Slice {
    std::string header;              // "" before SetHeader
    std::vector<std::string> steps;  // lines of steps from..from+steps.size()-1
    uint64_t next = 0;               // the step to ask for next
    bool ended = false;              // the end line is `end_line` and no step follows `next`
    std::string end_line;
    bool gone = false;  // `from` is older than the oldest step held (`oldest`)
    uint64_t oldest = 0;
  };
  Slice Read(uint64_t from, size_t max_steps) const;
  uint64_t steps() const;        // steps appended
  uint64_t file_errors() const;  // failed file writes (the server keeps running)

 private:
  void WriteFile(const std::string& line);

  mutable std::mutex mu_;
  size_t keep_;
  std::string header_;
  std::deque<std::string> lines_;
  uint64_t first_ = 0;  // index of lines_.front()
  bool ended_ = false;
  std::string end_line_;
  std::FILE* file_ = nullptr;
  std::string path_;
  uint64_t file_errors_ = 0;
};

// Schedule lines on their way to a follower's serving loop: pushed by a
// reader (a file, or the primary's GET /v1/schedule), taken by the loop.
// Thread-safe; `notify` (optional) is called after every Push/Close.
class StepFeed {
 public:
  void SetNotify(std::function<void()> notify);
  void Push(ScheduleLine line);
  // No more lines: ok = the schedule is complete, an error = the source failed.
  void Close(Status why);

  // The next line, if one is there (Front leaves it, Pop takes it).
  std::optional<ScheduleLine> Front() const;
  void Pop();
  // Closed and nothing left to take.
  bool drained() const;
  Status close_status() const;
  std::string source;  // "FILE" or "URL", for messages

 private:
  mutable std::mutex mu_;
  std::deque<ScheduleLine> lines_;
  bool closed_ = false;
  Status why_;
  std::function<void()> notify_;
};

// Reads a schedule file into `feed` and closes it: ok at its end, an error at
// the first line that does not parse (the lines before it are kept).
void ReadScheduleFile(const std::string& path, StepFeed& feed);

}  // namespace twinscope::demo
