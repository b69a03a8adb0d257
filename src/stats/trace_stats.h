// What `twinscope stats` (and the summary after `twinscope record`) says about
// one trace file: counts, loss accounting, top kernels, devices, NVTX ranges
// and, for shadow traces, per-launch block statistics.
//
// StatsBuilder is a RecordSink: feed it records (from a TraceReader or built
// by hand in tests), then Finish() computes TraceStats. Kernel durations are
// kept per kernel name (8 bytes per valid kernel record) for exact
// percentiles. Block records are kept per launch only until that launch's
// blocks are all in (one record per block of its grid, its launch record
// read): then its LaunchBlockStats are computed and the records let go, so
// memory grows with the launches, not the blocks. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "stats/block_stats.h"
#include "twinscope/counters.h"
#include "twinscope/trace_reader.h"

namespace twinscope::stats {

struct KernelSummary {
  std::string name;      // demangled where the trace has it
  uint64_t count = 0;    // records, invalid timestamps included
  uint64_t invalid = 0;  // records with kFlagInvalidTimestamp (excluded from times)
  uint64_t total_ns = 0, min_ns = 0, max_ns = 0, p50_ns = 0, p99_ns = 0;
  double mean_ns = 0;
};

struct DeviceSummary {
  uint32_t device = 0;
  uint64_t kernels = 0, memcpys = 0, memsets = 0;
  uint64_t kernel_ns = 0;  // sum of valid kernel durations
  uint64_t memcpy_bytes = 0, memset_bytes = 0;
  uint64_t first_ns = 0, last_ns = 0;  // earliest valid start, latest valid end of any activity
  uint32_t streams = 0;
};

struct NvtxSummary {
  std::string name;   // "domain::name" for non-default domains
  uint32_t kind = 0;  // NvtxKind
  uint64_t count = 0;
  uint64_t unclosed = 0;  // ranges that never ended (no duration)
  uint64_t total_ns = 0, max_ns = 0;
};

// Where a loss verdict comes from. A trace with a summary has final counters;
// one without (the process was killed) has counters from its last STATUS
// chunk, older than the records written after it, so there the records in
// the file are the proof.
enum class LossBasis { kNone, kCounters, kFile };
const char* LossBasisName(LossBasis b);  // "none", "counters", "file"

// What the records in the file prove, counted from the records alone.
struct FileCounts {
  uint64_t launch_records = 0;
  uint64_t kernel_records = 0;   // primary
  uint64_t block_records = 0;    // shadow
  uint64_t blocks_expected = 0;  // shadow: grid sizes of the launch records
  uint64_t blocks_claimed = 0;   // shadow: their blocks_recorded (what the probe wrote for them)
  uint64_t blocks_matched = 0;   // shadow: distinct in-grid blocks of those launches in the file
  // Records after the last STATUS/SUMMARY chunk (all of them when there is none).
  uint64_t launch_records_after_status = 0, kernel_records_after_status = 0, block_records_after_status = 0;
};

// Loss accounting. Counter values come from the last STATUS/SUMMARY chunk
// (`have_counters` false if the trace has none); "*_in_file" values and
// `file` are counted from the records themselves. `missing` (primary) and
// `blocks_missing` (shadow) are the verdict, taken from `basis`.
struct LossAccounting {
  bool have_counters = false;
  bool counters_final = false;         // from the SUMMARY chunk
  int64_t status_after_start_ns = -1;  // when the last counters were taken, from the header's start (-1: unknown)
  uint64_t launches_seen = 0;
  uint64_t kernel_records = 0;  // delivered by CUPTI (counter)
  uint64_t kernel_records_in_file = 0;
  int64_t missing = 0;                      // the verdict: launches without a kernel record; negative = more records
  int64_t missing_counters = 0;             // launches_seen - kernel_records (counters)
  int64_t missing_file = 0;                 // launch records - kernel records (file)
  uint64_t invalid_timestamps = 0;          // counter (kernels)
  uint64_t invalid_timestamps_in_file = 0;  // kernels, copies and memsets flagged invalid
  uint64_t copy_invalid_timestamps = 0;     // counter (memcpy/memset)
  uint64_t cupti_dropped = 0;
  uint64_t writer_dropped = 0;
  uint64_t key_fallbacks = 0;  // counter, or flagged records when no counter
  uint64_t no_launch_key = 0;  // records flagged kFlagNoLaunchKey
  // Shadow (block probe) counters and verdict: blocks expected without a block record.
  uint64_t launches_traced = 0, blocks_expected = 0, blocks_recorded = 0;
  int64_t blocks_missing = 0, blocks_missing_counters = 0, blocks_missing_file = 0;
  FileCounts file;
  LossBasis basis = LossBasis::kNone;
  std::string basis_reason;  // one sentence: why this basis
};

// Per-kernel aggregate over the traced launches of a shadow trace.
struct ShadowKernelSummary {
  std::string name;
  uint64_t launches = 0;
  uint64_t launches_incomplete = 0;  // blocks_unique != blocks_expected
  uint64_t blocks_expected = 0, blocks_seen = 0, blocks_unique = 0;
  uint64_t tail_p50_ns = 0, tail_max_ns = 0;
  uint64_t span_p50_ns = 0, span_max_ns = 0;
  uint32_t sms_used_min = 0, sms_used_max = 0;
  double kendall_tau_mean = 0;  // over launches where tau is defined
};

struct ShadowLaunch {
  LaunchBlockStats blocks;
  std::string kernel;
  std::string key_path;
  uint32_t key_ordinal = 0;
  uint64_t key_hash = 0;
  Dim3 grid{0, 0, 0};
  bool have_launch_record = false;
  uint32_t flags = 0;         // the launch record's (kFlagGraph, kFlagSample*)
  uint32_t sample_index = 0;  // its place among the selected kernels' launches
};

struct TraceStats {
  std::string path;
  nlohmann::json header = nlohmann::json::object();
  ReadReport report;
  nlohmann::json status = nlohmann::json::object();  // last STATUS/SUMMARY object
  bool have_summary = false;
  std::string role;
  std::map<std::string, uint64_t> counts;  // records per kind: kernel, memcpy, ...
  LossAccounting loss;
  std::vector<KernelSummary> kernels;  // by total time, descending
  std::vector<DeviceSummary> devices;  // by device
  std::vector<NvtxSummary> nvtx;       // by total time, descending
  bool shadow = false;
  std::vector<ShadowKernelSummary> shadow_kernels;  // by launches, descending
  std::vector<ShadowLaunch> shadow_launches;        // by seq
  uint64_t blocks_without_launch = 0;               // block records whose launch record is missing
  // Block records that arrived after their launch's blocks were all in and its statistics computed (a
  // duplicate or an out-of-grid record read late): counted into its duplicates, out_of_grid, invalid_times,
  // blocks_seen and latest exit; its medians and SM counts stay those of the complete set (docs/join.md, "Reads").
  uint64_t blocks_after_complete = 0;
  // Shadow: every counter of the probe and both collectors in the counter table (0 where the trace has
  // none), and any counter this build does not know.
  nlohmann::json probe_counters = nlohmann::json::object();
};

class StatsBuilder : public RecordSink {
 public:
  StatsBuilder() = default;

  void OnKernel(const KernelRecord& r) override;
  void OnMemcpy(const MemcpyRecord& r) override;
  void OnMemset(const MemsetRecord& r) override;
  void OnApi(const ApiRecord& r) override;
  void OnNvtx(const NvtxRecord& r) override;
  void OnLaunch(const LaunchRecord& r) override;
  void OnBlock(const BlockRecord& r) override;
  void OnStatus(const nlohmann::json& status, bool is_summary) override;

  // Keep launch records (needed for shadow statistics). Set from the header's
  // role before reading; block records switch it on too, but launch records
  // read before the first block record are then lost for the statistics.
  void set_keep_launches(bool keep) { keep_launches_ = keep; }

  // Keep every valid kernel duration for the kernels' p50/p99 (8 bytes a
  // record; on by default). Off, KernelSummary's p50_ns/p99_ns stay 0 and
  // memory does not grow with the records: the join turns it off (its views
  // never show them; docs/join.md, "Reads").
  void set_kernel_percentiles(bool keep) { kernel_percentiles_ = keep; }

  // Block records held now: those of launches whose blocks are not all in yet.
  uint64_t block_records_held() const { return blocks_held_; }

  // Computes the statistics; `strings` (a TraceReader's strings()) resolves
  // names. Call once, after the last record.
  TraceStats Finish(const std::unordered_map<StringId, std::string>& strings, const nlohmann::json& header,
                    const ReadReport& report);

 private:
  struct KernelAcc {
    uint64_t count = 0, invalid = 0;
    std::vector<uint64_t> durations;
    uint64_t valid = 0, total_ns = 0, min_ns = UINT64_MAX, max_ns = 0;  // without percentiles
  };
  struct DeviceAcc {
    DeviceSummary s;
    bool have_time = false;
    std::vector<uint32_t> streams;
  };
  struct NvtxAcc {
    uint64_t count = 0, unclosed = 0, total_ns = 0, max_ns = 0;
  };
  DeviceAcc& Device(uint32_t device);
  // Computes the statistics of launch `seq` and drops its block records when they are exactly its grid.
  void CompleteIfWhole(uint64_t seq);
  void Activity(DeviceAcc& d, uint32_t stream, uint64_t start, uint64_t end, bool valid);

  bool kernel_percentiles_ = true;
  std::map<std::string, uint64_t> counts_;
  std::unordered_map<uint64_t, KernelAcc> kernels_;  // by (demangled << 32 | name)
  std::map<uint32_t, DeviceAcc> devices_;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, NvtxAcc> nvtx_;  // (domain, name, kind)
  uint64_t invalid_in_file_ = 0, key_fallback_in_file_ = 0, no_key_in_file_ = 0;
  bool keep_launches_ = false;
  uint64_t launch_blocks_expected_ = 0, launch_blocks_claimed_ = 0;  // over all launch records
  std::map<std::string, uint64_t> counts_at_status_;                 // counts_ at the last STATUS/SUMMARY
  std::unordered_map<uint64_t, LaunchRecord> launches_;
  std::unordered_map<uint64_t, std::vector<BlockRecord>> blocks_;  // launches whose blocks are not all in
  std::unordered_map<uint64_t, LaunchBlockStats> complete_;        // launches whose blocks were, computed
  uint64_t blocks_after_complete_ = 0;
  uint64_t blocks_held_ = 0;                         // records in blocks_
  std::vector<BlockRecord>* last_blocks_ = nullptr;  // blocks_[last_block_seq_] (node-based map: stable)
  uint64_t last_block_seq_ = 0;
  uint64_t* block_count_ = nullptr;  // counts_["block"]
  nlohmann::json status_ = nlohmann::json::object();
  bool have_summary_ = false;
};

// Reads `path` and computes its statistics. Fails only if the file cannot be
// opened (bad magic, version, missing); a damaged file gives statistics of
// what was read, with the damage in `report`.
StatusOr<TraceStats> ComputeTraceStats(const std::string& path);

// One thing a trace says it lost, or a counter it holds that this build does not know. The severity comes
// from the counter table (include/twinscope/counters.def); verdicts that only the file shows (launches
// without their kernel record, blocks not recorded, ...) are kDataLoss under their own names.
struct LossFinding {
  std::string name;  // the counter's name, or the verdict's ("launches_without_kernel_record", ...)
  uint64_t value = 0;
  counters::Severity severity = counters::Severity::kInfo;
  std::string text;  // one line for people
};

// The trace's losses (severity kDataLoss or kError), then counters not zero that the table does not know
// (kInfo: a newer writer's; shown, never a loss). Counters in table order, unknown ones by name.
std::vector<LossFinding> LossFindings(const TraceStats& s);

// Why `stats --strict` fails: one line per problem (missing launches, invalid
// timestamps, drops, incomplete read, missing blocks...). Empty = clean.
std::vector<std::string> StrictProblems(const TraceStats& s);

// The JSON form of `twinscope stats --json`. `top` limits kernels/NVTX
// ranges (0 = all); shadow launches are all included.
nlohmann::json StatsToJson(const TraceStats& s, size_t top);

}  // namespace twinscope::stats
