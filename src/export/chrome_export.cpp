// Chrome trace-event JSON exporter.
//
// Tracks: the traced process (pid from the header) with one track per CPU
// thread (API calls, NVTX push/pop ranges and marks, launch instants); one
// process per GPU device with one track per stream (kernels, copies, memsets);
// for shadow traces one process per device with one track per SM (thread
// blocks) plus a "launches" track (first block enter to last block exit).
// Flow events link each API call to the GPU activities of its correlation id.
//
// Timestamps are written in microseconds with three decimals (ns precision),
// relative to the earliest timestamp in the trace (otherData.base_ns), so that
// doubles in the viewer keep ns precision.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "export/export.h"

namespace twinscope::exporters {
namespace {

constexpr int64_t kGpuPidBase = 1000000000;
constexpr int64_t kBlocksPidBase = 1100000000;
constexpr int64_t kLaunchSpanTid = 1000000;
constexpr uint32_t kMaxFlowsPerCorrelation = 65535;

bool ValidSpan(uint64_t start, uint64_t end, uint32_t flags = 0) {
  return !(flags & kFlagInvalidTimestamp) && start != 0 && end != 0 && end >= start;
}

// Per-correlation-id counters, dense for the usual small ids.
class CorrelationCounts {
 public:
  uint32_t Get(uint32_t id) const {
    if (id < dense_.size()) return dense_[id];
    auto it = sparse_.find(id);
    return it == sparse_.end() ? 0 : it->second;
  }
  uint32_t Increment(uint32_t id) {
    if (id < kDenseLimit) {
      if (id >= dense_.size()) dense_.resize(std::max<size_t>(id + 1, dense_.size() * 2), 0);
      return dense_[id] == UINT16_MAX ? UINT16_MAX : ++dense_[id];
    }
    return ++sparse_[id];
  }

 private:
  static constexpr uint32_t kDenseLimit = 1u << 26;
  std::vector<uint16_t> dense_;
  std::unordered_map<uint32_t, uint32_t> sparse_;
};

struct LaunchInfo {
  uint32_t device = 0;
  StringId kernel = 0;
  uint64_t first_enter = UINT64_MAX, last_exit = 0;
  uint64_t blocks = 0;
};

// Pass 1: time base, tracks, flow multiplicities, shadow launch spans.
class ScanSink : public RecordSink {
 public:
  explicit ScanSink(bool keep_launches) : keep_launches_(keep_launches) {}
  void Time(uint64_t t) {
    if (t != 0 && t < base) base = t;
  }
  void OnKernel(const KernelRecord& r) override {
    Activity(r.device, r.stream, r.correlation_id, r.start_ns, r.end_ns, r.flags);
  }
  void OnMemcpy(const MemcpyRecord& r) override {
    Activity(r.device, r.stream, r.correlation_id, r.start_ns, r.end_ns, r.flags);
  }
  void OnMemset(const MemsetRecord& r) override {
    Activity(r.device, r.stream, r.correlation_id, r.start_ns, r.end_ns, r.flags);
  }
  void OnApi(const ApiRecord& r) override {
    threads.insert(r.thread_id);
    if (!ValidSpan(r.start_ns, r.end_ns)) return;
    Time(r.start_ns);
    api_correlations.Increment(r.correlation_id);
  }
  void OnNvtx(const NvtxRecord& r) override {
    threads.insert(r.thread_id);
    Time(r.start_ns);
  }
  void OnLaunch(const LaunchRecord& r) override {
    threads.insert(r.thread_id);
    Time(r.cpu_ns);
    if (keep_launches_) {
      LaunchInfo& l = launches[r.seq];
      l.device = r.device;
      l.kernel = r.kernel;
    }
  }
  void OnBlock(const BlockRecord& r) override {
    if (!ValidSpan(r.enter_ns, r.exit_ns)) return;
    Time(r.enter_ns);
    LaunchInfo& l = launches[r.launch_seq];
    l.first_enter = std::min(l.first_enter, r.enter_ns);
    l.last_exit = std::max(l.last_exit, r.exit_ns);
    ++l.blocks;
    sms[r.launch_seq].insert(r.sm);
  }
  void OnStatus(const nlohmann::json& status, bool) override { last_status = status; }

  uint64_t base = UINT64_MAX;
  std::set<std::pair<uint32_t, uint32_t>> streams;  // (device, stream)
  std::set<uint64_t> threads;
  CorrelationCounts activity_correlations;  // valid GPU activities per correlation id
  CorrelationCounts api_correlations;       // valid API records per correlation id
  std::unordered_map<uint64_t, LaunchInfo> launches;
  std::unordered_map<uint64_t, std::set<uint32_t>> sms;  // per launch seq
  nlohmann::json last_status = nlohmann::json::object();

 private:
  void Activity(uint32_t device, uint32_t stream, uint32_t corr, uint64_t start, uint64_t end, uint32_t flags) {
    streams.insert({device, stream});
    if (!ValidSpan(start, end, flags)) return;
    Time(start);
    if (corr) activity_correlations.Increment(corr);
  }
  bool keep_launches_;
};

// Appends JSON text to a buffer and writes it out in large pieces.
class JsonOut {
 public:
  explicit JsonOut(FILE* f) : f_(f) { buf_.reserve(kFlushAt + 4096); }
  JsonOut& Raw(std::string_view s) {
    buf_.append(s);
    return *this;
  }
  JsonOut& Int(int64_t v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
    return *this;
  }
  JsonOut& Uint(uint64_t v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
    return *this;
  }
  // Nanoseconds as microseconds with three decimals.
  JsonOut& Us(int64_t ns) {
    if (ns < 0) {
      buf_ += '-';
      ns = -ns;
    }
    Uint(static_cast<uint64_t>(ns) / 1000);
    char frac[5] = {'.', static_cast<char>('0' + ns / 100 % 10), static_cast<char>('0' + ns / 10 % 10),
                    static_cast<char>('0' + ns % 10), 0};
    buf_.append(frac, 4);
    return *this;
  }
  JsonOut& Str(std::string_view s) {
    buf_ += '"';
    AppendEscaped(buf_, s);
    buf_ += '"';
    return *this;
  }
  // Ends an event; writes out when the buffer is large.
  void EndEvent() {
    buf_ += "}";
    if (buf_.size() >= kFlushAt) Flush();
  }
  bool Flush() {
    if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size()) ok_ = false;
    buf_.clear();
    return ok_;
  }
  bool ok() const { return ok_; }

  // JSON string escaping; bytes that are not valid UTF-8 become '?'.
  static void AppendEscaped(std::string& out, std::string_view s) {
    for (size_t i = 0; i < s.size();) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
        ++i;
      } else if (c < 0x20) {
        char tmp[8];
        std::snprintf(tmp, sizeof tmp, "\\u%04x", c);
        out += tmp;
        ++i;
      } else if (c < 0x80) {
        out += static_cast<char>(c);
        ++i;
      } else {
        size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        bool valid = len && i + len <= s.size();
        for (size_t k = 1; valid && k < len; ++k) valid = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
        if (valid) {
          out.append(s.substr(i, len));
          i += len;
        } else {
          out += '?';
          ++i;
        }
      }
    }
  }

 private:
  static constexpr size_t kFlushAt = 1 << 20;
  FILE* f_;
  std::string buf_;
  bool ok_ = true;
};

const char* CopyKindName(uint8_t k) {
  static const char* kNames[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                 "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
  return k < sizeof kNames / sizeof kNames[0] ? kNames[k] : "Unknown";
}

// Pass 2: writes one event (or a few) per record.
class ChromeSink : public RecordSink {
 public:
  ChromeSink(JsonOut& out, const ScanSink& scan, const std::unordered_map<StringId, std::string>& strings, int64_t pid)
      : out_(out), scan_(scan), strings_(strings), pid_(pid), base_(scan.base == UINT64_MAX ? 0 : scan.base) {}

  void OnKernel(const KernelRecord& r) override {
    if (!ValidSpan(r.start_ns, r.end_ns, r.flags)) {
      ++skipped_invalid;
      return;
    }
    const std::string& name = Name(r.demangled ? r.demangled : r.name, "<kernel>");
    Begin('X', "kernel", name, kGpuPidBase + r.device, r.stream, r.start_ns);
    Dur(r.end_ns - r.start_ns);
    out_.Raw(",\"args\":{\"correlation\":").Uint(r.correlation_id);
    out_.Raw(",\"grid\":[").Uint(r.grid.x).Raw(",").Uint(r.grid.y).Raw(",").Uint(r.grid.z);
    out_.Raw("],\"block\":[").Uint(r.block.x).Raw(",").Uint(r.block.y).Raw(",").Uint(r.block.z);
    out_.Raw("],\"registers\":").Uint(r.registers_per_thread);
    out_.Raw(",\"static_shared\":")
        .Uint(r.static_shared_bytes)
        .Raw(",\"dynamic_shared\":")
        .Uint(r.dynamic_shared_bytes);
    out_.Raw(",\"grid_id\":").Uint(r.grid_id);
    if (r.flags & kFlagGraph)
      out_.Raw(",\"graph_id\":").Uint(r.graph_id).Raw(",\"graph_node_id\":").Uint(r.graph_node_id);
    Key(r.key);
    if (r.demangled && r.name) out_.Raw(",\"mangled\":").Str(Name(r.name, ""));
    out_.Raw(",\"flags\":").Uint(r.flags).Raw("}");
    out_.EndEvent();
    ++written;
    FlowEnd(r.correlation_id, kGpuPidBase + r.device, r.stream, r.start_ns, r.end_ns);
  }

  void OnMemcpy(const MemcpyRecord& r) override {
    if (!ValidSpan(r.start_ns, r.end_ns, r.flags)) {
      ++skipped_invalid;
      return;
    }
    std::string name = std::string("Memcpy ") + CopyKindName(r.copy_kind);
    Begin('X', "memcpy", name, kGpuPidBase + r.device, r.stream, r.start_ns);
    Dur(r.end_ns - r.start_ns);
    out_.Raw(",\"args\":{\"correlation\":").Uint(r.correlation_id).Raw(",\"bytes\":").Uint(r.bytes);
    out_.Raw(",\"src_kind\":").Uint(r.src_kind).Raw(",\"dst_kind\":").Uint(r.dst_kind);
    if (r.flags & kFlagGraph)
      out_.Raw(",\"graph_id\":").Uint(r.graph_id).Raw(",\"graph_node_id\":").Uint(r.graph_node_id);
    out_.Raw("}");
    out_.EndEvent();
    ++written;
    FlowEnd(r.correlation_id, kGpuPidBase + r.device, r.stream, r.start_ns, r.end_ns);
  }

  void OnMemset(const MemsetRecord& r) override {
    if (!ValidSpan(r.start_ns, r.end_ns, r.flags)) {
      ++skipped_invalid;
      return;
    }
    Begin('X', "memset", "Memset", kGpuPidBase + r.device, r.stream, r.start_ns);
    Dur(r.end_ns - r.start_ns);
    out_.Raw(",\"args\":{\"correlation\":").Uint(r.correlation_id).Raw(",\"bytes\":").Uint(r.bytes);
    out_.Raw(",\"value\":").Uint(r.value);
    if (r.flags & kFlagGraph)
      out_.Raw(",\"graph_id\":").Uint(r.graph_id).Raw(",\"graph_node_id\":").Uint(r.graph_node_id);
    out_.Raw("}");
    out_.EndEvent();
    ++written;
    FlowEnd(r.correlation_id, kGpuPidBase + r.device, r.stream, r.start_ns, r.end_ns);
  }

  void OnApi(const ApiRecord& r) override {
    if (!ValidSpan(r.start_ns, r.end_ns)) {
      ++skipped_invalid;
      return;
    }
    const char* cat = r.domain == static_cast<uint32_t>(ApiDomain::kDriver) ? "cuda_driver" : "cuda_runtime";
    Begin('X', cat, Name(r.name, "<api>"), pid_, static_cast<int64_t>(r.thread_id), r.start_ns);
    Dur(r.end_ns - r.start_ns);
    out_.Raw(",\"args\":{\"correlation\":").Uint(r.correlation_id).Raw(",\"cbid\":").Uint(r.cbid).Raw("}");
    out_.EndEvent();
    ++written;
    // One flow per GPU activity of this correlation id (a graph launch has many).
    uint32_t n =
        r.correlation_id ? std::min(scan_.activity_correlations.Get(r.correlation_id), kMaxFlowsPerCorrelation) : 0;
    if (n && flows_started_.Get(r.correlation_id) == 0) {
      flows_started_.Increment(r.correlation_id);
      const uint64_t mid = r.start_ns + (r.end_ns - r.start_ns) / 2;
      for (uint32_t i = 0; i < n; ++i) {
        Begin('s', "flow", "launch", pid_, static_cast<int64_t>(r.thread_id), mid);
        out_.Raw(",\"id\":").Uint(FlowId(r.correlation_id, i));
        out_.EndEvent();
        ++written;
      }
    }
  }

  void OnNvtx(const NvtxRecord& r) override {
    std::string name = Name(r.name, "<nvtx>");
    if (r.domain) name = Name(r.domain, "") + "::" + name;
    const int64_t tid = static_cast<int64_t>(r.thread_id);
    const bool closed = r.end_ns != 0 && r.end_ns >= r.start_ns;
    if (r.kind == static_cast<uint32_t>(NvtxKind::kMark) || !closed) {
      Begin('i', "nvtx", name, pid_, tid, r.start_ns);
      out_.Raw(",\"s\":\"t\"");
      if (!closed && r.kind != static_cast<uint32_t>(NvtxKind::kMark)) out_.Raw(",\"args\":{\"unclosed\":true}");
      out_.EndEvent();
      ++written;
      return;
    }
    if (r.kind == static_cast<uint32_t>(NvtxKind::kStartEnd)) {
      Begin('b', "nvtx", name, pid_, tid, r.start_ns);
      out_.Raw(",\"id\":").Uint(r.range_id);
      out_.EndEvent();
      Begin('e', "nvtx", name, pid_, tid, r.end_ns);
      out_.Raw(",\"id\":").Uint(r.range_id);
      out_.EndEvent();
      written += 2;
      return;
    }
    Begin('X', "nvtx", name, pid_, tid, r.start_ns);
    Dur(r.end_ns - r.start_ns);
    out_.Raw(",\"args\":{\"depth\":").Uint(r.depth).Raw("}");
    out_.EndEvent();
    ++written;
  }

  void OnLaunch(const LaunchRecord& r) override {
    const std::string& kernel = Name(r.kernel, "<kernel>");
    Begin('i', "launch", "launch " + kernel, pid_, static_cast<int64_t>(r.thread_id), r.cpu_ns);
    out_.Raw(",\"s\":\"t\",\"args\":{\"seq\":").Uint(r.seq).Raw(",\"device\":").Uint(r.device);
    out_.Raw(",\"stream\":").Uint(r.stream).Raw(",\"correlation\":").Uint(r.correlation_id);
    out_.Raw(",\"grid\":[").Uint(r.grid.x).Raw(",").Uint(r.grid.y).Raw(",").Uint(r.grid.z);
    out_.Raw("],\"block\":[").Uint(r.block.x).Raw(",").Uint(r.block.y).Raw(",").Uint(r.block.z).Raw("]");
    if (r.graph_exec_id) out_.Raw(",\"graph_exec_id\":").Uint(r.graph_exec_id);
    if (r.blocks_recorded) out_.Raw(",\"blocks_recorded\":").Uint(r.blocks_recorded);
    Key(r.key);
    out_.Raw("}");
    out_.EndEvent();
    ++written;
    // Shadow: the launch's span on its device's block process.
    auto it = scan_.launches.find(r.seq);
    if (it != scan_.launches.end() && it->second.blocks) {
      const LaunchInfo& l = it->second;
      Begin('X', "launch", kernel, kBlocksPidBase + r.device, kLaunchSpanTid, l.first_enter);
      Dur(l.last_exit - l.first_enter);
      out_.Raw(",\"args\":{\"seq\":").Uint(r.seq).Raw(",\"blocks\":").Uint(l.blocks);
      out_.Raw(",\"blocks_expected\":").Uint(uint64_t{r.grid.x} * r.grid.y * r.grid.z);
      Key(r.key);
      out_.Raw("}");
      out_.EndEvent();
      ++written;
    }
  }

  void OnBlock(const BlockRecord& r) override {
    if (!ValidSpan(r.enter_ns, r.exit_ns)) {
      ++skipped_invalid;
      return;
    }
    auto it = scan_.launches.find(r.launch_seq);
    const uint32_t device = it == scan_.launches.end() ? 0 : it->second.device;
    const StringId kernel = it == scan_.launches.end() ? 0 : it->second.kernel;
    Begin('X', "block", Name(kernel, "block"), kBlocksPidBase + device, r.sm, r.enter_ns);
    Dur(r.exit_ns - r.enter_ns);
    out_.Raw(",\"args\":{\"launch_seq\":").Uint(r.launch_seq).Raw(",\"block\":[").Uint(r.x).Raw(",").Uint(r.y);
    out_.Raw(",").Uint(r.z).Raw("],\"block_linear\":").Uint(r.block_linear).Raw(",\"order\":").Uint(r.order);
    out_.Raw(",\"sm\":").Uint(r.sm).Raw("}");
    out_.EndEvent();
    ++written;
  }

  void OnStatus(const nlohmann::json& status, bool) override { last_status = status; }

  uint64_t written = 0;
  uint64_t skipped_invalid = 0;
  nlohmann::json last_status = nlohmann::json::object();

 private:
  static uint64_t FlowId(uint32_t corr, uint32_t i) { return (uint64_t{corr} << 16) | i; }

  const std::string& Name(StringId id, const char* fallback) {
    auto it = names_.find(id);
    if (it != names_.end()) return it->second;
    auto s = strings_.find(id);
    return names_[id] = (id == 0 || s == strings_.end()) ? std::string(fallback) : s->second;
  }

  void Begin(char ph, std::string_view cat, std::string_view name, int64_t pid, int64_t tid, uint64_t ts) {
    out_.Raw(first_ ? "\n{\"ph\":\"" : ",\n{\"ph\":\"");
    first_ = false;
    char p[2] = {ph, 0};
    out_.Raw(p).Raw("\",\"cat\":\"").Raw(cat).Raw("\",\"name\":").Str(name);
    out_.Raw(",\"pid\":").Int(pid).Raw(",\"tid\":").Int(tid).Raw(",\"ts\":").Us(static_cast<int64_t>(ts - base_));
  }
  void Dur(uint64_t ns) { out_.Raw(",\"dur\":").Us(static_cast<int64_t>(ns)); }
  void Key(const LaunchKey& k) {
    if (!k.hash && !k.path) return;
    char hex[24];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(k.hash));
    out_.Raw(",\"key_path\":").Str(Name(k.path, "")).Raw(",\"key_ordinal\":").Uint(k.ordinal);
    out_.Raw(",\"key_hash\":\"").Raw(hex).Raw("\"");
  }
  void FlowEnd(uint32_t corr, int64_t pid, int64_t tid, uint64_t start, uint64_t end) {
    if (!corr || scan_.api_correlations.Get(corr) == 0) return;
    uint32_t i = flows_done_.Increment(corr) - 1;
    if (i >= std::min(scan_.activity_correlations.Get(corr), kMaxFlowsPerCorrelation)) return;
    Begin('f', "flow", "launch", pid, tid, start + (end - start) / 2);
    out_.Raw(",\"bp\":\"e\",\"id\":").Uint(FlowId(corr, i));
    out_.EndEvent();
    ++written;
  }

 public:
  // Metadata events for every track seen in pass 1.
  void WriteMetadata(const nlohmann::json& header) {
    std::string process = header.value("role", std::string("traced")) + " process";
    if (header.contains("command_line") && header["command_line"].is_array() && !header["command_line"].empty() &&
        header["command_line"][0].is_string()) {
      process = header["command_line"][0].get<std::string>() + " (" + header.value("role", std::string("traced")) + ")";
    }
    Meta("process_name", pid_, 0, "name", process);
    Meta("process_sort_index", pid_, 0, "sort_index", 0);
    for (uint64_t t : scan_.threads) {
      const int64_t tid = static_cast<int64_t>(t);
      Meta("thread_name", pid_, tid, "name",
           tid == pid_ ? "main thread " + std::to_string(t) : "thread " + std::to_string(t));
    }
    std::set<uint32_t> devices;
    for (const auto& [device, stream] : scan_.streams) {
      if (devices.insert(device).second) {
        Meta("process_name", kGpuPidBase + device, 0, "name", "GPU " + std::to_string(device) + DeviceName(device));
        Meta("process_sort_index", kGpuPidBase + device, 0, "sort_index", 10 + device);
      }
      Meta("thread_name", kGpuPidBase + device, stream, "name", "stream " + std::to_string(stream));
      Meta("thread_sort_index", kGpuPidBase + device, stream, "sort_index", stream);
    }
    std::set<std::pair<uint32_t, uint32_t>> sm_tracks;
    std::set<uint32_t> block_devices;
    for (const auto& [seq, sms] : scan_.sms) {
      auto it = scan_.launches.find(seq);
      const uint32_t device = it == scan_.launches.end() ? 0 : it->second.device;
      block_devices.insert(device);
      for (uint32_t sm : sms) sm_tracks.insert({device, sm});
    }
    for (uint32_t device : block_devices) {
      Meta("process_name", kBlocksPidBase + device, 0, "name",
           "GPU " + std::to_string(device) + DeviceName(device) + " thread blocks by SM");
      Meta("process_sort_index", kBlocksPidBase + device, 0, "sort_index", 20 + device);
      Meta("thread_name", kBlocksPidBase + device, kLaunchSpanTid, "name", "traced launches");
      Meta("thread_sort_index", kBlocksPidBase + device, kLaunchSpanTid, "sort_index", -1);
    }
    for (const auto& [device, sm] : sm_tracks) {
      Meta("thread_name", kBlocksPidBase + device, sm, "name", "SM " + std::to_string(sm));
      Meta("thread_sort_index", kBlocksPidBase + device, sm, "sort_index", sm);
    }
  }

 private:
  // " (NVIDIA H200)" from the collector's "devices" metadata, or "".
  std::string DeviceName(uint32_t device) const {
    const auto& devices = scan_.last_status.value("devices", nlohmann::json::array());
    if (!devices.is_array()) return "";
    for (const auto& d : devices) {
      if (d.is_object() && d.value("ordinal", ~0u) == device && d.contains("name") && d["name"].is_string())
        return " (" + d["name"].get<std::string>() + ")";
    }
    return "";
  }

  template <typename V>
  void Meta(const char* what, int64_t pid, int64_t tid, const char* key, const V& value) {
    out_.Raw(first_ ? "\n{\"ph\":\"M\",\"name\":\"" : ",\n{\"ph\":\"M\",\"name\":\"");
    first_ = false;
    out_.Raw(what).Raw("\",\"pid\":").Int(pid).Raw(",\"tid\":").Int(tid).Raw(",\"args\":{\"").Raw(key).Raw("\":");
    if constexpr (std::is_arithmetic_v<V>) {
      out_.Int(static_cast<int64_t>(value));
    } else {
      out_.Str(value);
    }
    out_.Raw("}");
    out_.EndEvent();
    ++written;
  }

  JsonOut& out_;
  const ScanSink& scan_;
  const std::unordered_map<StringId, std::string>& strings_;
  int64_t pid_;
  uint64_t base_;
  bool first_ = true;
  std::unordered_map<StringId, std::string> names_;
  CorrelationCounts flows_started_;  // API records that started their flows
  CorrelationCounts flows_done_;     // activities that ended a flow
};

void AddReadWarnings(const ReadReport& report, std::vector<std::string>* warnings) {
  if (report.end == ReadEnd::kComplete) return;
  warnings->push_back(std::string("the trace read ended ") + ReadEndName(report.end) +
                      (report.message.empty() ? "" : ": " + report.message) + "; exported what was readable");
}

}  // namespace

StatusOr<ExportResult> ExportChrome(const std::string& trace, const std::string& out) {
  std::string error;
  auto scan_reader = TraceReader::Open(trace, &error);
  if (!scan_reader) return Status::Error(error);
  const nlohmann::json header = scan_reader->header();
  ScanSink scan(header.value("role", std::string()) == "shadow");
  scan_reader->Read(scan);

  auto reader = TraceReader::Open(trace, &error);
  if (!reader) return Status::Error(error);
  FILE* f = std::fopen(out.c_str(), "wb");
  if (!f) return Status::Error("cannot write " + out + ": " + std::strerror(errno));
  // The full string table from pass 1: records of pass 2 may come before the
  // string chunk that names them.
  const auto strings = scan_reader->strings();
  scan_reader.reset();

  JsonOut json(f);
  int64_t pid = header.contains("pid") && header["pid"].is_number_integer() ? header["pid"].get<int64_t>() : 1;
  ChromeSink sink(json, scan, strings, pid);
  json.Raw("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
  sink.WriteMetadata(header);
  ExportResult result;
  result.report = reader->Read(sink);
  result.records = result.report.records;
  result.written = sink.written;
  result.skipped_invalid = sink.skipped_invalid;
  AddReadWarnings(result.report, &result.warnings);
  if (sink.skipped_invalid) {
    result.warnings.push_back(std::to_string(sink.skipped_invalid) +
                              " records with invalid timestamps were not placed on the timeline (counted in "
                              "otherData.skipped_invalid_timestamps)");
  }
  nlohmann::json other = {{"twinscope_header", header},
                          {"base_ns", scan.base == UINT64_MAX ? 0 : scan.base},
                          {"read_end", ReadEndName(result.report.end)},
                          {"read_message", result.report.message},
                          {"records", result.report.records},
                          {"skipped_invalid_timestamps", sink.skipped_invalid},
                          {"status", sink.last_status}};
  std::string other_text = other.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  json.Raw("\n],\"otherData\":").Raw(other_text).Raw("}\n");
  bool ok = json.Flush();
  if (std::fclose(f) != 0) ok = false;
  if (!ok) return Status::Error("error writing " + out + ": " + std::strerror(errno) + " (disk full?)");
  return result;
}

}  // namespace twinscope::exporters
