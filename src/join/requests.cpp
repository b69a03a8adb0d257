// Per-request views: reads the request trace and the schedule, ties each
// request's steps to the primary's step ranges, target launches and matches.
#include "join/requests.h"

#include <algorithm>
#include <cinttypes>
#include <fstream>
#include <limits>
#include <map>
#include <unordered_map>

#include "join/join_model.h"
#include "join/why_slow.h"
#include "launchkey/launch_key.h"

namespace twinscope::join {
namespace {

using nlohmann::json;

int64_t IntField(const json& j, const char* key, int64_t def = -1) {
  auto it = j.find(key);
  if (it == j.end()) return def;
  if (it->is_number_unsigned()) return static_cast<int64_t>(std::min<uint64_t>(it->get<uint64_t>(), INT64_MAX));
  if (it->is_number_integer()) return it->get<int64_t>();
  return def;
}

std::string StrField(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// One request trace line; "" or what is wrong with it.
std::string ParseRequestLine(const std::string& text, ServedRequest* r) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "not a JSON object";
  auto id = j.find("id");
  if (id == j.end() || !id->is_string() || id->get_ref<const std::string&>().empty())
    return "no request id (\"id\": a non-empty string)";
  r->id = id->get<std::string>();
  r->status = IntField(j, "status", 0);
  r->finish_reason = StrField(j, "finish_reason");
  r->error = StrField(j, "error");
  r->prompt_tokens = IntField(j, "prompt_tokens");
  r->completion_tokens = IntField(j, "completion_tokens");
  r->max_tokens = IntField(j, "max_tokens");
  r->queued_us = IntField(j, "queued_us");
  r->first_token_us = IntField(j, "first_token_us");
  r->done_us = IntField(j, "done_us");
  r->arrival_unix_us = IntField(j, "arrival_unix_us");
  r->prefill_step = IntField(j, "prefill_step");
  auto steps = j.find("steps");
  if (steps == j.end()) return "";
  if (!steps->is_array()) return "\"steps\" is not an array of step indices";
  if (steps->size() > RequestTable::kMaxStepsPerRequest) return "more than 2^20 steps";
  r->steps.reserve(steps->size());
  for (const auto& s : *steps) {
    if (!s.is_number_unsigned() && !(s.is_number_integer() && s.get<int64_t>() >= 0))
      return "\"steps\" holds something that is not a step index";
    r->steps.push_back(s.get<uint64_t>());
  }
  return "";
}

// What the schedule says of one step: its kind, padding and each request's tokens (and, in a version 2
// schedule of an engine adapter, its computed tokens before the step: `offset`, -1 where not given).
struct ScheduleStep {
  std::string kind;
  int64_t padded = -1;
  std::vector<std::pair<std::string, int64_t>> batch;  // id, tokens
  std::vector<int64_t> offsets;                        // one per batch entry
};

bool ParseScheduleLine(const std::string& text, uint64_t* index, ScheduleStep* s) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  if (StrField(j, "type") != "step") return true;  // header / end: fine, nothing to take
  int64_t step = IntField(j, "step");
  if (step < 0) return false;
  *index = static_cast<uint64_t>(step);
  s->kind = StrField(j, "kind");
  s->padded = IntField(j, "padded");
  auto batch = j.find("batch");
  if (batch == j.end() || !batch->is_array()) return false;
  for (const auto& e : *batch) {
    if (!e.is_object()) return false;
    s->batch.emplace_back(StrField(e, "id"), IntField(e, "tokens"));
    s->offsets.push_back(IntField(e, "offset"));
  }
  return true;
}

std::string FileName(const std::string& p) {
  size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

uint64_t Dur(const PrimaryLaunch& p) { return p.have_kernel ? p.end_ns - p.start_ns : 0; }

// The tokens request `r` fed in step `step` (its prompt in its prefill step, else one).
int64_t TokensIn(const ServedRequest& r, uint64_t step) {
  if (r.prefill_step >= 0 && static_cast<uint64_t>(r.prefill_step) == step)
    return std::max<int64_t>(r.prompt_tokens, 1);
  return 1;
}

// Whether request `r` fed prompt tokens in step `index` of kind `kind`: a prefill step or its prefill step; in
// a mixed step (prefill chunks and decode tokens together), a batch entry whose offset lies inside its prompt,
// or, without offsets, one of more than one token.
bool PrefillIn(const ServedRequest& r, uint64_t index, const std::string& kind, const ScheduleStep* sc) {
  if (kind == "prefill" || (r.prefill_step >= 0 && static_cast<uint64_t>(r.prefill_step) == index)) return true;
  if (kind != "mixed" || !sc) return false;
  for (size_t i = 0; i < sc->batch.size(); ++i) {
    if (sc->batch[i].first != r.id) continue;
    if (sc->offsets[i] >= 0 && r.prompt_tokens >= 0) return sc->offsets[i] < r.prompt_tokens;
    return sc->batch[i].second > 1;
  }
  return false;
}

}  // namespace

bool ParseStepRange(std::string_view range, uint64_t* index, std::string* kind) {
  for (std::string_view k : {std::string_view("prefill"), std::string_view("decode"), std::string_view("mixed")}) {
    if (range.substr(0, k.size()) != k || range.substr(k.size(), 6) != " step ") continue;
    std::string_view rest = range.substr(k.size() + 6);
    size_t n = 0;
    uint64_t v = 0;
    while (n < rest.size() && n < 19 && rest[n] >= '0' && rest[n] <= '9')
      v = v * 10 + static_cast<uint64_t>(rest[n++] - '0');
    if (n == 0 || (n < rest.size() && rest[n] != ' ' && rest[n] != '[' && rest[n] != '#')) return false;
    *index = v;
    *kind = std::string(k);
    return true;
  }
  return false;
}

void BuildRequestTable(JoinedModel* mp, const RequestInputs& in) {
  JoinedModel& m = *mp;
  RequestTable& t = m.requests;
  t = RequestTable{};
  if (in.trace.empty()) return;
  t.present = true;
  t.trace_path = in.trace;
  t.schedule_path = in.schedule;

  std::ifstream f(in.trace);
  if (!f) {
    t.warnings.push_back("the request trace " + in.trace + " cannot be read: no per-request views");
  } else {
    std::string line;
    while (std::getline(f, line)) {
      ++t.lines;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      ServedRequest r;
      std::string why = ParseRequestLine(line, &r);
      if (!why.empty()) {
        if (t.bad_lines++ == 0) t.first_bad = "line " + std::to_string(t.lines) + ": " + why;
        continue;
      }
      if (t.requests.size() >= RequestTable::kMaxRequests) {
        ++t.requests_left_out;
        continue;
      }
      t.requests.push_back(std::move(r));
    }
    if (t.bad_lines)
      t.warnings.push_back("the request trace " + FileName(in.trace) + " has " + std::to_string(t.bad_lines) +
                           " lines that are not requests (first: " + t.first_bad + "); they are left out");
    if (t.requests_left_out)
      t.warnings.push_back("the request trace holds more than " + std::to_string(RequestTable::kMaxRequests) +
                           " requests: " + std::to_string(t.requests_left_out) + " are left out of the views");
  }

  std::map<uint64_t, ScheduleStep> schedule;
  if (!in.schedule.empty()) {
    std::ifstream sf(in.schedule);
    if (!sf) {
      t.warnings.push_back("the step schedule " + in.schedule +
                           " cannot be read: batch sizes come from the request trace");
    } else {
      std::string line;
      while (std::getline(sf, line)) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        uint64_t index = 0;
        ScheduleStep s;
        if (!ParseScheduleLine(line, &index, &s)) {
          ++t.schedule_bad_lines;
          continue;
        }
        if (s.kind.empty()) continue;  // header or end line
        schedule[index] = std::move(s);
        ++t.schedule_steps;
      }
      if (t.schedule_bad_lines)
        t.warnings.push_back("the step schedule " + FileName(in.schedule) + " has " +
                             std::to_string(t.schedule_bad_lines) + " lines that do not parse; they are left out");
    }
  }

  // Steps: those the primary ran (by their range names), then those requests name.
  std::map<uint64_t, ServedStep> steps;
  auto step = [&](uint64_t index) -> ServedStep& {
    ServedStep& s = steps[index];
    s.index = index;
    return s;
  };
  for (const StepRow& row : m.steps) {
    uint64_t index = 0;
    std::string kind;
    if (!ParseStepRange(row.range, &index, &kind)) continue;
    ServedStep& s = step(index);
    s.kind = kind;
    if (s.range.empty()) s.range = row.range;
    s.kernels += row.kernels;
    s.kernel_ns += row.kernel_ns;
    s.targets += row.targets;
    s.target_ns += row.target_ns;
    if (row.first_start_ns && (!s.first_start_ns || row.first_start_ns < s.first_start_ns))
      s.first_start_ns = row.first_start_ns;
    s.last_end_ns = std::max(s.last_end_ns, row.last_end_ns);
  }
  std::vector<int64_t> match_of_primary(m.primary.size(), -1);
  for (size_t i = 0; i < m.matches.size(); ++i) match_of_primary[m.matches[i].primary] = static_cast<int64_t>(i);
  for (size_t i = 0; i < m.primary.size(); ++i) {
    const std::string& path = m.primary[i].path;
    uint64_t index = 0;
    std::string kind;
    if (!ParseStepRange(TopLevelRange(path), &index, &kind)) continue;
    ServedStep& s = step(index);
    if (s.kind.empty()) s.kind = kind;
    s.target_launches.push_back(i);
    s.target_matches.push_back(match_of_primary[i]);
    if (match_of_primary[i] >= 0)
      ++(m.matches[static_cast<size_t>(match_of_primary[i])].kind == MatchKind::kExact ? s.shadow_exact
                                                                                       : s.shadow_time_only);
  }
  const bool primary_has_steps = !steps.empty();              // before requests add theirs
  std::unordered_map<uint64_t, int64_t> named_by, tokens_in;  // requests and tokens per step (trace)
  for (const ServedRequest& r : t.requests) {
    for (uint64_t s : r.steps) {
      ++named_by[s];
      tokens_in[s] += TokensIn(r, s);
      step(s);
    }
  }
  for (auto& [index, s] : steps) {
    auto sc = schedule.find(index);
    if (sc != schedule.end()) {
      if (s.kind.empty()) s.kind = sc->second.kind;
      s.batch = static_cast<int64_t>(sc->second.batch.size());
      s.padded = sc->second.padded;
      int64_t tokens = 0;
      for (const auto& e : sc->second.batch) tokens += std::max<int64_t>(e.second, 0);
      s.tokens = tokens;
    } else if (named_by.count(index)) {
      s.batch = named_by[index];
    }
    if (named_by.count(index) == 0 && s.kernels) ++t.primary_steps_without_request;
    if (named_by.count(index) && !s.kernels) ++t.steps_without_kernels;
  }

  // Each request's figures from its steps.
  uint64_t request_steps_outside_batch = 0;
  for (ServedRequest& r : t.requests) {
    int64_t realtime = 0, cupti = 0;  // the arrival on the primary's clock; a value past int64 stays unknown
    if (r.arrival_unix_us > 0 && !__builtin_mul_overflow(r.arrival_unix_us, int64_t{1000}, &realtime) &&
        !__builtin_sub_overflow(realtime, m.primary_to_realtime_ns, &cupti) && cupti > 0)
      r.arrival_ns = static_cast<uint64_t>(cupti);
    for (uint64_t index : r.steps) {
      const ServedStep& s = steps.at(index);
      auto sc = schedule.find(index);
      if (PrefillIn(r, index, s.kind, sc != schedule.end() ? &sc->second : nullptr))
        ++r.prefill_steps;
      else
        ++r.decode_steps;
      if (!s.kernels) ++r.steps_without_kernels;
      r.kernels += s.kernels;
      r.kernel_ns += s.kernel_ns;
      r.targets += s.targets;
      r.target_ns += s.target_ns;
      r.target_launches += s.target_launches.size();
      r.shadow_exact += s.shadow_exact;
      r.shadow_time_only += s.shadow_time_only;
      // Its share of the step: its tokens over the step's (the schedule's where there is one). A request the
      // schedule's batch of that step leaves out gets no share of it (the batch's tokens are the whole), and
      // is counted: the request trace and the schedule disagree there.
      int64_t mine = TokensIn(r, index), all = tokens_in[index];
      if (sc != schedule.end()) {
        all = s.tokens;
        bool in_batch = false;
        for (const auto& e : sc->second.batch)
          if (e.first == r.id) mine = e.second, in_batch = true;
        if (!in_batch) {
          mine = 0;
          ++request_steps_outside_batch;
        }
      }
      if (all > 0 && mine > 0)
        r.kernel_share_ns += static_cast<uint64_t>(static_cast<double>(s.kernel_ns) * static_cast<double>(mine) /
                                                   static_cast<double>(all));
      if (s.first_start_ns && (!r.first_start_ns || s.first_start_ns < r.first_start_ns))
        r.first_start_ns = s.first_start_ns;
      r.last_end_ns = std::max(r.last_end_ns, s.last_end_ns);
    }
  }
  t.steps.reserve(steps.size());
  for (auto& [index, s] : steps) t.steps.push_back(std::move(s));
  if (request_steps_outside_batch)
    t.warnings.push_back(std::to_string(request_steps_outside_batch) +
                         " steps that a request names leave it out of their batch in the step schedule: the request "
                         "gets no share of them (the request trace and the schedule are of different runs?)");

  if (t.steps_without_kernels)
    t.warnings.push_back(std::to_string(t.steps_without_kernels) +
                         " steps that requests name have no kernel in the primary (a trace cut short, or a request "
                         "trace of another run)");
  if (!t.requests.empty() && !primary_has_steps)
    t.warnings.push_back(
        "the primary has no step ranges (\"prefill step N [..]\", \"decode step N [..]\", \"mixed step N [..]\"): "
        "the requests' steps cannot be tied to its kernels");
  for (const auto& w : t.warnings) m.warnings.push_back(w);
}

std::vector<uint64_t> RequestDetailSeqs(const JoinedModel& m, size_t max_requests) {
  std::vector<uint64_t> out;
  const RequestTable& t = m.requests;
  if (!t.present || t.steps.empty()) return out;
  std::unordered_map<uint64_t, const ServedStep*> by_index;
  for (const auto& s : t.steps) by_index[s.index] = &s;
  for (size_t r = 0; r < t.requests.size() && out.size() < max_requests; ++r) {
    int64_t best = -1;
    uint64_t best_dur = 0;
    for (uint64_t index : t.requests[r].steps) {
      auto s = by_index.find(index);
      if (s == by_index.end()) continue;
      const ServedStep& st = *s->second;
      for (size_t k = 0; k < st.target_launches.size(); ++k) {
        const int64_t mt = st.target_matches[k];
        if (mt < 0 || m.matches[static_cast<size_t>(mt)].kind != MatchKind::kExact) continue;
        const uint64_t d = Dur(m.primary[st.target_launches[k]]);
        if (best < 0 || d > best_dur) best = mt, best_dur = d;
      }
    }
    if (best < 0) continue;
    uint64_t seq = m.shadow[m.matches[static_cast<size_t>(best)].shadow].seq;
    if (std::find(out.begin(), out.end(), seq) == out.end()) out.push_back(seq);
  }
  return out;
}

}  // namespace twinscope::join
