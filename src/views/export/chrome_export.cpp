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
#include <memory>
#include <set>
#include <unordered_map>

#include "views/export/chrome_json.h"
#include "views/export/timeline_scan.h"

namespace twinscope::exporters {
namespace {

constexpr int64_t kLaunchSpanTid = 1000000;
// Thread ids of a merged run's GPU tracks inside their process group: GPU
// streams, then blocks by SM (one range of kGroupedStride per device; the
// range's last id is the traced launches' track). Above every OS thread id.
constexpr int64_t kGroupedGpuTid = 1000000000;
constexpr int64_t kGroupedBlockTid = 2000000000;
constexpr int64_t kGroupedStride = 1000000;

// Pass 2: writes one event (or a few) per record.
class ChromeSink : public RecordSink {
 public:
  ChromeSink(JsonOut& out, const TimelineScan& scan, const std::unordered_map<StringId, std::string>& strings,
             int64_t pid)
      : out_(out), scan_(scan), strings_(strings), pid_(pid), base_(scan.Base()) {}
  // One process of a merged run: every track under `pid`, times moved by
  // `offset` onto the run's clock and relative to `base`, flow ids tagged with `index`.
  ChromeSink(JsonOut& out, const TimelineScan& scan, const std::unordered_map<StringId, std::string>& strings,
             int64_t pid, int64_t offset, int64_t base, uint32_t index)
      : out_(out),
        scan_(scan),
        strings_(strings),
        pid_(pid),
        base_(0),
        grouped_(true),
        offset_(offset - base),
        flow_tag_(uint64_t{index} << 48) {}

  void OnKernel(const KernelRecord& r) override {
    if (!ValidSpan(r.start_ns, r.end_ns, r.flags)) {
      ++skipped_invalid;
      return;
    }
    const std::string& name = Name(r.demangled ? r.demangled : r.name, "<kernel>");
    Begin('X', "kernel", name, GpuPid(r.device), GpuTid(r.device, r.stream), r.start_ns);
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
    FlowEnd(r.correlation_id, GpuPid(r.device), GpuTid(r.device, r.stream), r.start_ns, r.end_ns);
  }

  void OnMemcpy(const MemcpyRecord& r) override {
    if (!ValidSpan(r.start_ns, r.end_ns, r.flags)) {
      ++skipped_invalid;
      return;
    }
    std::string name = std::string("Memcpy ") + CopyKindName(r.copy_kind);
    Begin('X', "memcpy", name, GpuPid(r.device), GpuTid(r.device, r.stream), r.start_ns);
    Dur(r.end_ns - r.start_ns);
    out_.Raw(",\"args\":{\"correlation\":").Uint(r.correlation_id).Raw(",\"bytes\":").Uint(r.bytes);
    out_.Raw(",\"src_kind\":").Uint(r.src_kind).Raw(",\"dst_kind\":").Uint(r.dst_kind);
    if (r.flags & kFlagGraph)
      out_.Raw(",\"graph_id\":").Uint(r.graph_id).Raw(",\"graph_node_id\":").Uint(r.graph_node_id);
    out_.Raw("}");
    out_.EndEvent();
    ++written;
    FlowEnd(r.correlation_id, GpuPid(r.device), GpuTid(r.device, r.stream), r.start_ns, r.end_ns);
  }

  void OnMemset(const MemsetRecord& r) override {
    if (!ValidSpan(r.start_ns, r.end_ns, r.flags)) {
      ++skipped_invalid;
      return;
    }
    Begin('X', "memset", "Memset", GpuPid(r.device), GpuTid(r.device, r.stream), r.start_ns);
    Dur(r.end_ns - r.start_ns);
    out_.Raw(",\"args\":{\"correlation\":").Uint(r.correlation_id).Raw(",\"bytes\":").Uint(r.bytes);
    out_.Raw(",\"value\":").Uint(r.value);
    if (r.flags & kFlagGraph)
      out_.Raw(",\"graph_id\":").Uint(r.graph_id).Raw(",\"graph_node_id\":").Uint(r.graph_node_id);
    out_.Raw("}");
    out_.EndEvent();
    ++written;
    FlowEnd(r.correlation_id, GpuPid(r.device), GpuTid(r.device, r.stream), r.start_ns, r.end_ns);
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
    const uint32_t n = scan_.FlowsOf(r.correlation_id);
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
      Begin('X', "launch", kernel, BlockPid(r.device), LaunchTid(r.device), l.first_enter);
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
    Begin('X', "block", Name(kernel, "block"), BlockPid(device), BlockTid(device, r.sm), r.enter_ns);
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
  uint64_t FlowId(uint32_t corr, uint32_t i) const { return flow_tag_ | (uint64_t{corr} << 16) | i; }

  // Where GPU streams, blocks by SM and traced launch spans go: processes of
  // their own for one trace; threads of the traced process in a merged run.
  int64_t GpuPid(uint32_t device) const { return grouped_ ? pid_ : kGpuPidBase + device; }
  int64_t GpuTid(uint32_t device, uint32_t stream) const {
    return grouped_ ? kGroupedGpuTid + int64_t{device} * kGroupedStride + stream % kGroupedStride : stream;
  }
  int64_t BlockPid(uint32_t device) const { return grouped_ ? pid_ : kBlocksPidBase + device; }
  int64_t BlockTid(uint32_t device, uint32_t sm) const {
    return grouped_ ? kGroupedBlockTid + int64_t{device} * kGroupedStride + sm % (kGroupedStride - 1) : sm;
  }
  int64_t LaunchTid(uint32_t device) const {
    return grouped_ ? kGroupedBlockTid + int64_t{device} * kGroupedStride + kGroupedStride - 1 : kLaunchSpanTid;
  }

  const std::string& Name(StringId id, const char* fallback) {
    auto it = names_.find(id);
    if (it != names_.end()) return it->second;
    auto s = strings_.find(id);
    return names_[id] = (id == 0 || s == strings_.end()) ? std::string(fallback) : s->second;
  }

  void Begin(char ph, std::string_view cat, std::string_view name, int64_t pid, int64_t tid, uint64_t ts) {
    out_.BeginEvent(ph, cat, name, pid, tid,
                    grouped_ ? static_cast<int64_t>(ts) + offset_ : static_cast<int64_t>(ts - base_));
  }
  void Dur(uint64_t ns) { out_.Dur(ns); }
  void Key(const LaunchKey& k) {
    if (!k.hash && !k.path) return;
    out_.Raw(",\"key_path\":").Str(Name(k.path, "")).Raw(",\"key_ordinal\":").Uint(k.ordinal);
    out_.Raw(",\"key_hash\":\"").Raw(KeyHashHex(k.hash)).Raw("\"");
  }
  void FlowEnd(uint32_t corr, int64_t pid, int64_t tid, uint64_t start, uint64_t end) {
    if (!corr || scan_.api_correlations.Get(corr) == 0) return;
    uint32_t i = flows_done_.Increment(corr) - 1;
    if (i >= scan_.FlowsOf(corr)) return;
    Begin('f', "flow", "launch", pid, tid, start + (end - start) / 2);
    out_.Raw(",\"bp\":\"e\",\"id\":").Uint(FlowId(corr, i));
    out_.EndEvent();
    ++written;
  }

 public:
  // Metadata events for every track seen in pass 1.
  void WriteMetadata(const nlohmann::json& header) {
    const std::string process = ProcessLabel(header);
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
    const auto [block_devices, sm_tracks] = BlockTracks();
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

  // The devices whose blocks were traced, and each (device, SM) track their blocks ran on.
  std::pair<std::set<uint32_t>, std::set<std::pair<uint32_t, uint32_t>>> BlockTracks() const {
    std::set<uint32_t> devices;
    std::set<std::pair<uint32_t, uint32_t>> sm_tracks;
    for (const auto& [seq, sms] : scan_.sms) {
      auto it = scan_.launches.find(seq);
      const uint32_t device = it == scan_.launches.end() ? 0 : it->second.device;
      devices.insert(device);
      for (uint32_t sm : sms) sm_tracks.insert({device, sm});
    }
    return {std::move(devices), std::move(sm_tracks)};
  }

  // A merged run's process group: its name, its place among the processes,
  // and a named track for each thread, GPU stream, SM and launch span.
  void WriteGroupMetadata(const std::string& label, int64_t sort_index) {
    Meta("process_name", pid_, 0, "name", label);
    Meta("process_sort_index", pid_, 0, "sort_index", sort_index);
    for (uint64_t t : scan_.threads) {
      const int64_t tid = static_cast<int64_t>(t);
      Meta("thread_name", pid_, tid, "name", "thread " + std::to_string(t));
    }
    for (const auto& [device, stream] : scan_.streams) {
      const int64_t tid = GpuTid(device, stream);
      Meta("thread_name", pid_, tid, "name",
           "GPU " + std::to_string(device) + DeviceName(device) + " stream " + std::to_string(stream));
      Meta("thread_sort_index", pid_, tid, "sort_index", tid);
    }
    const auto [block_devices, sm_tracks] = BlockTracks();
    for (uint32_t device : block_devices) {
      Meta("thread_name", pid_, LaunchTid(device), "name",
           "GPU " + std::to_string(device) + DeviceName(device) + " traced launches");
      Meta("thread_sort_index", pid_, LaunchTid(device), "sort_index", BlockTid(device, 0) - 1);
    }
    for (const auto& [device, sm] : sm_tracks) {
      Meta("thread_name", pid_, BlockTid(device, sm), "name",
           "GPU " + std::to_string(device) + " SM " + std::to_string(sm));
      Meta("thread_sort_index", pid_, BlockTid(device, sm), "sort_index", BlockTid(device, sm));
    }
  }

 private:
  std::string DeviceName(uint32_t device) const { return scan_.DeviceName(device); }
  template <typename V>
  void Meta(const char* what, int64_t pid, int64_t tid, const char* key, const V& value) {
    out_.Meta(what, pid, tid, key, value);
    ++written;
  }

  JsonOut& out_;
  const TimelineScan& scan_;
  const std::unordered_map<StringId, std::string>& strings_;
  int64_t pid_;
  uint64_t base_;
  bool grouped_ = false;  // a process of a merged run
  int64_t offset_ = 0;    // grouped: added to every timestamp (to the run's clock, minus its base)
  uint64_t flow_tag_ = 0;
  std::unordered_map<StringId, std::string> names_;
  CorrelationCounts flows_started_;  // API records that started their flows
  CorrelationCounts flows_done_;     // activities that ended a flow
};

// Ends a Chrome file: the events' array, then `other` as its otherData; closes `f`.
Status EndChromeFile(JsonOut& json, FILE* f, const nlohmann::json& other, const std::string& out) {
  std::string other_text = other.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  json.Raw("\n],\"otherData\":").Raw(other_text).Raw("}\n");
  bool ok = json.Flush();
  if (std::fclose(f) != 0) ok = false;
  if (!ok) return Status::Error("error writing " + out + ": " + std::strerror(errno) + " (disk full?)");
  return Status::Ok();
}

}  // namespace

StatusOr<ExportResult> ExportChrome(const std::string& trace, const std::string& out) {
  return ExportChromeWith(trace, out, nullptr);
}

StatusOr<ExportResult> ExportChromeWith(const std::string& trace, const std::string& out, ChromeExtra* extra,
                                        const KeptRecords* kept) {
  // Pass 1, the scan (tracks, flows, the time base); pass 2, the events.
  auto passes = TimelinePasses::Open(trace, kept);
  if (!passes.ok()) return passes.status();
  TimelinePasses& p = **passes;
  const nlohmann::json& header = p.Header();
  TimelineScan scan(header.value("role", std::string()) == "shadow");
  if (Status s = p.Scan(scan); !s.ok()) return s;

  FILE* f = std::fopen(out.c_str(), "wb");
  if (!f) return Status::Error("cannot write " + out + ": " + std::strerror(errno));
  JsonOut json(f);
  int64_t pid = header.contains("pid") && header["pid"].is_number_integer() ? header["pid"].get<int64_t>() : 1;
  ChromeSink sink(json, scan, p.Strings(), pid);
  json.Raw("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
  sink.WriteMetadata(header);
  ExportResult result;
  if (Status s = p.Events(sink, &result.report, out); !s.ok()) {
    std::fclose(f);
    return s;
  }
  result.records = result.report.records;
  result.written = sink.written;
  if (extra) result.written += extra->WriteEvents(json, scan);
  result.skipped_invalid = sink.skipped_invalid;
  AddReadWarnings(result.report, &result.warnings);
  if (sink.skipped_invalid) {
    result.warnings.push_back(std::to_string(sink.skipped_invalid) +
                              " records with invalid timestamps were not placed on the timeline (counted in "
                              "otherData.skipped_invalid_timestamps)");
  }
  nlohmann::json other = {{"twinscope_header", header},
                          {"base_ns", scan.Base()},
                          {"read_end", ReadEndName(result.report.end)},
                          {"read_message", result.report.message},
                          {"records", result.report.records},
                          {"skipped_invalid_timestamps", sink.skipped_invalid},
                          {"status", sink.last_status}};
  if (extra) extra->Finish(&other, &result.warnings);
  const Status ended = EndChromeFile(json, f, other, out);
  if (!ended.ok()) return ended;
  return result;
}

StatusOr<ExportResult> ExportChromeRun(const std::vector<RunProcess>& processes, const std::string& out) {
  if (processes.empty()) return Status::Error("no process with GPU work to export");
  // Pass 1 over every trace: tracks, flows and the earliest time on the run's clock.
  struct Scanned {
    nlohmann::json header;
    std::unique_ptr<TimelineScan> scan;
    std::unordered_map<StringId, std::string> strings;
    int64_t chrome_pid = 0;
  };
  std::vector<Scanned> scanned;
  int64_t base = INT64_MAX;
  for (size_t i = 0; i < processes.size(); ++i) {
    const RunProcess& p = processes[i];
    std::string error;
    auto reader = TraceReader::Open(p.trace, &error);
    if (!reader) return Status::Error(error);
    Scanned s;
    s.header = reader->header();
    s.scan = std::make_unique<TimelineScan>(s.header.value("role", std::string()) == "shadow");
    reader->Read(*s.scan);
    s.strings = reader->strings();
    if (s.scan->Base()) base = std::min(base, static_cast<int64_t>(s.scan->Base()) + p.to_realtime_ns);
    s.chrome_pid = p.group_pid;
    scanned.push_back(std::move(s));
  }
  if (base == INT64_MAX) base = 0;

  FILE* f = std::fopen(out.c_str(), "wb");
  if (!f) return Status::Error("cannot write " + out + ": " + std::strerror(errno));
  JsonOut json(f);
  json.Raw("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
  ExportResult result;
  nlohmann::json listed = nlohmann::json::array();
  bool corrupt = false;
  for (size_t i = 0; i < processes.size(); ++i) {
    const RunProcess& p = processes[i];
    Scanned& s = scanned[i];
    std::string error;
    auto reader = TraceReader::Open(p.trace, &error);
    if (!reader) {
      std::fclose(f);
      return Status::Error(error);
    }
    ChromeSink sink(json, *s.scan, s.strings, s.chrome_pid, p.to_realtime_ns, base, static_cast<uint32_t>(i));
    sink.WriteGroupMetadata(p.label, static_cast<int64_t>(i));
    const ReadReport report = reader->Read(sink);
    result.records += report.records;
    result.written += sink.written;
    result.skipped_invalid += sink.skipped_invalid;
    std::vector<std::string> warnings;
    AddReadWarnings(report, &warnings);
    for (const auto& w : warnings) result.warnings.push_back(p.trace + ": " + w);
    if (sink.skipped_invalid) {
      result.warnings.push_back(p.trace + ": " + std::to_string(sink.skipped_invalid) +
                                " records with invalid timestamps were not placed on the timeline");
    }
    if (report.end == ReadEnd::kCorrupt) corrupt = true;
    if (i == 0 || report.end > result.report.end) result.report = report;
    nlohmann::json e = {{"chrome_pid", s.chrome_pid},
                        {"pid", p.pid},
                        {"ppid", p.ppid},
                        {"host", p.host},
                        {"command", p.command},
                        {"label", p.label},
                        {"trace", p.trace},
                        {"role", p.role},
                        {"to_realtime_ns", p.to_realtime_ns},
                        {"clock_pair", p.aligned},
                        {"read_end", ReadEndName(report.end)},
                        {"read_message", report.message},
                        {"records", report.records},
                        {"skipped_invalid_timestamps", sink.skipped_invalid},
                        {"status", sink.last_status},
                        {"header", s.header}};
    if (p.rank) e["rank"] = *p.rank;
    listed.push_back(std::move(e));
    s.scan.reset();  // its memory, before the next process
  }
  if (corrupt) result.report.end = ReadEnd::kCorrupt;
  std::set<std::string> hosts;
  for (const auto& p : processes) hosts.insert(p.host);
  nlohmann::json other = {{"twinscope_run",
                           {{"processes", listed},
                            {"hosts", hosts},
                            {"alignment", AlignmentText(processes)},
                            {"base_ns", base},
                            {"clock", "CLOCK_REALTIME ns where a trace has a clock pair; ts = clock - base_ns"}}},
                          {"base_ns", base},
                          {"records", result.records},
                          {"skipped_invalid_timestamps", result.skipped_invalid}};
  const Status ended = EndChromeFile(json, f, other, out);
  if (!ended.ok()) return ended;
  return result;
}

}  // namespace twinscope::exporters
