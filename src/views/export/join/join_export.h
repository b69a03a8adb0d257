// Exported views of a joined run (docs/join.md): the primary's timeline with
// the shadow's thread blocks of matched launches drawn inside each primary
// kernel's interval (Perfetto protobuf, Chrome JSON), and one SQLite database
// of kernels, launches, blocks, matches, drift and why-slow
// (docs/sqlite-schema.md). They take a join read for its views
// (join/joined_run.h: the model, the primary's records from the join's one pass,
// the shadow's block detail) and read no trace themselves, except SQLite's
// blocks table, filled in the join's detail pass; they never match anything
// themselves. Single-threaded.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "join/joined_run.h"
#include "views/export/export.h"

namespace twinscope::exporters {

// How much block detail a timeline view draws. Matched launches are taken
// whole, each why-slow group's reference and slow launches first, then the
// slowest others, while both bounds hold; every other matched launch is
// still drawn as one span with its block statistics, and the counts say so.
struct BlockBounds {
  size_t max_launches = 1000;
  uint64_t max_blocks = 1'000'000;
};
inline constexpr BlockBounds kPerfettoBlockBounds{1000, 1'000'000};
inline constexpr BlockBounds kChromeBlockBounds{200, 100'000};  // ~415 bytes a block event in JSON

// What a timeline view drew of the shadow's blocks.
struct BlockDetailCounts {
  uint64_t launches_matched = 0;      // exact + time-only matches
  uint64_t launches_drawn = 0;        // with every block on the SM tracks
  uint64_t launches_over_bounds = 0;  // timed, but left out by BlockBounds: span only
  uint64_t launches_untimed = 0;      // the primary kernel has no valid interval: not drawn
  uint64_t blocks_drawn = 0;
  uint64_t blocks_invalid = 0;  // blocks of drawn launches with invalid times, not drawn
  uint64_t block_bytes = 0;     // Perfetto: bytes of the packets that draw blocks (lane tracks included)
};

// How much of a serving run's requests the Perfetto view draws ("Requests"
// group): requests in the request trace's order up to max_requests, their step
// slices up to max_step_slices; past max_flows a step slice keeps its
// launch_ids arg but gets no flows. What is left out is counted.
struct RequestTrackBounds {
  size_t max_requests = 10'000;          // request tracks
  uint64_t max_step_slices = 1'000'000;  // step slices on all request tracks
  uint64_t max_flows = 1'000'000;        // flows from step slices to kernel slices
};
inline constexpr RequestTrackBounds kPerfettoRequestBounds{};

// What the Perfetto view drew of the requests (all 0 without a request trace).
struct RequestTrackCounts {
  uint64_t requests = 0;                 // in the model
  uint64_t drawn = 0;                    // with a track
  uint64_t over_bounds = 0;              // left out by RequestTrackBounds
  uint64_t not_placed = 0;               // neither an arrival time nor a step with kernels: no track
  uint64_t without_arrival = 0;          // drawn over their steps' GPU span
  uint64_t step_slices = 0;              // served steps drawn on request tracks
  uint64_t steps_without_kernels = 0;    // steps of drawn requests with no primary kernel: not drawn
  uint64_t steps_over_bounds = 0;        // left out by max_step_slices
  uint64_t steps_off_life = 0;           // drawn beside the request's life slice (outside it: clocks differ)
  uint64_t flows = 0;                    // step slice -> target kernel slice
  uint64_t flows_over_bounds = 0;        // left out by max_flows
  uint64_t launches_without_kernel = 0;  // per step slice, its target launches without a kernel record: no flow
  uint64_t flows_unended = 0;            // flows whose kernel slice was never written (should stay 0)
};

struct TimelineExportResult : ExportResult {
  BlockDetailCounts blocks;
  RequestTrackCounts requests;  // Perfetto only
  uint64_t bytes = 0;           // size of the file written
};

// True if this build has the Perfetto exporter (TWINSCOPE_WITH_PERFETTO: protoc and libprotobuf).
bool PerfettoAvailable();

// One trace as a Perfetto protobuf trace: per-stream GPU tracks (kernels,
// copies, memsets), per-thread tracks (API calls, NVTX), flows from API calls
// to their GPU work; a shadow trace's blocks on one track per SM in the
// shadow's clock (bounded by `bounds`).
StatusOr<TimelineExportResult> ExportPerfetto(const std::string& trace, const std::string& out,
                                              const BlockBounds& bounds = kPerfettoBlockBounds);

// A joined run as a Perfetto protobuf trace: the primary's timeline as above,
// plus for matched launches the shadow's blocks on one track per SM, scaled
// onto the primary kernel's [start, end] (instrumentation stretches the
// shadow's times), each launch linked to its kernel by a flow. A serving run
// with a request trace adds a "Requests" group: per request its life, its
// first token and the steps that served it, each step linked to its target
// launches' kernels by flows (bounded by `requests`).
StatusOr<TimelineExportResult> ExportJoinPerfetto(const join::JoinedRun& run, const std::string& out,
                                                  const BlockBounds& bounds = kPerfettoBlockBounds,
                                                  const RequestTrackBounds& requests = kPerfettoRequestBounds);

// The same joined picture as Chrome trace-event JSON (for chrome://tracing):
// the primary's Chrome export plus the scaled block tracks and flows. The
// Chrome writer of a trace (export/chrome_json.h) reads the primary itself
// (two passes): the one view that still does.
StatusOr<TimelineExportResult> ExportJoinChrome(const join::JoinedRun& run, const std::string& out,
                                                const BlockBounds& bounds = kChromeBlockBounds);

// A joined run as one SQLite database (docs/sqlite-schema.md, "Joined runs").
// Fails with "built without SQLite" when TWINSCOPE_WITH_SQLITE was off. In two
// steps, so that its blocks table (every block of the shadow) is filled in the
// join's detail pass: Start writes the model's tables and the primary's kernels
// (from run.primary), the detail pass hands the shadow's records to
// ShadowSink(), Finish writes the rest.
class JoinSqlite {
 public:
  static StatusOr<std::unique_ptr<JoinSqlite>> Start(const join::JoinedRun& run, const std::string& out);
  virtual ~JoinSqlite() = default;
  virtual RecordSink& ShadowSink() = 0;
  // `shadow_read`: the detail pass's report and the shadow's header.
  virtual StatusOr<ExportResult> Finish(const join::ShadowDetail& shadow_read) = 0;
};

// Both steps around a detail pass of its own (the blocks of `seqs` go to run->detail).
StatusOr<ExportResult> ExportJoinSqlite(join::JoinedRun* run, const std::string& out,
                                        const std::vector<uint64_t>& seqs = {});

}  // namespace twinscope::exporters
