// What `twinscope join` and `twinscope twin` share: join two traces, write
// the joined outputs into a folder (join.json and every view that is built),
// print the summary, and `twinscope stats` on a join.
#pragma once

#include <string>

#include "join/join_model.h"

namespace twinscope::cli {

struct JoinOutputRequest {
  std::string primary, shadow;  // trace paths
  std::string out_dir;          // "" = write nothing, print only
  join::JoinOptions options;
  size_t top = 10;  // slowest launches printed
};

// Joins, writes, prints. Returns 0, or 1 if the traces cannot be joined.
// `model` (may be null) receives the joined model.
int JoinAndReport(const JoinOutputRequest& request, join::JoinedModel* model = nullptr);

// `twinscope stats` on a join: `path` is a twin/join folder (primary.tsc and
// shadow.tsc in it); `shadow` non-empty means `path` is the primary trace.
// Returns the exit code.
int StatsOnJoin(const std::string& path, const std::string& shadow, bool json, size_t top);

// The join options a twin run left in DIR/twin.json (defaults if none).
join::JoinOptions TwinOptions(const std::string& dir);

// True if `path` is a folder holding primary.tsc and shadow.tsc.
bool IsJoinFolder(const std::string& path);

}  // namespace twinscope::cli
