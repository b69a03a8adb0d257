// The joined model as the typed document its views read (docs/join.md, "The model as JSON"): one plain
// struct per part of join.json, no logic. MakeJoinDoc derives it from the model (bounds, relative times,
// names); ToJson writes it as join.json and JoinDocFromJson reads a saved one back (join_doc_json.cpp, the
// only place join.json's keys are spelled). The HTML report renders from it (src/views/report). CUDA-free.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "join/join_model.h"
#include "join/join_views.h"

namespace twinscope::views {

inline constexpr const char* kJoinFormat = "twinscope-join";
inline constexpr int64_t kJoinVersion = 1;

using DimsDoc = std::array<uint32_t, 3>;  // grid or block [x, y, z]

struct ReadDoc {  // how far a trace was read
  std::string end = "unknown";
  bool ok = false;
  std::string message;
  bool operator==(const ReadDoc&) const = default;
};

struct LossFindingDoc {  // one of stats::LossFindings
  std::string name;
  uint64_t value = 0;
  std::string severity;  // "info", "data_loss", "error" (counters::SeverityName)
  std::string text;
  bool operator==(const LossFindingDoc&) const = default;
};

// A trace's loss accounting as `stats --json` writes it ("loss"): its findings, and every other value by
// the name stats gives it (counters, verdicts, the file's counts), shown as they are.
struct LossDoc {
  std::map<std::string, nlohmann::json> values;
  std::vector<LossFindingDoc> findings;
  bool operator==(const LossDoc&) const = default;
};

// The primary's command: its arguments, or one string where its header recorded it so.
struct CommandLineDoc {
  std::vector<std::string> args;
  std::optional<std::string> text;
  bool operator==(const CommandLineDoc&) const = default;
};

struct PrimarySideDoc {
  std::string path;
  int64_t pid = 0;
  CommandLineDoc command_line;
  ReadDoc read;
  uint64_t kernels = 0;   // kernel records
  uint64_t launches = 0;  // launch records
  std::optional<LossDoc> loss;
  bool operator==(const PrimarySideDoc&) const = default;
};

struct ShadowSideDoc {
  std::string path;
  int64_t pid = 0;
  ReadDoc read;
  uint64_t launches_traced = 0;
  uint64_t blocks = 0;  // block records
  std::vector<std::string> patterns;
  std::map<std::string, nlohmann::json> sampling;  // as the probe recorded it ("every", "max_launches", ...)
  std::map<std::string, uint64_t> probe_counters;
  std::optional<LossDoc> loss;
  bool operator==(const ShadowSideDoc&) const = default;
};

struct OptionsDoc {
  bool concurrent = false;
  bool operator==(const OptionsDoc&) const = default;
};

struct AlignmentDoc {
  bool identical = false;
  uint64_t anchors = 0, segments = 0, capped_segments = 0, capped_launches = 0, max_d = 0;
  bool shadow_sampled = false;
  // Range instances (docs/join.md, "Alignment"): their depth, each side's count, the aligned pairs, and the
  // pairs past the search's work bound (absent in a join.json written before them).
  std::optional<uint64_t> depth, instances_primary, instances_shadow, instance_pairs, bounded_instances;
  bool operator==(const AlignmentDoc&) const = default;
};

struct AutotuningDoc {  // launches an autotuner made (docs/join.md, "Autotuning")
  uint64_t primary = 0, shadow = 0, pairs = 0;
  bool one_sided = false;
  bool operator==(const AutotuningDoc&) const = default;
};

struct OverlapDoc {  // a concurrent run's windows on the realtime clock
  std::array<int64_t, 2> shadow_window_realtime_ns{};
  std::array<int64_t, 2> primary_kernels_realtime_ns{};
  int64_t primary_to_realtime_ns = 0;
  std::string clock;
  bool operator==(const OverlapDoc&) const = default;
};

struct SummaryDoc {
  uint64_t shadow_launches = 0, exact = 0, diverged = 0, diverged_shape = 0, time_only = 0, unmatched_shadow = 0;
  uint64_t primary_target_launches = 0, primary_target_unmatched = 0, primary_target_without_kernel = 0;
  uint64_t shadow_without_blocks = 0;
  uint64_t time_only_evaluated = 0, time_only_agree = 0;  // "time_only_accuracy"
  uint64_t overlapped_primary_kernels = 0;
  uint64_t divergence_regions = 0, in_divergence = 0, primary_in_divergence = 0, ambiguous = 0, ambiguous_regions = 0;
  AlignmentDoc alignment;
  std::optional<AutotuningDoc> autotuning;  // absent in a join.json written before it
  std::vector<std::string> target_kernels;
  std::optional<OverlapDoc> overlap;  // computed for a concurrent run only
  bool operator==(const SummaryDoc&) const = default;
};

struct DivergenceShadowDoc {
  uint64_t first_seq = 0, last_seq = 0;
  std::string from, to;  // top-level ranges
  bool operator==(const DivergenceShadowDoc&) const = default;
};

struct DivergencePrimaryDoc {
  uint64_t first = 0, last = 0;  // launch order indices
  std::string from, to;
  bool operator==(const DivergencePrimaryDoc&) const = default;
};

struct DivergenceDoc {
  uint64_t shadow_launches = 0, primary_launches = 0, diverged = 0, other_shape = 0, inserted = 0, deleted = 0,
           other_kernels = 0, positions = 0;
  std::optional<uint64_t> autotuning_primary, autotuning_shadow, autotuning_pairs;  // an autotuner's launches
  std::optional<DivergenceShadowDoc> shadow;                                        // null without shadow launches
  std::optional<DivergencePrimaryDoc> primary;                                      // null without primary launches
  bool operator==(const DivergenceDoc&) const = default;
};

// One row of the instance pairing: which range instance of the primary the alignment paired with which of
// the shadow's (null: none on that side).
struct InstanceDoc {
  std::optional<uint64_t> primary, shadow;
  std::string primary_name, shadow_name;
  uint64_t primary_launches = 0, shadow_launches = 0;
  std::string cls;  // "same", "differs", "primary_only", "shadow_only"
  bool bounded = false;
  bool operator==(const InstanceDoc&) const = default;
};

struct ReasonDoc {
  std::string code, text, remedy;
  bool operator==(const ReasonDoc&) const = default;
};

struct DriftDoc {
  std::string range;
  uint64_t exact = 0, diverged = 0, time_only = 0, unmatched = 0, shape_differs = 0;
  bool operator==(const DriftDoc&) const = default;
};

struct StepDoc {
  std::string range;
  uint64_t kernels = 0, kernel_ns = 0, targets = 0, target_ns = 0;
  bool operator==(const StepDoc&) const = default;
};

struct LaunchKeyDoc {
  std::string path;
  uint64_t ordinal = 0;
  std::string hash;  // hex
  bool operator==(const LaunchKeyDoc&) const = default;
};

struct LaunchPrimaryDoc {
  std::optional<uint64_t> start_ns, end_ns, dur_ns;  // with a kernel record; from the primary's first kernel
  uint64_t stream = 0, device = 0;
  DimsDoc grid{}, block{};
  bool graph = false, overlapped = false, have_kernel = false;
  bool operator==(const LaunchPrimaryDoc&) const = default;
};

struct StragglerDoc {
  uint64_t block = 0, sm = 0, exit_ns = 0;
  bool operator==(const StragglerDoc&) const = default;
};

struct LaunchShadowDoc {  // shadow times from the launch's first block entry
  uint64_t seq = 0;
  DimsDoc grid{};
  uint64_t blocks_expected = 0, blocks_seen = 0, blocks_working = 0, sms_used = 0;
  std::array<uint64_t, 3> blocks_per_sm{};  // min, median, max
  uint64_t inversions = 0;
  std::optional<double> kendall_tau;  // null: not defined
  StragglerDoc straggler;
  uint64_t tail_ns = 0, span_ns = 0, block_p50_ns = 0;
  bool operator==(const LaunchShadowDoc&) const = default;
};

struct LaunchDoc {
  uint64_t id = 0;  // index in the model's matches (why_slow and block_detail refer to it)
  std::string kernel;
  std::string match;  // "exact", "diverged", "time"
  LaunchKeyDoc key;
  bool shape_differs = false, ambiguous = false;
  std::optional<int64_t> region;  // index in divergences; null: none
  LaunchPrimaryDoc primary;
  LaunchShadowDoc shadow;
  bool operator==(const LaunchDoc&) const = default;
};

struct SlowDoc {
  uint64_t launch = 0;
  uint64_t dur_ns = 0;
  double ratio = 0;
  std::vector<std::string> verdicts;
  std::string text;
  bool operator==(const SlowDoc&) const = default;
};

struct WhySlowDoc {
  std::string kernel;
  DimsDoc grid{}, block{};
  uint64_t launches = 0, median_dur_ns = 0;
  uint64_t reference = 0;  // launch id
  uint64_t mad_ns = 0;
  std::string note;
  std::vector<SlowDoc> slow;
  bool operator==(const WhySlowDoc&) const = default;
};

using BlockRowDoc = std::array<int64_t, 5>;  // block_linear, sm, enter_ns, exit_ns, order

struct BlockDetailDoc {
  uint64_t launch = 0;
  std::vector<BlockRowDoc> blocks;
  uint64_t malformed_rows = 0;  // rows JoinDocFromJson could not read (never written)
  bool operator==(const BlockDetailDoc&) const = default;
};

struct RequestsSourceDoc {
  std::string trace, schedule;
  bool operator==(const RequestsSourceDoc&) const = default;
};

struct RequestsReadDoc {
  uint64_t lines = 0, bad_lines = 0;
  std::string first_bad;
  uint64_t requests_left_out = 0, schedule_steps = 0, schedule_bad_lines = 0;
  bool operator==(const RequestsReadDoc&) const = default;
};

struct RequestRowDoc {
  std::string id;
  int64_t status = 0;
  std::string finish_reason;
  std::optional<std::string> error;  // written only when the request failed
  // The server's figures (null: unknown).
  std::optional<int64_t> prompt_tokens, completion_tokens, queued_us, first_token_us, done_us, arrival_unix_us;
  std::optional<int64_t> arrival_ns;  // on the primary's clock, from its first kernel (signed)
  std::optional<int64_t> prefill_step;
  std::vector<uint64_t> steps;
  uint64_t prefill_steps = 0, decode_steps = 0, steps_without_kernels = 0, kernels = 0, kernel_ns = 0,
           kernel_share_ns = 0, targets = 0, target_ns = 0, target_launches = 0, shadow_exact = 0, shadow_time_only = 0;
  std::optional<uint64_t> gpu_start_ns, gpu_end_ns;  // null: no kernels
  bool operator==(const RequestRowDoc&) const = default;
};

struct StepLaunchDoc {                       // one target launch of a served step: [start_ns, dur_ns, launch id]
  std::optional<uint64_t> start_ns, dur_ns;  // null: no kernel record
  int64_t launch = -1;                       // -1: no shadow launch matched it
  bool operator==(const StepLaunchDoc&) const = default;
};

struct ServedStepDoc {
  uint64_t step = 0;
  std::string kind;
  std::optional<int64_t> batch, padded, tokens;
  std::string range;
  uint64_t kernels = 0, kernel_ns = 0, targets = 0, target_ns = 0;
  std::optional<uint64_t> start_ns, end_ns;
  uint64_t shadow_exact = 0, shadow_time_only = 0;
  std::vector<StepLaunchDoc> target_launches;
  bool operator==(const ServedStepDoc&) const = default;
};

struct RequestsDoc {
  RequestsSourceDoc source;
  RequestsReadDoc read;
  uint64_t total = 0, steps_total = 0, steps_without_kernels = 0, primary_steps_without_request = 0;
  std::vector<std::string> warnings;
  std::vector<RequestRowDoc> rows;   // trace order
  std::vector<ServedStepDoc> steps;  // by step index
  bool operator==(const RequestsDoc&) const = default;
};

// The document. MakeJoinDoc fills every part (requests only for a serving run with a request trace); a part
// is absent only in a hand-made or damaged join.json read by JoinDocFromJson, and the report says so where
// it matters ("The join holds no summary.").
struct JoinDoc {
  std::optional<PrimarySideDoc> primary;
  std::optional<ShadowSideDoc> shadow;
  std::optional<OptionsDoc> options;
  std::optional<std::vector<std::string>> warnings;
  std::optional<SummaryDoc> summary;
  std::optional<std::vector<DivergenceDoc>> divergences;
  std::optional<std::vector<ReasonDoc>> reasons;
  std::optional<std::vector<InstanceDoc>> instances;  // the instance pairing, in order
  std::optional<std::vector<DriftDoc>> drift;         // drifting ranges first, bounded
  std::optional<uint64_t> drift_total;
  std::optional<std::vector<StepDoc>> steps;  // bounded
  std::optional<uint64_t> steps_total;
  std::optional<std::vector<LaunchDoc>> launches;  // slowest first, bounded (why_slow's always kept)
  std::optional<uint64_t> launches_total;
  std::optional<std::vector<WhySlowDoc>> why_slow;
  std::optional<std::vector<BlockDetailDoc>> block_detail;
  std::optional<RequestsDoc> requests;
  bool operator==(const JoinDoc&) const = default;
};

// Launch `id` (a match index) of `m` as the document's "launches" hold it.
LaunchDoc MakeLaunchDoc(const join::JoinedModel& m, size_t id);

// The document of `m` within `bounds`; `blocks` (from ReadShadowBlocks) fills block_detail.
JoinDoc MakeJoinDoc(const join::JoinedModel& m, const join::JsonBounds& bounds,
                    const std::vector<join::LaunchBlocks>& blocks);

// join_doc_json.cpp: the document as join.json, and back. JoinDocFromJson fails only on JSON that is not a
// join of a known version; a missing part reads as absent, a missing or mistyped value as its default, a
// block row that is not five integers is counted (BlockDetailDoc::malformed_rows).
nlohmann::json ToJson(const JoinDoc& d);
StatusOr<JoinDoc> JoinDocFromJson(const nlohmann::json& j);
// The model as join.json: ToJson(MakeJoinDoc(m, bounds, blocks)) (`blocks` from ReadShadowBlocks fill
// "block_detail").
nlohmann::json JoinJson(const join::JoinedModel& m, const join::JsonBounds& bounds,
                        const std::vector<join::LaunchBlocks>& blocks);

// Parts, for views that write a bounded copy (the report's page data).
nlohmann::json ToJson(const LaunchDoc& d);
nlohmann::json ToJson(const WhySlowDoc& d);
nlohmann::json ToJson(const DriftDoc& d);
nlohmann::json ToJson(const StepDoc& d);
nlohmann::json ToJson(const RequestRowDoc& d);
nlohmann::json ToJson(const ServedStepDoc& d);
nlohmann::json ToJson(const RequestsDoc& d);

}  // namespace twinscope::views
