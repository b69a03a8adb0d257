// The first pass of the timeline exporters (Chrome JSON, Perfetto): reads a
// trace once for its time base, tracks (threads, streams, SMs), flow
// multiplicities per correlation id and the shadow's launch spans, so the
// second pass can write tracks first and open every flow it will close.
// Internal to src/views/export; single-threaded.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "twinscope/trace_reader.h"

namespace twinscope::exporters {

inline bool ValidSpan(uint64_t start, uint64_t end, uint32_t flags = 0) {
  return !(flags & kFlagInvalidTimestamp) && start != 0 && end != 0 && end >= start;
}

// Most flows drawn from one API call (a graph launch has one per node).
constexpr uint32_t kMaxFlowsPerCorrelation = 65535;

// Per-correlation-id counters, dense for the usual small ids.
class CorrelationCounts {
 public:
  uint32_t Get(uint32_t id) const;
  uint32_t Increment(uint32_t id);

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

class TimelineScan : public RecordSink {
 public:
  explicit TimelineScan(bool keep_launches) : keep_launches_(keep_launches) {}
  void OnKernel(const KernelRecord& r) override;
  void OnMemcpy(const MemcpyRecord& r) override;
  void OnMemset(const MemsetRecord& r) override;
  void OnApi(const ApiRecord& r) override;
  void OnNvtx(const NvtxRecord& r) override;
  void OnLaunch(const LaunchRecord& r) override;
  void OnBlock(const BlockRecord& r) override;
  void OnStatus(const nlohmann::json& status, bool) override { last_status = status; }

  // Earliest timestamp, 0 if the trace has none.
  uint64_t Base() const { return base == UINT64_MAX ? 0 : base; }
  // Flows an API call of `corr` starts (one per valid GPU activity, capped).
  uint32_t FlowsOf(uint32_t corr) const {
    return corr ? std::min(activity_correlations.Get(corr), kMaxFlowsPerCorrelation) : 0;
  }
  // " (NVIDIA H200)" from the collector's "devices" metadata, or "".
  std::string DeviceName(uint32_t device) const;

  uint64_t base = UINT64_MAX;
  std::set<std::pair<uint32_t, uint32_t>> streams;  // (device, stream)
  std::set<uint64_t> threads;
  CorrelationCounts activity_correlations;               // valid GPU activities per correlation id
  CorrelationCounts api_correlations;                    // valid API records per correlation id
  std::unordered_map<uint64_t, LaunchInfo> launches;     // shadow: per launch seq
  std::unordered_map<uint64_t, std::set<uint32_t>> sms;  // shadow: per launch seq
  nlohmann::json last_status = nlohmann::json::object();

 private:
  void Time(uint64_t t) {
    if (t != 0 && t < base) base = t;
  }
  void Activity(uint32_t device, uint32_t stream, uint32_t corr, uint64_t start, uint64_t end, uint32_t flags);
  bool keep_launches_;
};

// "./app (primary)": the traced process as the header names it.
std::string ProcessLabel(const nlohmann::json& header);

// "the trace read ended truncated: ...; exported what was readable", unless complete.
void AddReadWarnings(const ReadReport& report, std::vector<std::string>* warnings);

// A launch key hash as `twinscope stats` prints it: 16 hex digits.
std::string KeyHashHex(uint64_t hash);

// Name of a CUPTI copy kind ("HtoD", ...).
const char* CopyKindName(uint8_t k);

}  // namespace twinscope::exporters
