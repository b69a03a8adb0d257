// What every view of the joined model shares: the launches' order, the launches
// whose blocks the views draw, a divergence region in words, and the bounds of
// the JSON form (docs/join.md; `stats --json` on a join, DIR/join.json, the
// report's data: src/views/join_doc.h; the text: src/views/join_text.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "join/join_model.h"

namespace twinscope::join {

struct JsonBounds {
  size_t max_launches = 0;       // slowest first; 0 = all (launches named by why_slow are always kept)
  size_t max_drift_rows = 0;     // 0 = all (drifting ranges first)
  size_t max_step_rows = 0;      // 0 = all
  size_t max_instance_rows = 0;  // the instance pairing, in order; 0 = all (summary.alignment has the counts)
  RequestJsonBounds requests;    // the per-request views ("requests"; 0 = all)
};

// Requests whose slowest matched target launch DetailSeqs adds to the views' block pictures.
inline constexpr size_t kRequestDetailLaunches = 16;

// Shadow seqs whose blocks the views draw: each group's reference and slow
// launches first, then one launch for each of the first requests (the
// slowest matched target launch of its steps, RequestDetailSeqs), then the
// slowest other launches, at most `max`.
std::vector<uint64_t> DetailSeqs(const JoinedModel& m, size_t max);

// A primary launch's duration (0 without a kernel record), and the model's match indices by it, slowest
// first (launches without timing last): the order of the views' launch lists.
uint64_t Dur(const PrimaryLaunch& p);
std::vector<size_t> SlowestFirst(const JoinedModel& m);

// One divergence region as one line of text.
std::string DivergenceText(const DivergenceRegion& d);

}  // namespace twinscope::join
