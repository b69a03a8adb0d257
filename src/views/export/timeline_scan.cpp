// The timeline exporters' first pass (timeline_scan.h).
#include "views/export/timeline_scan.h"

#include <algorithm>
#include <cstdio>

namespace twinscope::exporters {

uint32_t CorrelationCounts::Get(uint32_t id) const {
  if (id < dense_.size()) return dense_[id];
  auto it = sparse_.find(id);
  return it == sparse_.end() ? 0 : it->second;
}

uint32_t CorrelationCounts::Increment(uint32_t id) {
  if (id < kDenseLimit) {
    if (id >= dense_.size()) dense_.resize(std::max<size_t>(id + 1, dense_.size() * 2), 0);
    return dense_[id] == UINT16_MAX ? UINT16_MAX : ++dense_[id];
  }
  return ++sparse_[id];
}

void TimelineScan::OnKernel(const KernelRecord& r) {
  Activity(r.device, r.stream, r.correlation_id, r.start_ns, r.end_ns, r.flags);
}
void TimelineScan::OnMemcpy(const MemcpyRecord& r) {
  Activity(r.device, r.stream, r.correlation_id, r.start_ns, r.end_ns, r.flags);
}
void TimelineScan::OnMemset(const MemsetRecord& r) {
  Activity(r.device, r.stream, r.correlation_id, r.start_ns, r.end_ns, r.flags);
}

void TimelineScan::OnApi(const ApiRecord& r) {
  threads.insert(r.thread_id);
  if (!ValidSpan(r.start_ns, r.end_ns)) return;
  Time(r.start_ns);
  api_correlations.Increment(r.correlation_id);
}

void TimelineScan::OnNvtx(const NvtxRecord& r) {
  threads.insert(r.thread_id);
  Time(r.start_ns);
}

void TimelineScan::OnLaunch(const LaunchRecord& r) {
  threads.insert(r.thread_id);
  Time(r.cpu_ns);
  if (keep_launches_) {
    LaunchInfo& l = launches[r.seq];
    l.device = r.device;
    l.kernel = r.kernel;
  }
}

void TimelineScan::OnBlock(const BlockRecord& r) {
  if (!ValidSpan(r.enter_ns, r.exit_ns)) return;
  Time(r.enter_ns);
  LaunchInfo& l = launches[r.launch_seq];
  l.first_enter = std::min(l.first_enter, r.enter_ns);
  l.last_exit = std::max(l.last_exit, r.exit_ns);
  ++l.blocks;
  sms[r.launch_seq].insert(r.sm);
}

void TimelineScan::Activity(uint32_t device, uint32_t stream, uint32_t corr, uint64_t start, uint64_t end,
                            uint32_t flags) {
  streams.insert({device, stream});
  if (!ValidSpan(start, end, flags)) return;
  Time(start);
  if (corr) activity_correlations.Increment(corr);
}

std::string TimelineScan::DeviceName(uint32_t device) const {
  const auto& devices = last_status.value("devices", nlohmann::json::array());
  if (!devices.is_array()) return "";
  for (const auto& d : devices) {
    if (d.is_object() && d.value("ordinal", ~0u) == device && d.contains("name") && d["name"].is_string())
      return " (" + d["name"].get<std::string>() + ")";
  }
  return "";
}

std::string ProcessLabel(const nlohmann::json& header) {
  const std::string role = header.value("role", std::string("traced"));
  if (header.contains("command_line") && header["command_line"].is_array() && !header["command_line"].empty() &&
      header["command_line"][0].is_string()) {
    return header["command_line"][0].get<std::string>() + " (" + role + ")";
  }
  return role + " process";
}

void AddReadWarnings(const ReadReport& report, std::vector<std::string>* warnings) {
  if (report.end == ReadEnd::kComplete) return;
  warnings->push_back(std::string("the trace read ended ") + ReadEndName(report.end) +
                      (report.message.empty() ? "" : ": " + report.message) + "; exported what was readable");
}

std::string KeyHashHex(uint64_t hash) {
  char hex[24];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

const char* CopyKindName(uint8_t k) {
  static const char* kNames[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                 "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
  return k < sizeof kNames / sizeof kNames[0] ? kNames[k] : "Unknown";
}

}  // namespace twinscope::exporters
