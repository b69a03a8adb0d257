// Schedule lines, the published log and the follower's feed (schedule.h).
#include "server/schedule.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "server/protocol.h"

namespace twinscope::demo {
namespace {

using Json = nlohmann::json;
using Out = nlohmann::ordered_json;  // lines keep their fields in a readable order

std::string Dump(const Out& j) { return j.dump(-1, ' ', false, Out::error_handler_t::replace); }

Out Strings(const std::vector<std::string>& v) {
  Out a = Out::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

Status Bad(const std::string& what) { return Status::Error("schedule line: " + what); }

template <typename T>
bool GetInt(const Json& j, const char* key, T* out, int64_t lo, uint64_t hi) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return false;
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    if (v > hi || (lo > 0 && v < static_cast<uint64_t>(lo))) return false;
    *out = static_cast<T>(v);
    return true;
  }
  const int64_t v = it->get<int64_t>();
  if (v < lo || (v >= 0 && static_cast<uint64_t>(v) > hi)) return false;
  *out = static_cast<T>(v);
  return true;
}

Status GetIds(const Json& j, const char* key, std::vector<std::string>* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();  // optional: empty
  if (!it->is_array()) return Bad(std::string("'") + key + "' must be an array of request ids");
  for (const auto& v : *it) {
    if (!v.is_string() || !IsValidRequestId(v.get<std::string>())) {
      return Bad(std::string("'") + key + "' holds something that is not a request id");
    }
    out->push_back(v.get<std::string>());
  }
  return Status::Ok();
}

StatusOr<ScheduleLine> ParseStep(const Json& j) {
  ScheduleLine line;
  line.type = ScheduleLine::Type::kStep;
  ScheduledStep& s = line.step;
  if (!GetInt<uint64_t>(j, "step", &s.index, 0, UINT64_MAX)) return Bad("'step' must be a non-negative integer");
  auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string() || (*kind != "prefill" && *kind != "decode")) {
    return Bad("step " + std::to_string(s.index) + ": 'kind' must be \"prefill\" or \"decode\"");
  }
  s.kind = *kind == "prefill" ? StepKind::kPrefill : StepKind::kDecode;
  const std::string at = "step " + std::to_string(s.index) + ": ";
  if (!GetInt<int>(j, "padded", &s.padded, 1, 1 << 24)) return Bad(at + "'padded' must be an integer from 1");
  auto batch = j.find("batch");
  if (batch == j.end() || !batch->is_array() || batch->empty() || batch->size() > (1u << 16)) {
    return Bad(at + "'batch' must be a non-empty array (at most 65536 entries)");
  }
  for (const auto& e : *batch) {
    StepEntry entry;
    auto id = e.is_object() ? e.find("id") : e.end();
    if (!e.is_object() || id == e.end() || !id->is_string() || !IsValidRequestId(id->get<std::string>())) {
      return Bad(at + "each batch entry needs an 'id' (1-128 visible ASCII characters)");
    }
    entry.id = id->get<std::string>();
    if (!GetInt<int>(e, "tokens", &entry.tokens, 1, 1 << 24)) return Bad(at + entry.id + ": 'tokens' must be >= 1");
    if (s.kind == StepKind::kPrefill) {
      if (!GetInt<int>(e, "max_tokens", &entry.max_tokens, 1, INT32_MAX)) {
        return Bad(at + entry.id + ": a prefill entry needs 'max_tokens' >= 1");
      }
      if (!GetInt<uint64_t>(e, "seed", &entry.seed, 0, UINT64_MAX)) {
        return Bad(at + entry.id + ": a prefill entry needs 'seed' (an unsigned integer)");
      }
    }
    s.batch.push_back(std::move(entry));
  }
  if (Status st = GetIds(j, "aborted", &s.aborted); !st.ok()) return st;
  if (Status st = GetIds(j, "finished", &s.finished); !st.ok()) return st;
  if (auto name = j.find("name"); name != j.end()) {
    if (!name->is_string()) return Bad(at + "'name' must be a string");
    s.name = name->get<std::string>();
  }
  GetInt<int64_t>(j, "start_us", &s.start_us, -1, INT64_MAX);
  GetInt<int64_t>(j, "dur_us", &s.dur_us, -1, INT64_MAX);
  return line;
}

}  // namespace

std::string StepName(StepKind kind, uint64_t index, const std::vector<StepEntry>& batch) {
  std::string s = StepKindName(kind);
  s += " step ";
  s += std::to_string(index);
  s += " [";
  for (size_t i = 0; i < batch.size(); ++i) {
    if (i) s += ',';
    s += batch[i].id;
    s += ':';
    s += std::to_string(batch[i].tokens);
  }
  s += ']';
  return s;
}

std::string FormatHeader(const ScheduleHeader& h) {
  Out sizes = Out::array();
  for (int g : h.graph_sizes) sizes.push_back(g);
  return Dump(Out{{"type", "header"},
                  {"version", h.version},
                  {"model", Out(h.model.ToJson())},
                  {"engine", h.engine},
                  {"block_size", h.block_size},
                  {"max_batch", h.max_batch},
                  {"graph_sizes", sizes},
                  {"started", h.started}});
}

std::string FormatStep(const ScheduledStep& s) {
  Out batch = Out::array();
  for (const auto& e : s.batch) {
    Out je = {{"id", e.id}, {"tokens", e.tokens}};
    if (s.kind == StepKind::kPrefill) {
      je["max_tokens"] = e.max_tokens;
      je["seed"] = e.seed;
    }
    batch.push_back(std::move(je));
  }
  Out j = {{"type", "step"},
           {"step", s.index},
           {"kind", StepKindName(s.kind)},
           {"padded", s.padded},
           {"batch", std::move(batch)},
           {"aborted", Strings(s.aborted)},
           {"finished", Strings(s.finished)},
           {"name", s.name}};
  if (s.start_us >= 0) j["start_us"] = s.start_us;
  if (s.dur_us >= 0) j["dur_us"] = s.dur_us;
  return Dump(j);
}

std::string FormatEnd(const ScheduleEnd& e) {
  return Dump(Out{{"type", "end"}, {"steps", e.steps}, {"reason", e.reason}});
}

StatusOr<ScheduleLine> ParseScheduleLine(std::string_view text) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad("not valid JSON");
  if (!j.is_object()) return Bad("not a JSON object");
  auto type = j.find("type");
  if (type == j.end() || !type->is_string()) return Bad("'type' must be \"header\", \"step\" or \"end\"");
  if (*type == "step") return ParseStep(j);
  ScheduleLine line;
  if (*type == "header") {
    line.type = ScheduleLine::Type::kHeader;
    ScheduleHeader& h = line.header;
    if (!GetInt<int>(j, "version", &h.version, 0, INT32_MAX)) return Bad("header: 'version' must be an integer");
    if (h.version != kScheduleVersion) {
      return Bad("header: version " + std::to_string(h.version) + " is not supported (this server reads version " +
                 std::to_string(kScheduleVersion) + ")");
    }
    auto model = j.find("model");
    if (model == j.end()) return Bad("header: 'model' is missing");
    auto m = ModelFromJson(*model);
    if (!m.ok()) return Bad("header: " + m.status().message());
    h.model = *m;
    if (auto e = j.find("engine"); e != j.end() && e->is_string()) h.engine = e->get<std::string>();
    if (auto e = j.find("started"); e != j.end() && e->is_string()) h.started = e->get<std::string>();
    if (!GetInt<int>(j, "block_size", &h.block_size, 1, 1 << 16)) return Bad("header: 'block_size' must be >= 1");
    if (!GetInt<int>(j, "max_batch", &h.max_batch, 1, 1 << 16)) return Bad("header: 'max_batch' must be >= 1");
    if (auto g = j.find("graph_sizes"); g != j.end()) {
      if (!g->is_array()) return Bad("header: 'graph_sizes' must be an array");
      for (const auto& v : *g) {
        if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (1 << 16)) {
          return Bad("header: 'graph_sizes' must hold batch sizes");
        }
        h.graph_sizes.push_back(v.get<int>());
      }
    }
    return line;
  }
  if (*type == "end") {
    line.type = ScheduleLine::Type::kEnd;
    if (!GetInt<uint64_t>(j, "steps", &line.end.steps, 0, UINT64_MAX)) return Bad("end: 'steps' must be an integer");
    if (auto r = j.find("reason"); r != j.end() && r->is_string()) line.end.reason = r->get<std::string>();
    return line;
  }
  return Bad("'type' must be \"header\", \"step\" or \"end\", not \"" + type->get<std::string>() + "\"");
}

// ---- ScheduleLog ---------------------------------------------------------------

ScheduleLog::~ScheduleLog() {
  if (file_) std::fclose(file_);
}

Status ScheduleLog::OpenFile(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) return Status::Error("cannot write the schedule to " + path + ": " + std::strerror(errno));
  path_ = path;
  return Status::Ok();
}

void ScheduleLog::WriteFile(const std::string& line) {
  if (!file_) return;
  if (std::fputs(line.c_str(), file_) < 0 || std::fputc('\n', file_) < 0 || std::fflush(file_) != 0) {
    if (file_errors_++ == 0) {
      std::fprintf(stderr, "twinscope-demo-server: writing the schedule to %s failed: %s (counted; serving goes on)\n",
                   path_.c_str(), std::strerror(errno));
    }
  }
}

void ScheduleLog::SetHeader(std::string line) {
  std::lock_guard<std::mutex> lock(mu_);
  WriteFile(line);
  header_ = std::move(line);
}

void ScheduleLog::Append(uint64_t index, std::string line) {
  std::lock_guard<std::mutex> lock(mu_);
  WriteFile(line);
  if (lines_.empty()) first_ = index;
  lines_.push_back(std::move(line));
  while (lines_.size() > keep_) {
    lines_.pop_front();
    ++first_;
  }
}

void ScheduleLog::End(std::string line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ended_) return;
  WriteFile(line);
  ended_ = true;
  end_line_ = std::move(line);
}

ScheduleLog::Slice ScheduleLog::Read(uint64_t from, size_t max_steps) const {
  std::lock_guard<std::mutex> lock(mu_);
  Slice s;
  s.header = header_;
  s.oldest = first_;
  const uint64_t end = first_ + lines_.size();
  if (from < first_) {
    s.gone = true;
    s.next = from;
    return s;
  }
  for (uint64_t i = from; i < end && s.steps.size() < max_steps; ++i) s.steps.push_back(lines_[i - first_]);
  s.next = from + s.steps.size();
  if (ended_ && s.next >= end) {
    s.ended = true;
    s.end_line = end_line_;
  }
  return s;
}

uint64_t ScheduleLog::steps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_ + lines_.size();
}

uint64_t ScheduleLog::file_errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return file_errors_;
}

// ---- StepFeed --------------------------------------------------------------------

void StepFeed::SetNotify(std::function<void()> notify) {
  std::lock_guard<std::mutex> lock(mu_);
  notify_ = std::move(notify);
}

void StepFeed::Push(ScheduleLine line) {
  std::function<void()> n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    lines_.push_back(std::move(line));
    n = notify_;
  }
  if (n) n();
}

void StepFeed::Close(Status why) {
  std::function<void()> n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    why_ = std::move(why);
    n = notify_;
  }
  if (n) n();
}

std::optional<ScheduleLine> StepFeed::Front() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (lines_.empty()) return std::nullopt;
  return lines_.front();
}

void StepFeed::Pop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!lines_.empty()) lines_.pop_front();
}

bool StepFeed::drained() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_ && lines_.empty();
}

Status StepFeed::close_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return why_;
}

void ReadScheduleFile(const std::string& path, StepFeed& feed) {
  feed.source = path;
  std::ifstream in(path);
  if (!in) {
    feed.Close(Status::Error("cannot read the schedule " + path + ": " + std::strerror(errno)));
    return;
  }
  std::string text;
  size_t lineno = 0;
  while (std::getline(in, text)) {
    ++lineno;
    if (text.empty()) continue;
    auto line = ParseScheduleLine(text);
    if (!line.ok()) {
      feed.Close(Status::Error(path + ":" + std::to_string(lineno) + ": " + line.status().message()));
      return;
    }
    feed.Push(std::move(*line));
  }
  feed.Close(Status::Ok());
}

}  // namespace twinscope::demo
