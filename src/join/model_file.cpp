// Saves and loads the joined model (join/model_file.h): the model's fields as
// JSON, stored as CBOR. The field lists below are the file's format: a field
// added to the model and not listed here is not saved, which the round-trip
// test (tests/join/model_file_test.cpp) catches through every view of the model.
#include "join/model_file.h"

#include <sys/stat.h>

#include <fstream>
#include <iterator>

namespace twinscope {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Dim3, x, y, z)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ReadReport, end, message, chunks, records, bytes)
}  // namespace twinscope

namespace twinscope::stats {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(KernelSummary, name, count, invalid, total_ns, min_ns, max_ns, p50_ns, p99_ns,
                                   mean_ns)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DeviceSummary, device, kernels, memcpys, memsets, kernel_ns, memcpy_bytes,
                                   memset_bytes, first_ns, last_ns, streams)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NvtxSummary, name, kind, count, unclosed, total_ns, max_ns)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(FileCounts, launch_records, kernel_records, block_records, blocks_expected,
                                   blocks_claimed, blocks_matched, launch_records_after_status,
                                   kernel_records_after_status, block_records_after_status)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LossAccounting, have_counters, counters_final, status_after_start_ns, launches_seen,
                                   kernel_records, kernel_records_in_file, missing, missing_counters, missing_file,
                                   invalid_timestamps, invalid_timestamps_in_file, copy_invalid_timestamps,
                                   cupti_dropped, writer_dropped, key_fallbacks, no_launch_key, launches_traced,
                                   blocks_expected, blocks_recorded, blocks_missing, blocks_missing_counters,
                                   blocks_missing_file, file, basis, basis_reason)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ShadowKernelSummary, name, launches, launches_incomplete, blocks_expected,
                                   blocks_seen, blocks_unique, tail_p50_ns, tail_max_ns, span_p50_ns, span_max_ns,
                                   sms_used_min, sms_used_max, kendall_tau_mean)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BlockRef, block_linear, sm, order, enter_ns, exit_ns)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LaunchBlockStats, seq, blocks_expected, blocks_seen, blocks_unique, duplicates,
                                   out_of_grid, invalid_times, sms_used, blocks_per_sm_min, blocks_per_sm_median,
                                   blocks_per_sm_max, inversions, kendall_tau, first, last, straggler, first_enter_ns,
                                   last_exit_ns, median_exit_ns, span_ns, tail_ns, block_duration_p50_ns,
                                   block_duration_max_ns)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ShadowLaunch, blocks, kernel, key_path, key_ordinal, key_hash, grid,
                                   have_launch_record, flags, sample_index)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TraceStats, path, header, report, status, have_summary, role, counts, loss, kernels,
                                   devices, nvtx, shadow, shadow_kernels, shadow_launches, blocks_without_launch,
                                   probe_counters)
}  // namespace twinscope::stats

namespace twinscope::join {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PrimaryLaunch, kernel, demangled, path, ordinal, hash, grid, block, cpu_ns,
                                   have_kernel, start_ns, end_ns, stream, device, graph, overlapped)
// block_durations are not saved: only the join's why-slow reads them, while the model is built.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ShadowLaunch, seq, kernel, path, ordinal, hash, grid, block, cpu_ns, stream, blocks,
                                   blocks_working)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Match, kind, shadow, primary, shape_differs, ambiguous, region, autotuning)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DivergenceRegion, shadow_launches, primary_launches, diverged, other_shape, inserted,
                                   deleted, other_kernels, first_seq, last_seq, first_primary, last_primary,
                                   shadow_from, shadow_to, primary_from, primary_to, positions, autotuning_shadow,
                                   autotuning_primary, autotuning_pairs)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(InstancePair, primary, shadow, primary_name, shadow_name, primary_launches,
                                   shadow_launches, cls, bounded)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DivergenceReason, code, text, remedy)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Summary::Alignment, identical, anchors, segments, capped_segments, capped_launches,
                                   max_d, sampled, depth, instances_primary, instances_shadow, instance_pairs,
                                   bounded_instances)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Summary::Overlap, computed, window_start, window_end, primary_first_kernel,
                                   primary_last_kernel, primary_to_realtime, clock)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Summary, shadow_launches, exact, diverged, diverged_shape, time_only,
                                   unmatched_shadow, primary_target_launches, primary_target_unmatched,
                                   primary_target_without_kernel, shadow_without_blocks, time_only_evaluated,
                                   time_only_agree, overlapped_primary_kernels, in_divergence, primary_in_divergence,
                                   ambiguous, ambiguous_regions, alignment, autotuning_shadow, autotuning_primary,
                                   autotuning_pairs, autotuning_ranges_primary, autotuning_ranges_shadow,
                                   autotuning_one_sided, overlap, target_kernels)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DriftRow, range, exact, diverged, time_only, unmatched, shape_differs)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StepRow, range, kernels, kernel_ns, target_ns, targets, first_start_ns, last_end_ns)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SlowLaunch, match, dur_ns, ratio, verdicts, text)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ShapeGroup, kernel, grid, block, launches, median_dur_ns, reference, mad_ns, slow,
                                   note)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TraceSide, stats, launches)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RequestInputs, trace, schedule)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(JoinOptions, concurrent, shadow_window_start_realtime_ns,
                                   shadow_window_end_realtime_ns, primary_start_realtime_ns, primary_end_realtime_ns,
                                   slow_per_group, min_group_launches, normalize_range, align_max_d, requests, warnings)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ServedStep, index, kind, batch, padded, tokens, range, kernels, kernel_ns, targets,
                                   target_ns, first_start_ns, last_end_ns, target_launches, target_matches,
                                   shadow_exact, shadow_time_only)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ServedRequest, id, status, finish_reason, error, prompt_tokens, completion_tokens,
                                   max_tokens, queued_us, first_token_us, done_us, arrival_unix_us, prefill_step, steps,
                                   prefill_steps, decode_steps, steps_without_kernels, kernels, kernel_ns,
                                   kernel_share_ns, targets, target_ns, target_launches, shadow_exact, shadow_time_only,
                                   first_start_ns, last_end_ns, arrival_ns)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RequestTable, present, trace_path, schedule_path, requests, steps, lines, bad_lines,
                                   first_bad, requests_left_out, schedule_steps, schedule_bad_lines,
                                   steps_without_kernels, primary_steps_without_request, warnings)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(JoinedModel, primary_path, shadow_path, primary_side, shadow_side, options, primary,
                                   shadow, matches, shadow_unmatched, primary_unmatched, summary, drift, steps, groups,
                                   divergences, instances, reasons, requests, primary_t0_ns, warnings,
                                   primary_to_realtime_ns)

namespace {

constexpr const char* kFormat = "twinscope-join-model";
constexpr int kVersion = 2;  // 2: the instance pairing and the autotuner's launches

// A trace as it was when joined: a later write or copy changes one of these.
nlohmann::json FileStamp(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return nullptr;
  return {{"size", static_cast<uint64_t>(st.st_size)},
          {"mtime_ns", static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec}};
}

Status Fail(ModelUnusable* why, ModelUnusable kind, const std::string& message) {
  if (why) *why = kind;
  return Status::Error(message);
}

}  // namespace

namespace {

// CBOR as nlohmann::json::to_cbor writes it, a value at a time: the saved model's three long lists (its
// launches on each side and the matches) are written element by element, so the file never sits in memory
// whole (a join of millions of launches would hold several times its model as JSON). The bytes are those of
// to_cbor of the whole document (tests/join/model_file_test.cpp checks).
class CborOut {
 public:
  explicit CborOut(std::ofstream& f) : f_(f) {}
  void Value(const nlohmann::json& j) {
    const std::vector<uint8_t> b = nlohmann::json::to_cbor(j);
    f_.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  // The head of an array (major type 4) or map (5) of n items, in its shortest form.
  void Head(uint8_t major, uint64_t n) {
    const uint8_t base = static_cast<uint8_t>(major << 5);
    if (n <= 0x17) return Byte(static_cast<uint8_t>(base | n));
    const int bytes = n <= 0xFF ? 1 : n <= 0xFFFF ? 2 : n <= 0xFFFFFFFF ? 4 : 8;
    Byte(static_cast<uint8_t>(base | (bytes == 1 ? 24 : bytes == 2 ? 25 : bytes == 4 ? 26 : 27)));
    for (int i = bytes - 1; i >= 0; --i) Byte(static_cast<uint8_t>(n >> (8 * i)));
  }
  template <typename T>
  void List(const std::vector<T>& v) {
    Head(4, v.size());
    for (const T& x : v) Value(nlohmann::json(x));
  }

 private:
  void Byte(uint8_t b) { f_.put(static_cast<char>(b)); }
  std::ofstream& f_;
};

}  // namespace

Status SaveModel(const JoinedModel& m, const std::string& path) {
  // The model without its long lists, as JSON (they are put back before returning).
  auto& lists = const_cast<JoinedModel&>(m);  // NOLINT: only moved out and back, never changed
  std::vector<PrimaryLaunch> primary = std::move(lists.primary);
  std::vector<ShadowLaunch> shadow = std::move(lists.shadow);
  std::vector<Match> matches = std::move(lists.matches);
  nlohmann::json rest;
  try {
    rest = nlohmann::json(m);
  } catch (...) {
    lists.primary = std::move(primary), lists.shadow = std::move(shadow), lists.matches = std::move(matches);
    throw;
  }
  lists.primary = std::move(primary), lists.shadow = std::move(shadow), lists.matches = std::move(matches);

  // {"format", "model", "primary", "shadow", "version"}, keys in order as to_cbor writes an object.
  const nlohmann::json head = {{"format", kFormat},
                               {"version", kVersion},
                               {"primary", FileStamp(m.primary_path)},
                               {"shadow", FileStamp(m.shadow_path)}};
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  CborOut out(f);
  out.Head(5, head.size() + 1);
  bool model_done = false;
  auto model = [&] {
    out.Value("model");
    out.Head(5, rest.size());
    for (const auto& [key, value] : rest.items()) {
      out.Value(key);
      if (key == "primary")
        out.List(m.primary);
      else if (key == "shadow")
        out.List(m.shadow);
      else if (key == "matches")
        out.List(m.matches);
      else
        out.Value(value);
    }
    model_done = true;
  };
  for (const auto& [key, value] : head.items()) {
    if (!model_done && std::string("model") < key) model();
    out.Value(key);
    out.Value(value);
  }
  if (!model_done) model();
  f.close();
  if (!f) return Status::Error("cannot write " + path);
  return Status::Ok();
}

StatusOr<JoinedModel> LoadModel(const std::string& path, const std::string& primary, const std::string& shadow,
                                ModelUnusable* why) {
  if (why) *why = ModelUnusable::kNone;
  std::ifstream f(path, std::ios::binary);
  if (!f) return Fail(why, ModelUnusable::kMissing, path + " is not there");
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const nlohmann::json j = nlohmann::json::from_cbor(bytes, true, false);
  if (j.is_discarded() || !j.is_object())
    return Fail(why, ModelUnusable::kDamaged, path + " is damaged or cut short (not CBOR)");
  if (j.value("format", "") != kFormat || j.value("version", 0) != kVersion)
    return Fail(why, ModelUnusable::kDamaged,
                path + " is not a saved model of this twinscope (format " + j.value("format", std::string("?")) +
                    ", version " + std::to_string(j.value("version", 0)) + "; this one reads " + kFormat + " " +
                    std::to_string(kVersion) + ")");
  for (const auto& [side, trace] :
       {std::pair<const char*, const std::string&>{"primary", primary}, {"shadow", shadow}}) {
    const nlohmann::json now = FileStamp(trace);
    if (!j.contains(side) || j[side] != now)
      return Fail(why, ModelUnusable::kStale,
                  path + " is stale: " + trace + " changed since the join (its size or modification time differs)");
  }
  JoinedModel m;
  try {
    j.at("model").get_to(m);
  } catch (const std::exception& e) {
    return Fail(why, ModelUnusable::kDamaged, path + " is damaged: " + e.what());
  }
  // The traces as the caller names them now (a folder that moved still reads its model).
  m.primary_path = m.primary_side.stats.path = primary;
  m.shadow_path = m.shadow_side.stats.path = shadow;
  return m;
}

}  // namespace twinscope::join
