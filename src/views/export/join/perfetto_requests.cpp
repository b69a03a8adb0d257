// Per-request tracks of the joined Perfetto trace (perfetto_requests.h).
#include "views/export/join/perfetto_requests.h"

#include <algorithm>

namespace twinscope::exporters {
namespace {

using pftrace::TrackDescriptor;
using pftrace::TrackEvent;

constexpr uint64_t kRequestFlowBit = 1ull << 61;  // step slice -> kernel; join flows use bit 62

constexpr const char* kArrivalToDonePair =
    "arrival to done: the server's times, put on the primary's clock by its header's clock pair";
constexpr const char* kArrivalToDoneAssumed =
    "arrival to done: the server's times, its CLOCK_REALTIME taken as the primary's clock (the primary's header has "
    "no clock pair)";
constexpr const char* kArrivalToLastStep = "arrival to its last step's end: the request trace gives no done time";
constexpr const char* kGpuSpan = "its steps' GPU span: the request trace gives no arrival time";

// t + us microseconds, saturated.
uint64_t After(uint64_t t, int64_t us) {
  uint64_t ns = 0, end = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(us), uint64_t{1000}, &ns) || __builtin_add_overflow(t, ns, &end))
    return UINT64_MAX;
  return end;
}

std::string StepName(const join::ServedStep& s) {
  return (s.kind.empty() ? std::string("step ") : s.kind + " step ") + std::to_string(s.index);
}

}  // namespace

RequestTracks::RequestTracks(PerfettoWriter& w, const join::JoinedModel& m, uint64_t base_ns)
    : w_(w), m_(m), base_(base_ns) {
  for (const auto& s : m.requests.steps) steps_[s.index] = &s;
  for (size_t i = 0; i < m.primary.size(); ++i)
    if (m.primary[i].have_kernel) links_.emplace(SpotOf(m.primary[i]), KernelLinks{i, {}});
}

uint64_t RequestTracks::Category(uint64_t& slot, const char* name) {
  if (!slot) slot = w_.CategoryIid(name);
  return slot;
}

std::optional<RequestTracks::Life> RequestTracks::PlaceLife(const join::ServedRequest& r) const {
  if (r.arrival_ns) {
    if (r.done_us >= 0)
      return Life{r.arrival_ns, After(r.arrival_ns, r.done_us),
                  m_.primary_to_realtime_ns ? kArrivalToDonePair : kArrivalToDoneAssumed};
    return Life{r.arrival_ns, std::max(r.arrival_ns, r.last_end_ns), kArrivalToLastStep};
  }
  if (r.first_start_ns && r.last_end_ns) return Life{r.first_start_ns, r.last_end_ns, kGpuSpan};
  return std::nullopt;
}

void RequestTracks::Write(const RequestTrackBounds& bounds) {
  const join::RequestTable& t = m_.requests;
  counts.requests = t.requests.size();
  TrackDescriptor g;
  g.set_name("Requests");
  g.set_description(
      "One track per request of the server's request trace (" + t.trace_path +
      "), in its order: the request's life (arrival to done) with an instant at its first token, and a slice per "
      "step that served it (the step's GPU span), linked by flows to the kernels of the step's target launches.");
  g.set_child_ordering(TrackDescriptor::EXPLICIT);
  g.set_sibling_order_rank(-1);
  group_ = w_.AddTrack(std::move(g));
  for (size_t i = 0; i < t.requests.size(); ++i) {
    const join::ServedRequest& r = t.requests[i];
    if (counts.drawn >= bounds.max_requests) {
      ++counts.over_bounds;
      continue;
    }
    auto life = PlaceLife(r);
    if (!life) {
      ++counts.not_placed;
      continue;
    }
    ++counts.drawn;
    if (!r.arrival_ns) ++counts.without_arrival;
    WriteRequest(r, *life, static_cast<int32_t>(std::min<size_t>(i, INT32_MAX)), bounds);
  }
}

void RequestTracks::WriteRequest(const join::ServedRequest& r, const Life& life, int32_t rank,
                                 const RequestTrackBounds& bounds) {
  const std::string name = "request " + r.id;
  TrackDescriptor d;
  d.set_parent_uuid(group_);
  d.set_name(name);
  d.set_sibling_order_rank(rank);
  const uint64_t track = w_.AddTrack(std::move(d));
  Lanes beside(group_, name, rank);  // steps that do not nest inside the life slice

  w_.Event(Ts(life.start), TrackEvent::TYPE_SLICE_BEGIN, track);
  w_.SetName(w_.NameIid(name));
  w_.SetCategory(Category(cat_request_, "request"));
  w_.ArgUniqueString("request", r.id);
  w_.ArgInt("status", r.status);
  if (!r.finish_reason.empty()) w_.ArgString("finish_reason", r.finish_reason);
  if (!r.error.empty()) w_.ArgUniqueString("error", r.error);
  auto known = [&](const char* arg, int64_t v) {
    if (v >= 0) w_.ArgInt(arg, v);
  };
  known("prompt_tokens", r.prompt_tokens);
  known("completion_tokens", r.completion_tokens);
  known("max_tokens", r.max_tokens);
  known("queued_us", r.queued_us);
  known("ttft_us", r.first_token_us);
  known("done_us", r.done_us);
  known("prefill_step", r.prefill_step);
  w_.Arg("steps", r.steps.size());
  w_.Arg("prefill_steps", r.prefill_steps);
  w_.Arg("decode_steps", r.decode_steps);
  w_.Arg("steps_without_kernels", r.steps_without_kernels);
  w_.Arg("kernel_ns", r.kernel_ns);
  w_.Arg("kernel_share_ns", r.kernel_share_ns);
  w_.Arg("target_launches", r.target_launches);
  w_.Arg("shadow_exact", r.shadow_exact);
  w_.Arg("shadow_time_only", r.shadow_time_only);
  w_.ArgString("placed", life.placed);
  w_.Emit();

  uint64_t nested_until = life.start;
  for (uint64_t index : r.steps) {
    auto it = steps_.find(index);
    if (it == steps_.end()) continue;  // the model has every step a request names
    const join::ServedStep& s = *it->second;
    if (!s.first_start_ns || !s.last_end_ns) {
      ++counts.steps_without_kernels;
      continue;
    }
    if (counts.step_slices >= bounds.max_step_slices) {
      ++counts.steps_over_bounds;
      continue;
    }
    uint64_t on = track;
    if (s.first_start_ns >= nested_until && s.last_end_ns <= life.end) {
      nested_until = s.last_end_ns;
    } else {
      on = beside.Place(w_, s.first_start_ns, s.last_end_ns);
      ++counts.steps_off_life;
    }
    WriteStep(s, on, bounds);
  }

  if (r.arrival_ns && r.first_token_us >= 0) {
    w_.Event(Ts(After(r.arrival_ns, r.first_token_us)), TrackEvent::TYPE_INSTANT, track);
    w_.SetName(w_.NameIid("first token"));
    w_.SetCategory(Category(cat_request_, "request"));
    w_.ArgInt("ttft_us", r.first_token_us);
    w_.Emit();
  }
  w_.Event(Ts(life.end), TrackEvent::TYPE_SLICE_END, track);
  w_.Emit();
}

void RequestTracks::WriteStep(const join::ServedStep& s, uint64_t track, const RequestTrackBounds& bounds) {
  std::string& ids = launch_ids_[s.index];
  if (ids.empty()) {
    ids = "[";
    for (size_t k = 0; k < s.target_launches.size(); ++k) ids += (k ? "," : "") + std::to_string(s.target_launches[k]);
    ids += "]";
  }
  w_.Event(Ts(s.first_start_ns), TrackEvent::TYPE_SLICE_BEGIN, track);
  w_.SetName(w_.NameIid(StepName(s)));
  w_.SetCategory(Category(cat_step_, "served_step"));
  w_.Arg("step", s.index);
  if (s.batch >= 0) w_.ArgInt("batch", s.batch);
  if (s.padded >= 0) w_.ArgInt("padded", s.padded);
  if (s.tokens >= 0) w_.ArgInt("tokens", s.tokens);
  if (!s.range.empty()) w_.ArgString("range", s.range);
  w_.Arg("kernels", s.kernels);
  w_.Arg("kernel_ns", s.kernel_ns);
  w_.Arg("target_ns", s.target_ns);
  w_.Arg("target_launches", s.target_launches.size());
  w_.Arg("shadow_exact", s.shadow_exact);
  w_.Arg("shadow_time_only", s.shadow_time_only);
  w_.ArgString("launch_ids", ids);
  uint64_t left_out = 0;
  for (size_t launch : s.target_launches) {
    const join::PrimaryLaunch& p = m_.primary[launch];
    auto link = p.have_kernel ? links_.find(SpotOf(p)) : links_.end();
    if (link == links_.end()) {
      ++counts.launches_without_kernel;
      continue;
    }
    if (counts.flows >= bounds.max_flows) {
      ++left_out;
      continue;
    }
    const uint64_t id = kRequestFlowBit | next_flow_++;
    w_.AddFlow(id);
    link->second.flows.push_back(id);
    ++counts.flows;
  }
  if (left_out) w_.Arg("flows_left_out", left_out);
  counts.flows_over_bounds += left_out;
  w_.Emit();
  w_.Event(Ts(s.last_end_ns), TrackEvent::TYPE_SLICE_END, track);
  w_.Emit();
  ++counts.step_slices;
}

std::optional<RequestTracks::KernelLinks> RequestTracks::Take(const KernelSpot& spot) {
  auto it = links_.find(spot);
  if (it == links_.end()) return std::nullopt;
  KernelLinks l = std::move(it->second);
  links_.erase(it);
  return l;
}

void RequestTracks::Finish() {
  for (const auto& [spot, l] : links_) counts.flows_unended += l.flows.size();
}

void RequestTracks::SummaryArgs(const RequestTrackBounds& bounds) {
  const RequestTrackCounts& c = counts;
  w_.Arg("requests", c.requests);
  w_.Arg("requests_drawn", c.drawn);
  w_.Arg("requests_over_bounds", c.over_bounds);
  w_.Arg("requests_not_placed", c.not_placed);
  w_.Arg("requests_without_arrival", c.without_arrival);
  w_.Arg("request_step_slices", c.step_slices);
  w_.Arg("request_steps_without_kernels", c.steps_without_kernels);
  w_.Arg("request_steps_over_bounds", c.steps_over_bounds);
  w_.Arg("request_steps_off_life", c.steps_off_life);
  w_.Arg("request_flows", c.flows);
  w_.Arg("request_flows_over_bounds", c.flows_over_bounds);
  w_.Arg("request_launches_without_kernel", c.launches_without_kernel);
  w_.Arg("request_flows_unended", c.flows_unended);
  w_.Arg("max_request_tracks", bounds.max_requests);
  w_.Arg("max_request_step_slices", bounds.max_step_slices);
  w_.Arg("max_request_flows", bounds.max_flows);
}

std::vector<std::string> RequestTracks::Warnings(const RequestTrackBounds& bounds) const {
  const RequestTrackCounts& c = counts;
  std::vector<std::string> w;
  if (c.over_bounds || c.steps_over_bounds || c.flows_over_bounds)
    w.push_back("requests: " + CountText(c.drawn) + " of " + CountText(c.requests) + " requests, " +
                CountText(c.step_slices) + " step slices and " + CountText(c.flows) + " flows drawn (at most " +
                CountText(bounds.max_requests) + ", " + CountText(bounds.max_step_slices) + " and " +
                CountText(bounds.max_flows) + "); left out: " + CountText(c.over_bounds) + " requests, " +
                CountText(c.steps_over_bounds) + " step slices, " + CountText(c.flows_over_bounds) + " flows");
  if (c.not_placed)
    w.push_back(CountText(c.not_placed) +
                " requests have neither an arrival time nor a step with kernels: they have no track");
  if (c.without_arrival)
    w.push_back(CountText(c.without_arrival) +
                " requests have no arrival time (arrival_unix_us) in the request trace: their tracks span their "
                "steps' GPU time");
  if (c.steps_off_life)
    w.push_back(CountText(c.steps_off_life) +
                " step slices lie outside their request's life slice (the server's clock against the primary's): "
                "drawn beside it on the request's track");
  if (c.flows_unended)
    w.push_back(CountText(c.flows_unended) + " flows from request steps found no kernel slice to end at");
  return w;
}

}  // namespace twinscope::exporters
