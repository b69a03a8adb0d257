// What the joined timeline views (Perfetto, Chrome) draw of the shadow's
// blocks: which matched launches get every block (BlockBounds), and the
// linear map of a launch's shadow block times onto its primary kernel's
// interval. Shared so both views draw the same launches the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "views/export/join/join_export.h"

namespace twinscope::exporters {

struct BlockPlan {
  std::vector<size_t> timed;                   // matches whose primary kernel has an interval, by its start
  std::unordered_map<uint64_t, size_t> drawn;  // shadow seq -> match index, launches drawn with blocks
  std::vector<uint64_t> drawn_seqs;            // the same seqs, in selection order (for ReadShadowBlocks)
  BlockDetailCounts counts;                    // launches_* filled; blocks_* by the view
};
BlockPlan PlanBlocks(const join::JoinedModel& m, const BlockBounds& bounds);

// The plan with the run's block detail: launches whose blocks the detail pass
// did not bring (it failed, or was not asked for them) are drawn as spans and
// counted over bounds; a failed pass adds one warning.
BlockPlan PlanWithDetail(const join::JoinedRun& run, const BlockBounds& bounds, std::vector<std::string>* warnings);

// Where a primary kernel record sits (GPU, stream, interval): how a view that
// streams the primary finds the target launch of the model a record is.
struct KernelSpot {
  uint32_t device = 0, stream = 0;
  uint64_t start = 0, end = 0;
  bool operator==(const KernelSpot&) const = default;
};
struct KernelSpotHash {
  size_t operator()(const KernelSpot& k) const {
    return std::hash<uint64_t>{}(k.start * 0x9e3779b97f4a7c15ull ^ k.end ^ (uint64_t{k.device} << 48) ^ k.stream);
  }
};
inline KernelSpot SpotOf(const join::PrimaryLaunch& p) { return {p.device, p.stream, p.start_ns, p.end_ns}; }
inline KernelSpot SpotOf(const KernelRecord& r) { return {r.device, r.stream, r.start_ns, r.end_ns}; }

// Maps shadow block times of one launch, [first enter, last exit], linearly
// onto [start, end] of the primary kernel it matched. Instrumentation
// stretches shadow times (docs/block-probe.md): the map keeps order and
// relative position, not absolute durations.
struct TimeMap {
  uint64_t src0 = 0, src_span = 0;        // shadow: first block entry, span
  uint64_t dst0 = 0, dst_span = 0;        // primary kernel: start, duration
  uint64_t operator()(uint64_t t) const;  // clamped into [dst0, dst0 + dst_span]
  double Scale() const { return src_span ? static_cast<double>(dst_span) / static_cast<double>(src_span) : 0.0; }
};
TimeMap MapOntoKernel(const join::ShadowLaunch& s, const join::PrimaryLaunch& p);

// The args both views give a matched launch's span: match, key, the
// shadow's block statistics and the time scale.
struct LaunchArg {
  const char* name;
  std::variant<uint64_t, double, bool, std::string> value;
};
std::vector<LaunchArg> LaunchArgs(const join::JoinedModel& m, size_t match, const TimeMap& map, bool blocks_drawn);

// The span's name: the kernel's, marked where the match is by time only.
std::string LaunchName(const join::JoinedModel& m, size_t match);

// Name of a GPU's block track group, saying how much was drawn.
std::string BlockGroupName(uint32_t device, const std::string& device_name, const BlockDetailCounts& c);

// 1234567 -> "1,234,567".
std::string CountText(uint64_t n);

// One sentence for track names and args: how block times were placed.
inline constexpr const char* kScaledNote =
    "shadow block times scaled onto the primary kernel's interval (instrumentation stretches them): compare order "
    "and relative times, not absolute durations";

}  // namespace twinscope::exporters
