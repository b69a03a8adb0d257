// A join as its views take it: the joined model, the primary's records kept
// from the join's one pass over the primary, and the block detail of the
// shadow launches the views draw, read in one more pass over the shadow. Every
// view of a join (join.json, Perfetto, Chrome, SQLite, the HTML report) takes
// this and reads no trace itself (docs/join.md, "Reads"). CUDA-free.
#pragma once

#include <string>
#include <vector>

#include "join/join_model.h"
#include "join/record_log.h"

namespace twinscope::join {

struct JoinedRun {
  JoinedModel model;
  RecordLog primary;
  std::vector<LaunchBlocks> detail;  // blocks of the launches the views draw, by seq once
  std::string detail_error;          // why the detail pass failed ("" if it did not)
};

// JoinTraces keeping the primary's records (at most `max_records`).
StatusOr<JoinedRun> JoinForViews(const std::string& primary_path, const std::string& shadow_path,
                                 const JoinOptions& options = {}, uint64_t max_records = kTimelineRecords);

// The detail pass over the shadow: the blocks of `seqs` into run->detail, and
// every record to `also` (may be null). A failed read leaves the detail empty
// and says why in run->detail_error.
ShadowDetail ReadDetail(JoinedRun* run, const std::vector<uint64_t>& seqs, RecordSink* also = nullptr);

// Seqs of `a` then those of `b` not in `a`.
std::vector<uint64_t> UnionSeqs(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);

}  // namespace twinscope::join
