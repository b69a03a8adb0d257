// The join document as join.json and back (docs/join.md, "The model as JSON"): the only place its keys are
// spelled. Each struct has one field list (Fields) that both directions walk: Writer puts every field,
// Reader takes what is there and of the right type, leaving the default otherwise.
#include <cmath>
#include <concepts>
#include <limits>
#include <type_traits>

#include "views/join_doc.h"

namespace twinscope::views {
namespace {

using nlohmann::json;

template <class D, class T>
concept Is = std::same_as<std::remove_const_t<D>, T>;

// ---- the field lists ----------------------------------------------------------------------------------
// v(key, field): always written (an empty optional as null); v.Omit(key, field): written only when set;
// v.Nest(key, fn): fields of a nested object that has no struct of its own; v.Rows(key, rows, malformed):
// block rows, those the reader cannot take counted.

template <class V, Is<ReadDoc> D>
void Fields(V& v, D& d) {
  v("end", d.end);
  v("ok", d.ok);
  v("message", d.message);
}

template <class V, Is<LossFindingDoc> D>
void Fields(V& v, D& d) {
  v("name", d.name);
  v("value", d.value);
  v("severity", d.severity);
  v("text", d.text);
}

constexpr const char* kFindings = "findings";  // LossDoc: the rest of its keys are values (stats' names)

template <class V, Is<PrimarySideDoc> D>
void Fields(V& v, D& d) {
  v("path", d.path);
  v("pid", d.pid);
  v("command_line", d.command_line);
  v("read", d.read);
  v("kernels", d.kernels);
  v("launches", d.launches);
  v.Omit("loss", d.loss);
}

template <class V, Is<ShadowSideDoc> D>
void Fields(V& v, D& d) {
  v("path", d.path);
  v("pid", d.pid);
  v("read", d.read);
  v("launches_traced", d.launches_traced);
  v("blocks", d.blocks);
  v("patterns", d.patterns);
  v("sampling", d.sampling);
  v("probe_counters", d.probe_counters);
  v.Omit("loss", d.loss);
}

template <class V, Is<OptionsDoc> D>
void Fields(V& v, D& d) {
  v("concurrent", d.concurrent);
}

template <class V, Is<AlignmentDoc> D>
void Fields(V& v, D& d) {
  v("identical", d.identical);
  v("anchors", d.anchors);
  v("segments", d.segments);
  v("capped_segments", d.capped_segments);
  v("capped_launches", d.capped_launches);
  v("max_d", d.max_d);
  v("shadow_sampled", d.shadow_sampled);
  v.Omit("depth", d.depth);
  v.Omit("instances_primary", d.instances_primary);
  v.Omit("instances_shadow", d.instances_shadow);
  v.Omit("instance_pairs", d.instance_pairs);
  v.Omit("bounded_instances", d.bounded_instances);
}

template <class V, Is<OverlapDoc> D>
void Fields(V& v, D& d) {
  v("shadow_window_realtime_ns", d.shadow_window_realtime_ns);
  v("primary_kernels_realtime_ns", d.primary_kernels_realtime_ns);
  v("primary_to_realtime_ns", d.primary_to_realtime_ns);
  v("clock", d.clock);
}

template <class V, Is<SummaryDoc> D>
void Fields(V& v, D& d) {
  v("shadow_launches", d.shadow_launches);
  v("exact", d.exact);
  v("diverged", d.diverged);
  v("diverged_shape", d.diverged_shape);
  v("time_only", d.time_only);
  v("unmatched_shadow", d.unmatched_shadow);
  v("primary_target_launches", d.primary_target_launches);
  v("primary_target_unmatched", d.primary_target_unmatched);
  v("primary_target_without_kernel", d.primary_target_without_kernel);
  v("shadow_without_blocks", d.shadow_without_blocks);
  v.Nest("time_only_accuracy", [&](auto& n) {
    n("evaluated", d.time_only_evaluated);
    n("agree", d.time_only_agree);
  });
  v("overlapped_primary_kernels", d.overlapped_primary_kernels);
  v("divergence_regions", d.divergence_regions);
  v("in_divergence", d.in_divergence);
  v("primary_in_divergence", d.primary_in_divergence);
  v("ambiguous", d.ambiguous);
  v("ambiguous_regions", d.ambiguous_regions);
  v("alignment", d.alignment);
  v.Omit("autotuning", d.autotuning);
  v("target_kernels", d.target_kernels);
  v.Omit("overlap", d.overlap);
}

template <class V, Is<DivergenceShadowDoc> D>
void Fields(V& v, D& d) {
  v("first_seq", d.first_seq);
  v("last_seq", d.last_seq);
  v("from", d.from);
  v("to", d.to);
}

template <class V, Is<DivergencePrimaryDoc> D>
void Fields(V& v, D& d) {
  v("first", d.first);
  v("last", d.last);
  v("from", d.from);
  v("to", d.to);
}

template <class V, Is<DivergenceDoc> D>
void Fields(V& v, D& d) {
  v("shadow_launches", d.shadow_launches);
  v("primary_launches", d.primary_launches);
  v("diverged", d.diverged);
  v("other_shape", d.other_shape);
  v("inserted", d.inserted);
  v("deleted", d.deleted);
  v("other_kernels", d.other_kernels);
  v("positions", d.positions);
  v.Omit("autotuning_primary", d.autotuning_primary);
  v.Omit("autotuning_shadow", d.autotuning_shadow);
  v.Omit("autotuning_pairs", d.autotuning_pairs);
  v("shadow", d.shadow);
  v("primary", d.primary);
}

template <class V, Is<InstanceDoc> D>
void Fields(V& v, D& d) {
  v("primary", d.primary);
  v("shadow", d.shadow);
  v("primary_name", d.primary_name);
  v("shadow_name", d.shadow_name);
  v("primary_launches", d.primary_launches);
  v("shadow_launches", d.shadow_launches);
  v("class", d.cls);
  v("bounded", d.bounded);
}

template <class V, Is<AutotuningDoc> D>
void Fields(V& v, D& d) {
  v("primary", d.primary);
  v("shadow", d.shadow);
  v("pairs", d.pairs);
  v("one_sided", d.one_sided);
}

template <class V, Is<ReasonDoc> D>
void Fields(V& v, D& d) {
  v("code", d.code);
  v("text", d.text);
  v("remedy", d.remedy);
}

template <class V, Is<DriftDoc> D>
void Fields(V& v, D& d) {
  v("range", d.range);
  v("exact", d.exact);
  v("diverged", d.diverged);
  v("time_only", d.time_only);
  v("unmatched", d.unmatched);
  v("shape_differs", d.shape_differs);
}

template <class V, Is<StepDoc> D>
void Fields(V& v, D& d) {
  v("range", d.range);
  v("kernels", d.kernels);
  v("kernel_ns", d.kernel_ns);
  v("targets", d.targets);
  v("target_ns", d.target_ns);
}

template <class V, Is<LaunchKeyDoc> D>
void Fields(V& v, D& d) {
  v("path", d.path);
  v("ordinal", d.ordinal);
  v("hash", d.hash);
}

template <class V, Is<LaunchPrimaryDoc> D>
void Fields(V& v, D& d) {
  v.Omit("start_ns", d.start_ns);
  v.Omit("end_ns", d.end_ns);
  v.Omit("dur_ns", d.dur_ns);
  v("stream", d.stream);
  v("device", d.device);
  v("grid", d.grid);
  v("block", d.block);
  v("graph", d.graph);
  v("overlapped", d.overlapped);
  v("have_kernel", d.have_kernel);
}

template <class V, Is<StragglerDoc> D>
void Fields(V& v, D& d) {
  v("block", d.block);
  v("sm", d.sm);
  v("exit_ns", d.exit_ns);
}

template <class V, Is<LaunchShadowDoc> D>
void Fields(V& v, D& d) {
  v("seq", d.seq);
  v("grid", d.grid);
  v("blocks_expected", d.blocks_expected);
  v("blocks_seen", d.blocks_seen);
  v("blocks_working", d.blocks_working);
  v("sms_used", d.sms_used);
  v("blocks_per_sm", d.blocks_per_sm);
  v("inversions", d.inversions);
  v("kendall_tau", d.kendall_tau);
  v("straggler", d.straggler);
  v("tail_ns", d.tail_ns);
  v("span_ns", d.span_ns);
  v("block_p50_ns", d.block_p50_ns);
}

template <class V, Is<LaunchDoc> D>
void Fields(V& v, D& d) {
  v("id", d.id);
  v("kernel", d.kernel);
  v("match", d.match);
  v("key", d.key);
  v("shape_differs", d.shape_differs);
  v("ambiguous", d.ambiguous);
  v("region", d.region);
  v("primary", d.primary);
  v("shadow", d.shadow);
}

template <class V, Is<SlowDoc> D>
void Fields(V& v, D& d) {
  v("launch", d.launch);
  v("dur_ns", d.dur_ns);
  v("ratio", d.ratio);
  v("verdicts", d.verdicts);
  v("text", d.text);
}

template <class V, Is<WhySlowDoc> D>
void Fields(V& v, D& d) {
  v("kernel", d.kernel);
  v("grid", d.grid);
  v("block", d.block);
  v("launches", d.launches);
  v("median_dur_ns", d.median_dur_ns);
  v("reference", d.reference);
  v("mad_ns", d.mad_ns);
  v("note", d.note);
  v("slow", d.slow);
}

template <class V, Is<BlockDetailDoc> D>
void Fields(V& v, D& d) {
  v("launch", d.launch);
  v.Rows("blocks", d.blocks, d.malformed_rows);  // rows that are not five integers are counted, never written
}

template <class V, Is<RequestsSourceDoc> D>
void Fields(V& v, D& d) {
  v("trace", d.trace);
  v("schedule", d.schedule);
}

template <class V, Is<RequestsReadDoc> D>
void Fields(V& v, D& d) {
  v("lines", d.lines);
  v("bad_lines", d.bad_lines);
  v("first_bad", d.first_bad);
  v("requests_left_out", d.requests_left_out);
  v("schedule_steps", d.schedule_steps);
  v("schedule_bad_lines", d.schedule_bad_lines);
}

template <class V, Is<RequestRowDoc> D>
void Fields(V& v, D& d) {
  v("id", d.id);
  v("status", d.status);
  v("finish_reason", d.finish_reason);
  v.Omit("error", d.error);
  v("prompt_tokens", d.prompt_tokens);
  v("completion_tokens", d.completion_tokens);
  v("queued_us", d.queued_us);
  v("first_token_us", d.first_token_us);
  v("done_us", d.done_us);
  v("arrival_unix_us", d.arrival_unix_us);
  v("arrival_ns", d.arrival_ns);
  v("prefill_step", d.prefill_step);
  v("steps", d.steps);
  v("prefill_steps", d.prefill_steps);
  v("decode_steps", d.decode_steps);
  v("steps_without_kernels", d.steps_without_kernels);
  v("kernels", d.kernels);
  v("kernel_ns", d.kernel_ns);
  v("kernel_share_ns", d.kernel_share_ns);
  v("targets", d.targets);
  v("target_ns", d.target_ns);
  v("target_launches", d.target_launches);
  v("shadow_exact", d.shadow_exact);
  v("shadow_time_only", d.shadow_time_only);
  v("gpu_start_ns", d.gpu_start_ns);
  v("gpu_end_ns", d.gpu_end_ns);
}

template <class V, Is<ServedStepDoc> D>
void Fields(V& v, D& d) {
  v("step", d.step);
  v("kind", d.kind);
  v("batch", d.batch);
  v("padded", d.padded);
  v("tokens", d.tokens);
  v("range", d.range);
  v("kernels", d.kernels);
  v("kernel_ns", d.kernel_ns);
  v("targets", d.targets);
  v("target_ns", d.target_ns);
  v("start_ns", d.start_ns);
  v("end_ns", d.end_ns);
  v("shadow_exact", d.shadow_exact);
  v("shadow_time_only", d.shadow_time_only);
  v("target_launches", d.target_launches);
}

template <class V, Is<RequestsDoc> D>
void Fields(V& v, D& d) {
  v("source", d.source);
  v("read", d.read);
  v("total", d.total);
  v("steps_total", d.steps_total);
  v("steps_without_kernels", d.steps_without_kernels);
  v("primary_steps_without_request", d.primary_steps_without_request);
  v("warnings", d.warnings);
  v("rows", d.rows);
  v("steps", d.steps);
}

constexpr const char* kFormat = "format";
constexpr const char* kVersion = "version";

template <class V, Is<JoinDoc> D>
void Fields(V& v, D& d) {
  v.Omit("primary", d.primary);
  v.Omit("shadow", d.shadow);
  v.Omit("options", d.options);
  v.Omit("warnings", d.warnings);
  v.Omit("summary", d.summary);
  v.Omit("divergences", d.divergences);
  v.Omit("reasons", d.reasons);
  v.Omit("instances", d.instances);
  v.Omit("drift", d.drift);
  v.Omit("drift_total", d.drift_total);
  v.Omit("steps", d.steps);
  v.Omit("steps_total", d.steps_total);
  v.Omit("launches", d.launches);
  v.Omit("launches_total", d.launches_total);
  v.Omit("why_slow", d.why_slow);
  v.Omit("block_detail", d.block_detail);
  v.Omit("requests", d.requests);
}

// ---- writing ------------------------------------------------------------------------------------------

json Out(const std::string& v) { return v; }
json Out(bool v) { return v; }
json Out(double v) { return v; }
json Out(const json& v) { return v; }
template <class T>
requires std::is_integral_v<T> json Out(T v) { return v; }
json Out(const LossDoc& d);
json Out(const CommandLineDoc& d);
json Out(const StepLaunchDoc& d);
template <class T>
json Out(const std::optional<T>& v);
template <class T>
json Out(const std::vector<T>& v);
template <class T, size_t N>
json Out(const std::array<T, N>& v);
template <class V>
json Out(const std::map<std::string, V>& v);
template <class T>
requires std::is_class_v<T> json Out(const T& d);

struct Writer {
  json& j;
  template <class T>
  void operator()(const char* key, const T& v) {
    j[key] = Out(v);
  }
  template <class T>
  void Omit(const char* key, const std::optional<T>& v) {
    if (v) j[key] = Out(*v);
  }
  template <class F>
  void Nest(const char* key, F&& fn) {
    json sub = json::object();
    Writer w{sub};
    fn(w);
    j[key] = std::move(sub);
  }
  void Rows(const char* key, const std::vector<BlockRowDoc>& rows, uint64_t) { j[key] = Out(rows); }
};

template <class T>
json Out(const std::optional<T>& v) {
  return v ? Out(*v) : json(nullptr);
}
template <class T>
json Out(const std::vector<T>& v) {
  json a = json::array();
  for (const T& x : v) a.push_back(Out(x));
  return a;
}
template <class T, size_t N>
json Out(const std::array<T, N>& v) {
  json a = json::array();
  for (const T& x : v) a.push_back(Out(x));
  return a;
}
template <class V>
json Out(const std::map<std::string, V>& v) {
  json o = json::object();
  for (const auto& [k, x] : v) o[k] = Out(x);
  return o;
}
template <class T>
requires std::is_class_v<T> json Out(const T& d) {
  json o = json::object();
  Writer w{o};
  Fields(w, d);
  return o;
}
json Out(const LossDoc& d) {
  json o = Out(d.values);
  o[kFindings] = Out(d.findings);
  return o;
}
json Out(const CommandLineDoc& d) { return d.text ? json(*d.text) : Out(d.args); }
json Out(const StepLaunchDoc& d) { return json::array({Out(d.start_ns), Out(d.dur_ns), d.launch}); }

// ---- reading ------------------------------------------------------------------------------------------

// Each In takes `j` into `out` if it is of the right type, and says whether it did.
bool In(const json& j, std::string* out) {
  if (!j.is_string()) return false;
  *out = j.get<std::string>();
  return true;
}
bool In(const json& j, bool* out) {
  if (!j.is_boolean()) return false;
  *out = j.get<bool>();
  return true;
}
bool In(const json& j, double* out) {
  if (!j.is_number()) return false;
  *out = j.get<double>();
  return true;
}
bool In(const json& j, json* out) {
  *out = j;
  return true;
}
template <class T>
requires std::is_integral_v<T>
bool In(const json& j, T* out) {
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    *out = static_cast<T>(v);
    return true;
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (v < 0 || static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    } else {
      if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          v > static_cast<int64_t>(std::numeric_limits<T>::max()))
        return false;
    }
    *out = static_cast<T>(v);
    return true;
  }
  if (j.is_number_float()) {  // as the report read numbers: truncated
    const double v = j.get<double>();
    if (!std::isfinite(v) || v < static_cast<double>(std::numeric_limits<T>::min()) ||
        v >= static_cast<double>(std::numeric_limits<T>::max()))
      return false;
    *out = static_cast<T>(v);
    return true;
  }
  return false;
}
bool In(const json& j, LossDoc* out);
bool In(const json& j, CommandLineDoc* out);
bool In(const json& j, StepLaunchDoc* out);
bool In(const json& j, BlockRowDoc* out);
template <class T>
bool In(const json& j, std::optional<T>* out);
template <class T>
bool In(const json& j, std::vector<T>* out);
template <class T, size_t N>
bool In(const json& j, std::array<T, N>* out);
template <class V>
bool In(const json& j, std::map<std::string, V>* out);
template <class T>
requires std::is_class_v<T>
bool In(const json& j, T* out);

struct Reader {
  const json& j;

  const json* Find(const char* key) const {
    if (!j.is_object()) return nullptr;
    auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
  }
  template <class T>
  void operator()(const char* key, T& v) {
    if (const json* x = Find(key)) {
      T t = v;
      if (In(*x, &t)) v = std::move(t);
    }
  }
  template <class T>
  void Omit(const char* key, std::optional<T>& v) {
    (*this)(key, v);
  }
  template <class F>
  void Nest(const char* key, F&& fn) {
    static const json kNone;
    const json* x = Find(key);
    Reader r{x ? *x : kNone};
    fn(r);
  }
  void Rows(const char* key, std::vector<BlockRowDoc>& rows, uint64_t& malformed);
};

template <class T>
bool In(const json& j, std::optional<T>* out) {
  if (j.is_null()) {
    out->reset();
    return true;
  }
  T t{};
  if (!In(j, &t)) {
    out->reset();
    return true;
  }
  *out = std::move(t);
  return true;
}

// Elements of the wrong type are left out (the report skipped them).
template <class T>
bool In(const json& j, std::vector<T>* out) {
  if (!j.is_array()) return false;
  out->clear();
  out->reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    T t{};
    if constexpr (std::is_same_v<T, LaunchDoc>) t.id = i;  // a launch without an id is its index
    if (In(j[i], &t)) out->push_back(std::move(t));
  }
  return true;
}
template <class T, size_t N>
bool In(const json& j, std::array<T, N>* out) {
  if (!j.is_array() || j.size() != N) return false;
  std::array<T, N> a{};
  for (size_t i = 0; i < N; ++i)
    if (!In(j[i], &a[i])) return false;
  *out = a;
  return true;
}
template <class V>
bool In(const json& j, std::map<std::string, V>* out) {
  if (!j.is_object()) return false;
  out->clear();
  for (auto it = j.begin(); it != j.end(); ++it) {
    V v{};
    if (In(it.value(), &v)) out->emplace(it.key(), std::move(v));
  }
  return true;
}
template <class T>
requires std::is_class_v<T>
bool In(const json& j, T* out) {
  if (!j.is_object()) return false;
  Reader r{j};
  Fields(r, *out);
  return true;
}
void Reader::Rows(const char* key, std::vector<BlockRowDoc>& rows, uint64_t& malformed) {
  const json* x = Find(key);
  if (!x || !x->is_array()) return;
  rows.clear();
  rows.reserve(x->size());
  for (const auto& row : *x) {
    BlockRowDoc b{};
    if (In(row, &b))
      rows.push_back(b);
    else
      ++malformed;
  }
}
bool In(const json& j, BlockRowDoc* out) {
  if (!j.is_array() || j.size() != 5) return false;
  BlockRowDoc b{};
  for (size_t i = 0; i < 5; ++i) {
    if (!j[i].is_number_integer()) return false;
    if (!In(j[i], &b[i])) return false;
  }
  *out = b;
  return true;
}
bool In(const json& j, LossDoc* out) {
  if (!j.is_object()) return false;
  LossDoc d;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == kFindings)
      In(it.value(), &d.findings);
    else
      d.values.emplace(it.key(), it.value());
  }
  *out = std::move(d);
  return true;
}
bool In(const json& j, CommandLineDoc* out) {
  CommandLineDoc d;
  if (j.is_string()) {
    d.text = j.get<std::string>();
  } else if (!In(j, &d.args)) {
    return false;
  }
  *out = std::move(d);
  return true;
}
bool In(const json& j, StepLaunchDoc* out) {
  if (!j.is_array() || j.size() != 3) return false;
  StepLaunchDoc d;
  In(j[0], &d.start_ns);
  In(j[1], &d.dur_ns);
  if (!In(j[2], &d.launch)) return false;
  *out = d;
  return true;
}

}  // namespace

json ToJson(const JoinDoc& d) {
  json j = Out(d);
  j[kFormat] = kJoinFormat;
  j[kVersion] = kJoinVersion;
  return j;
}

json ToJson(const LaunchDoc& d) { return Out(d); }
json ToJson(const WhySlowDoc& d) { return Out(d); }
json ToJson(const DriftDoc& d) { return Out(d); }
json ToJson(const StepDoc& d) { return Out(d); }
json ToJson(const RequestRowDoc& d) { return Out(d); }
json ToJson(const ServedStepDoc& d) { return Out(d); }
json ToJson(const RequestsDoc& d) { return Out(d); }

StatusOr<JoinDoc> JoinDocFromJson(const json& j) {
  const json* format = j.is_object() && j.contains(kFormat) ? &j[kFormat] : nullptr;
  if (!format || !format->is_string() || format->get<std::string>() != kJoinFormat)
    return Status::Error(
        "not a joined model: the report needs the JSON of `twinscope join` (format "
        "\"twinscope-join\", docs/join.md)");
  int64_t version = -1;
  const json* v = j.contains(kVersion) ? &j[kVersion] : nullptr;
  if (!v || !In(*v, &version) || version != kJoinVersion)
    return Status::Error("joined model version " + (v ? v->dump() : json().dump()) +
                         " is not one this report knows (1): use the twinscope that wrote the join");
  JoinDoc d;
  Reader r{j};
  Fields(r, d);
  return d;
}

}  // namespace twinscope::views
