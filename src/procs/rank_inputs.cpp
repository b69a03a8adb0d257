// The rank comparison's inputs from a joined pair or from a primary trace (docs/join.md, "Ranks").
#include "procs/rank_inputs.h"

#include <algorithm>
#include <unordered_map>

#include "launchkey/launch_key.h"
#include "twinscope/trace_reader.h"

namespace twinscope::procs {
namespace {

std::string KeyOf(const std::string& path, const std::string& kernel, uint32_t ordinal) {
  return path + "|" + kernel + "|" + std::to_string(ordinal);
}

}  // namespace

void StepSink::OnKernel(const KernelRecord& r) {
  if ((r.flags & kFlagInvalidTimestamp) || !r.start_ns || !r.end_ns || r.end_ns < r.start_ns) return;
  auto it = index_.find(r.key.path);
  if (it == index_.end()) {
    it = index_.emplace(r.key.path, 0).first;
    const std::string top(TopLevelRange(reader_.String(r.key.path)));
    auto t = by_top_.find(top);
    if (t == by_top_.end()) {
      t = by_top_.emplace(top, steps.size()).first;
      steps.push_back(RankStep{top});
    }
    it->second = t->second;
  }
  RankStep& s = steps[it->second];
  ++s.kernels;
  s.kernel_ns += r.end_ns - r.start_ns;
  if (!s.first_start_ns || r.start_ns < s.first_start_ns) s.first_start_ns = r.start_ns;
  s.last_end_ns = std::max(s.last_end_ns, r.end_ns);
}

RankInput RankInputFromJoin(int64_t rank, const join::JoinedModel& m) {
  RankInput in;
  in.rank = rank;
  for (const auto& s : m.steps)
    in.steps.push_back(RankStep{s.range, s.first_start_ns, s.last_end_ns, s.kernels, s.kernel_ns});
  // Each target launch with a kernel record once: with the shadow's blocks where it matched exactly.
  std::vector<const stats::LaunchBlockStats*> blocks(m.primary.size(), nullptr);
  for (const auto& mt : m.matches)
    if (mt.kind == join::MatchKind::kExact) blocks[mt.primary] = &m.shadow[mt.shadow].blocks;
  for (size_t i = 0; i < m.primary.size(); ++i) {
    const join::PrimaryLaunch& p = m.primary[i];
    if (!p.have_kernel) continue;
    RankTargetLaunch t;
    t.range = TopLevelRange(p.path);
    t.kernel = p.demangled.empty() ? p.kernel : p.demangled;
    t.key = KeyOf(p.path, p.kernel, p.ordinal);
    t.dur_ns = p.end_ns - p.start_ns;
    t.grid = p.grid;
    if (blocks[i]) {
      t.have_blocks = blocks[i]->blocks_seen > 0;
      t.blocks = *blocks[i];
    }
    in.targets.push_back(std::move(t));
  }
  return in;
}

StatusOr<RankInput> RankInputFromTrace(int64_t rank, const std::string& path) {
  std::string error;
  auto reader = TraceReader::Open(path, &error);
  if (!reader) return Status::Error(error);
  StepSink sink(*reader);
  ReadReport report = reader->Read(sink);
  if (!report.ok() && report.records == 0) return Status::Error(report.message);
  RankInput in;
  in.rank = rank;
  in.steps = std::move(sink.steps);
  return in;
}

}  // namespace twinscope::procs
