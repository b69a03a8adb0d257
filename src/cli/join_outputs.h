// What `twinscope join` and `twinscope twin` share: join two traces, write
// the joined outputs into a folder (join.json and every view that is built),
// print the summary, and `twinscope stats` on a join.
#pragma once

#include <string>

#include "base/status.h"
#include "format/run_dir.h"
#include "join/join_model.h"
#include "join/record_log.h"

namespace twinscope::views {
struct DeferredReport;  // views/join_writer.h
}

namespace twinscope::cli {

struct JoinOutputRequest {
  std::string primary, shadow;  // trace paths
  std::string out_dir;          // "" = write nothing, print only
  join::JoinOptions options;
  size_t top = 10;  // slowest launches printed
};

// Joins, writes, prints. Returns 0, or 1 if the traces cannot be joined.
// `model` (may be null) receives the joined model. `defer_report` (may be
// null): the report is kept there, to be written once every pair of a run
// is joined (run_pairs.cpp), instead of written now.
int JoinAndReport(const JoinOutputRequest& request, join::JoinedModel* model = nullptr,
                  views::DeferredReport* defer_report = nullptr);

// `twinscope stats` on a join: `path` is a twin folder (primary/ and shadow/,
// or primary.tsc and shadow.tsc); `shadow` non-empty means `path` is the
// primary (a trace or a run folder). Returns the exit code.
int StatsOnJoin(const std::string& path, const std::string& shadow, bool json, size_t top);

// The joined model of the twin folder `dir` for the traces `primary` and
// `shadow`: its saved model (DIR/join.model, join/model_file.h) where that is
// there and not older than the traces, else a join of them (with DIR's
// twin.json options). Says which on stderr, in one line (`command`: "twinscope stats").
// A join fills `primary_log` (may be null) in its pass and sets *log_filled.
StatusOr<join::JoinedModel> SavedOrJoined(const std::string& dir, const std::string& primary, const std::string& shadow,
                                          const char* command, join::RecordLog* primary_log = nullptr,
                                          bool* log_filled = nullptr);

// The trace of one side that the join reads until processes are paired
// (format/run_dir.h MainTrace): `path` is a trace file, a run folder or a twin
// folder (`side`: "primary" or "shadow" picks the twin folder's side). When
// the side holds several traces, says on stderr which one and why
// (`command`: "twinscope join"). Error if no trace there has GPU work.
StatusOr<std::string> MainTraceOf(const std::string& path, const std::string& side, const char* command);

// The join options a twin run left in DIR/twin.json (defaults if none).
join::JoinOptions TwinOptions(const std::string& dir);

// True if `path` is a twin folder: primary/ and shadow/ side folders, or the
// older primary.tsc and shadow.tsc.
bool IsJoinFolder(const std::string& path);

}  // namespace twinscope::cli
