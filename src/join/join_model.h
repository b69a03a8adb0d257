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
#include "join/name.h"
#include "join/requests.h"
#include "stats/block_stats.h"
#include "stats/trace_stats.h"
#include "twinscope/records.h"

namespace twinscope::join {

// exact: aligned, same kernel, shape and (normalized) range path; diverged:
// aligned at the same place but another shape or range (the shadow did other
// work there); time: no aligned counterpart, nearest in time (labelled).
enum class MatchKind : uint8_t { kExact = 0, kTime = 1, kDiverged = 2 };
const char* MatchKindName(MatchKind k);

// One launch of a target kernel in the primary (a launch record, a kernel
// record, or both tied by correlation id and key). Fields ordered to pack: 96
// bytes a launch (ten million of them in issue 31's scale: docs/join.md, "Reads").
struct PrimaryLaunch {
  Name kernel;                        // name as in the launch key (mangled where known)
  Name demangled;                     // for display ("" if unknown)
  Name path;                          // key path
  uint64_t hash = 0;                  // launch key hash
  uint64_t cpu_ns = 0;                // launch API entry, CUPTI clock (0 if no launch record)
  uint64_t start_ns = 0, end_ns = 0;  // GPU interval, CUPTI clock
  Dim3 grid{0, 0, 0}, block{0, 0, 0};
  uint32_t ordinal = 0;
  uint32_t stream = 0, device = 0;
  bool have_kernel = false;  // a valid kernel record (timing) is attached
  bool graph = false;
  bool overlapped = false;  // ran inside the shadow's active window (concurrent twins)
};
static_assert(sizeof(PrimaryLaunch) <= 96, "PrimaryLaunch grew: ten million of them are the join's largest array");

// One traced launch of the shadow, with its block statistics.
struct ShadowLaunch {
  uint64_t seq = 0;
  Name kernel;
  Name path;
  uint32_t ordinal = 0;
  uint64_t hash = 0;
  Dim3 grid{0, 0, 0}, block{0, 0, 0};
  uint64_t cpu_ns = 0;  // launch time, CLOCK_MONOTONIC of the shadow
  uint32_t stream = 0;
  stats::LaunchBlockStats blocks;
  // The valid blocks' durations, sorted ascending: all of them up to 64 blocks, else 64 evenly ranked order
  // statistics standing for block_durations_of blocks (point i is the duration of rank i * of / 64).
  std::vector<uint64_t> block_durations;
  uint64_t block_durations_of = 0;
  uint64_t blocks_working = 0;  // set by why-slow, relative to its group's reference
};

struct Match {
  MatchKind kind = MatchKind::kExact;
  size_t shadow = 0;   // index in JoinedModel::shadow
  size_t primary = 0;  // index in JoinedModel::primary
  bool shape_differs = false;
  bool ambiguous = false;   // inside a divergence region that could sit at several places
  int32_t region = -1;      // index in JoinedModel::divergences, -1 = none
  bool autotuning = false;  // a diverged pair of two shapes an autotuner benchmarked: another final choice
};

// A stretch where the shadow did other work than the primary: between two
// aligned exact pairs, launches paired at the same place with another shape
// or range (diverged), shadow launches without an aligned counterpart and
// primary launches the shadow did not make (docs/join.md, "Divergence").
struct DivergenceRegion {
  uint64_t shadow_launches = 0, primary_launches = 0;
  uint64_t diverged = 0;  // pairs at the same place, of which other_shape have another grid/block
  uint64_t other_shape = 0;
  uint64_t inserted = 0;                       // shadow launches without an aligned counterpart
  uint64_t deleted = 0;                        // primary launches without an aligned counterpart
  uint64_t other_kernels = 0;                  // of those, launches of a kernel the other side has not in this region
  uint64_t first_seq = 0, last_seq = 0;        // shadow seqs (valid if shadow_launches)
  size_t first_primary = 0, last_primary = 0;  // indices in primary (valid if primary_launches)
  std::string shadow_from, shadow_to;          // top-level ranges of its first and last shadow launch
  std::string primary_from, primary_to;        // ... and primary launch
  size_t positions = 1;  // > 1: an equal result had the region at that many places (repeated identical steps)
  // Launches an autotuner made here (docs/join.md, "Autotuning"): benchmark launches without a counterpart on
  // each side, and diverged pairs of another final choice. Not counted as extra or missing work.
  uint64_t autotuning_shadow = 0, autotuning_primary = 0, autotuning_pairs = 0;
};

// Which range instance of the primary the alignment paired with which of the shadow's (docs/join.md,
// "Alignment"): one row per instance of either side, in order.
struct InstancePair {
  int64_t primary = -1, shadow = -1;      // instance index on each side, -1 = none
  std::string primary_name, shadow_name;  // the instance's path prefix as each trace names it
  uint64_t primary_launches = 0, shadow_launches = 0;
  std::string cls;       // "same" (equal launches), "differs", "primary_only", "shadow_only"
  bool bounded = false;  // past the search's work bound: matched within the instance in order
};

// Why the twins diverged, in words, with the remedy where there is one.
struct DivergenceReason {
  std::string code;    // "autotuning", "batching", "step_count", "extra_work", "missing_work", "shadow_cut"
  std::string text;    // what the traces show
  std::string remedy;  // "" if none
};

struct Summary {
  uint64_t shadow_launches = 0;
  uint64_t exact = 0;
  uint64_t diverged = 0, diverged_shape = 0;  // aligned pairs of other work; of those, another grid/block
  uint64_t time_only = 0;
  uint64_t unmatched_shadow = 0;
  uint64_t primary_target_launches = 0;
  uint64_t primary_target_unmatched = 0;
  uint64_t primary_target_without_kernel = 0;  // launch records whose kernel record is missing
  uint64_t shadow_without_blocks = 0;          // traced launches whose block records never arrived
  uint64_t time_only_evaluated = 0, time_only_agree = 0;
  uint64_t overlapped_primary_kernels = 0;
  uint64_t in_divergence = 0;  // shadow launches inside divergence regions (any class)
  uint64_t primary_in_divergence = 0;
  uint64_t ambiguous = 0;  // shadow launches inside regions with several equal placements
  uint64_t ambiguous_regions = 0;
  // How the sequences were aligned (join/align.h).
  struct Alignment {
    bool identical = false;  // equal token sequences: paired one to one
    uint64_t anchors = 0, segments = 0, capped_segments = 0, capped_launches = 0, max_d = 0;
    bool sampled = false;  // the shadow sampled: primary-only stretches are expected, not divergence
    uint64_t depth = 1;    // range depth of the aligned instances (1 = top level)
    uint64_t instances_primary = 0, instances_shadow = 0, instance_pairs = 0, bounded_instances = 0;
  } alignment;
  // Launches an autotuner made (summed over the regions), and diverged pairs of another final choice.
  uint64_t autotuning_shadow = 0, autotuning_primary = 0, autotuning_pairs = 0;
  // Top-level ranges whose target launches are all an autotuner's (left out of the step counts), per side.
  uint64_t autotuning_ranges_primary = 0, autotuning_ranges_shadow = 0;
  bool autotuning_one_sided = false;  // primary-only candidates: the primary tuned, the shadow reused its choice
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
  uint64_t exact = 0, diverged = 0, time_only = 0, unmatched = 0, shape_differs = 0;
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
  uint64_t mad_ns = 0;   // median absolute deviation of the durations
  std::vector<SlowLaunch> slow;
  std::string note;  // when no launch stands out: one line saying so
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
  // Regular expressions whose matches' digits are replaced in range names
  // before the alignment compares them (besides the built-in XLA, pointer, pid
  // and step-number rules and TWINSCOPE_NORMALIZE_RANGE): `--normalize-range`.
  std::vector<std::string> normalize_range;
  // Segments between anchors that differ by more edits than this are matched
  // greedily by key instead (and said in warnings).
  size_t align_max_d = 2000;
  // A serving run's request trace (and schedule): per-request views (join/requests.h).
  RequestInputs requests;
  // The twins served requests (`twin --serve`, `twinscope demo`; twin.json's "serve"): the reasons speak of a
  // server's batches even without a request trace or step ranges (a server without an engine adapter).
  bool serving = false;
  // join.sqlite's `blocks` table holds every shadow block (`--sqlite-blocks all`), not only those of the
  // launches people query (docs/sqlite-schema.md, "Bounds"). An output choice: not saved in join.model.
  bool sqlite_all_blocks = false;
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
  std::vector<DriftRow> drift;                // by first appearance
  std::vector<StepRow> steps;                 // by first appearance
  std::vector<ShapeGroup> groups;             // by kernel, then launches descending
  std::vector<DivergenceRegion> divergences;  // in shadow order
  std::vector<InstancePair> instances;        // the instance pairing, in order
  std::vector<DivergenceReason> reasons;      // why the twins diverged
  RequestTable requests;                      // per-request views (empty unless options.requests.trace)
  uint64_t primary_t0_ns = 0;                 // earliest valid primary kernel start (for relative times)
  std::vector<std::string> warnings;          // damaged inputs, missing pieces: one line each
  // Added to the primary's CUPTI timestamps gives CLOCK_REALTIME: the primary
  // header's clock pair; 0 without one (CUPTI's clock taken as realtime).
  int64_t primary_to_realtime_ns = 0;
};

class RecordLog;

// Reads both traces, each once, and joins them. Fails only if a trace cannot
// be opened (missing, bad magic or version) or the roles are wrong; damaged or
// truncated inputs are joined as far as they can be read, and say so in
// `warnings`. `primary_log` (may be null) keeps the primary's records of that
// one pass for the views that draw its whole timeline (join/record_log.h).
StatusOr<JoinedModel> JoinTraces(const std::string& primary_path, const std::string& shadow_path,
                                 const JoinOptions& options = {}, RecordLog* primary_log = nullptr);

// Block records of chosen shadow launches (by seq), read in one more pass over
// the shadow trace for the views that draw blocks. Bounded by the caller.
struct LaunchBlocks {
  uint64_t seq = 0;
  std::vector<BlockRecord> blocks;  // by order of entry
};

// The one detail pass: the chosen launches' blocks, and every record handed to
// `also` too (may be null: a view that streams the shadow's blocks, such as
// SQLite's blocks table). `report` and `header` are of that read.
struct ShadowDetail {
  std::vector<LaunchBlocks> launches;  // in the order of `seqs`, duplicates once
  ReadReport report;
  nlohmann::json header = nlohmann::json::object();
};
StatusOr<ShadowDetail> ReadShadowDetail(const std::string& shadow_path, const std::vector<uint64_t>& seqs,
                                        RecordSink* also = nullptr);
StatusOr<std::vector<LaunchBlocks>> ReadShadowBlocks(const std::string& shadow_path, const std::vector<uint64_t>& seqs);

// The detail of `seqs` out of a larger detail, in the order of `seqs` (seqs not there are left out).
std::vector<LaunchBlocks> DetailOf(const std::vector<LaunchBlocks>& detail, const std::vector<uint64_t>& seqs);

}  // namespace twinscope::join
