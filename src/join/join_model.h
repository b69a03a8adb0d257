// The joined model: one primary trace (CUPTI collector) and one shadow trace
// (block probe) matched launch by launch (docs/join.md). Every view (stats
// text and JSON, Chrome/Perfetto, SQLite, the HTML report) reads this model
// and never matches anything itself. CUDA-free; single-threaded; a model is
// plain data once built.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "join/requests.h"
#include "stats/block_stats.h"
#include "stats/trace_stats.h"
#include "twinscope/records.h"

namespace twinscope::join {

enum class MatchKind : uint8_t { kExact = 0, kTime = 1 };
const char* MatchKindName(MatchKind k);

// One launch of a target kernel in the primary (a launch record, a kernel
// record, or both tied by correlation id and key).
struct PrimaryLaunch {
  std::string kernel;     // name as in the launch key (mangled where known)
  std::string demangled;  // for display ("" if unknown)
  std::string path;       // key path
  uint32_t ordinal = 0;
  uint64_t hash = 0;
  Dim3 grid{0, 0, 0}, block{0, 0, 0};
  uint64_t cpu_ns = 0;                // launch API entry, CUPTI clock (0 if no launch record)
  bool have_kernel = false;           // a valid kernel record (timing) is attached
  uint64_t start_ns = 0, end_ns = 0;  // GPU interval, CUPTI clock
  uint32_t stream = 0, device = 0;
  bool graph = false;
  bool overlapped = false;  // ran inside the shadow's active window (concurrent twins)
};

// One traced launch of the shadow, with its block statistics.
struct ShadowLaunch {
  uint64_t seq = 0;
  std::string kernel;
  std::string path;
  uint32_t ordinal = 0;
  uint64_t hash = 0;
  Dim3 grid{0, 0, 0}, block{0, 0, 0};
  uint64_t cpu_ns = 0;  // launch time, CLOCK_MONOTONIC of the shadow
  uint32_t stream = 0;
  stats::LaunchBlockStats blocks;
  std::vector<uint64_t> block_durations;  // sorted ascending (valid blocks)
  uint64_t blocks_working = 0;            // set by why-slow, relative to its group's reference
};

struct Match {
  MatchKind kind = MatchKind::kExact;
  size_t shadow = 0;   // index in JoinedModel::shadow
  size_t primary = 0;  // index in JoinedModel::primary
  bool shape_differs = false;
  bool ambiguous = false;
};

struct Summary {
  uint64_t shadow_launches = 0;
  uint64_t exact = 0, exact_shape_differs = 0, exact_ambiguous = 0;
  uint64_t time_only = 0;
  uint64_t unmatched_shadow = 0;
  uint64_t primary_target_launches = 0;
  uint64_t primary_target_unmatched = 0;
  uint64_t primary_target_without_kernel = 0;  // launch records whose kernel record is missing
  uint64_t shadow_without_blocks = 0;          // traced launches whose block records never arrived
  uint64_t time_only_evaluated = 0, time_only_agree = 0;
  uint64_t overlapped_primary_kernels = 0;
  // How the overlap flag was computed (concurrent twins), CLOCK_REALTIME ns:
  // the shadow's window and the primary's kernels after clock conversion.
  struct Overlap {
    bool computed = false;
    int64_t window_start = 0, window_end = 0;
    int64_t primary_first_kernel = 0, primary_last_kernel = 0;
    int64_t primary_to_realtime = 0;  // added to the primary's CUPTI timestamps
    std::string clock;                // where that offset came from
  } overlap;
  std::vector<std::string> target_kernels;
};

struct DriftRow {
  std::string range;  // top-level NVTX range instance ("" = outside any range)
  uint64_t exact = 0, time_only = 0, unmatched = 0, shape_differs = 0;
};

struct StepRow {
  std::string range;  // top-level range instance of the primary's kernels
  uint64_t kernels = 0, kernel_ns = 0, target_ns = 0;
  uint64_t targets = 0;                          // target kernel records (valid times) in the range
  uint64_t first_start_ns = 0, last_end_ns = 0;  // CUPTI clock, over the range's valid kernels
};

enum Verdict : uint32_t {
  kVerdictFewerBlocks = 1u << 0,
  kVerdictFewerSms = 1u << 1,
  kVerdictReordered = 1u << 2,
  kVerdictStraggler = 1u << 3,
};
std::vector<std::string> VerdictNames(uint32_t verdicts);  // empty -> {"none"}

struct SlowLaunch {
  size_t match = 0;  // index in JoinedModel::matches
  uint64_t dur_ns = 0;
  double ratio = 0;  // dur / group median
  uint32_t verdicts = 0;
  std::string text;  // one sentence for people
};

// Launches of one target kernel with one shape, ranked by primary duration.
struct ShapeGroup {
  std::string kernel;
  Dim3 grid{0, 0, 0}, block{0, 0, 0};
  uint64_t launches = 0;
  uint64_t median_dur_ns = 0;
  size_t reference = 0;  // match index of the median launch
  std::vector<SlowLaunch> slow;
};

struct TraceSide {
  stats::TraceStats stats;  // counts, loss, read report of that trace (no per-launch detail)
  uint64_t launches = 0;    // launch records in the file
};

struct JoinOptions {
  // The shadow ran concurrently with the primary: flag primary kernels inside
  // the shadow's active window.
  bool concurrent = false;
  // Shadow's active window in CLOCK_REALTIME ns; 0/0 = estimate from the
  // shadow trace (header start to its last launch plus its last block span).
  uint64_t shadow_window_start_realtime_ns = 0, shadow_window_end_realtime_ns = 0;
  // The primary process's lifetime (CLOCK_REALTIME ns), 0/0 if unknown: a
  // check of the primary's clock conversion.
  uint64_t primary_start_realtime_ns = 0, primary_end_realtime_ns = 0;
  size_t slow_per_group = 5;
  size_t min_group_launches = 3;
  // A serving run's request trace (and schedule): per-request views (join/requests.h).
  RequestInputs requests;
  // What reading the options assumed (e.g. a twin folder's missing twin.json): the model's warnings start with these.
  std::vector<std::string> warnings;
};

struct JoinedModel {
  std::string primary_path, shadow_path;
  TraceSide primary_side, shadow_side;
  JoinOptions options;
  std::vector<PrimaryLaunch> primary;     // target kernels' launches, in launch order
  std::vector<ShadowLaunch> shadow;       // traced launches, by seq
  std::vector<Match> matches;             // by shadow seq
  std::vector<size_t> shadow_unmatched;   // indices in shadow
  std::vector<size_t> primary_unmatched;  // indices in primary
  Summary summary;
  std::vector<DriftRow> drift;        // by first appearance
  std::vector<StepRow> steps;         // by first appearance
  std::vector<ShapeGroup> groups;     // by kernel, then launches descending
  RequestTable requests;              // per-request views (empty unless options.requests.trace)
  uint64_t primary_t0_ns = 0;         // earliest valid primary kernel start (for relative times)
  std::vector<std::string> warnings;  // damaged inputs, missing pieces: one line each
  // Added to the primary's CUPTI timestamps gives CLOCK_REALTIME: the primary
  // header's clock pair; 0 without one (CUPTI's clock taken as realtime).
  int64_t primary_to_realtime_ns = 0;
};

// Reads both traces and joins them. Fails only if a trace cannot be opened
// (missing, bad magic or version) or the roles are wrong; damaged or
// truncated inputs are joined as far as they can be read, and say so in
// `warnings`.
StatusOr<JoinedModel> JoinTraces(const std::string& primary_path, const std::string& shadow_path,
                                 const JoinOptions& options = {});

// Block records of chosen shadow launches (by seq), read again from the shadow
// trace for the views that draw blocks. Bounded by the caller.
struct LaunchBlocks {
  uint64_t seq = 0;
  std::vector<BlockRecord> blocks;  // in arrival order
};
StatusOr<std::vector<LaunchBlocks>> ReadShadowBlocks(const std::string& shadow_path, const std::vector<uint64_t>& seqs);

}  // namespace twinscope::join
