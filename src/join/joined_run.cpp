// A join read for its views: one pass over each trace, one more over the shadow for block detail (join/joined_run.h).
#include "join/joined_run.h"

#include <unordered_set>

namespace twinscope::join {

StatusOr<JoinedRun> JoinForViews(const std::string& primary_path, const std::string& shadow_path,
                                 const JoinOptions& options, uint64_t max_records) {
  JoinedRun run{JoinedModel{}, RecordLog(max_records), {}, {}};
  auto m = JoinTraces(primary_path, shadow_path, options, &run.primary);
  if (!m.ok()) return m.status();
  run.model = std::move(*m);
  return run;
}

ShadowDetail ReadDetail(JoinedRun* run, const std::vector<uint64_t>& seqs, RecordSink* also) {
  auto d = ReadShadowDetail(run->model.shadow_path, seqs, also);
  if (!d.ok()) {
    run->detail.clear();
    run->detail_error = d.status().message();
    return {};
  }
  run->detail = std::move(d->launches);
  run->detail_error.clear();
  ShadowDetail rest;
  rest.report = d->report;
  rest.header = std::move(d->header);
  return rest;
}

std::vector<uint64_t> UnionSeqs(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  std::vector<uint64_t> out = a;
  std::unordered_set<uint64_t> seen(a.begin(), a.end());
  for (uint64_t s : b)
    if (seen.insert(s).second) out.push_back(s);
  return out;
}

}  // namespace twinscope::join
