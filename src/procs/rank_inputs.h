// The rank comparison's inputs, from a joined pair of one rank (steps, target launches with their
// blocks) or from a primary trace alone (steps; `record` runs). CUDA-free.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "join/join_model.h"
#include "procs/ranks.h"
#include "twinscope/trace_reader.h"

namespace twinscope::procs {

// Steps from the model's step rows; target launches from its exact matches (primary duration, the
// shadow's block statistics) and its unmatched primary target launches (no blocks).
RankInput RankInputFromJoin(int64_t rank, const join::JoinedModel& m);

// Steps from a primary trace's kernel records (one pass): top-level range instance, GPU span, count
// and time of valid kernels. No target launches.
StatusOr<RankInput> RankInputFromTrace(int64_t rank, const std::string& path);

// RankInputFromTrace's sink, for a read that feeds other sinks too (the run's SQLite export): the steps
// of the kernel records it is given (`reader`: the trace's reader, for the ranges' names).
class StepSink : public RecordSink {
 public:
  explicit StepSink(const TraceReader& reader) : reader_(reader) {}
  void OnKernel(const KernelRecord& r) override;
  std::vector<RankStep> steps;  // in the order their first kernel was read

 private:
  const TraceReader& reader_;
  std::unordered_map<StringId, size_t> index_;
  std::unordered_map<std::string, size_t> by_top_;
};

}  // namespace twinscope::procs
