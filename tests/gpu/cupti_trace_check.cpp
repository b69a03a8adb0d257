// Reads a primary (CUPTI) trace and prints one JSON line with what the GPU
// scripts compare: kernel records (valid, invalid, graph, keyed), the loss
// counters of the trace, the tool state and how the read ended.
// Usage: cupti_trace_check <trace.tsc>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "twinscope/trace_reader.h"

namespace {

struct Counts : twinscope::RecordSink {
  uint64_t kernels = 0, valid = 0, invalid = 0, graph = 0, no_key = 0, fallback = 0, launches = 0, memcpys = 0,
           memsets = 0, apis = 0, nvtx = 0;
  uint64_t first_invalid_index = 0;  // 1-based index of the first invalid kernel record, 0 = none
  void OnKernel(const twinscope::KernelRecord& k) override {
    kernels++;
    if (k.flags & twinscope::kFlagInvalidTimestamp) {
      invalid++;
      if (!first_invalid_index) first_invalid_index = kernels;
    } else {
      valid++;
    }
    if (k.flags & twinscope::kFlagGraph) graph++;
    if (k.flags & twinscope::kFlagNoLaunchKey) no_key++;
    if (k.flags & twinscope::kFlagKeyFallback) fallback++;
  }
  void OnLaunch(const twinscope::LaunchRecord&) override { launches++; }
  void OnMemcpy(const twinscope::MemcpyRecord&) override { memcpys++; }
  void OnMemset(const twinscope::MemsetRecord&) override { memsets++; }
  void OnApi(const twinscope::ApiRecord&) override { apis++; }
  void OnNvtx(const twinscope::NvtxRecord&) override { nvtx++; }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <trace.tsc>\n", argv[0]);
    return 2;
  }
  std::string error;
  auto reader = twinscope::TraceReader::Open(argv[1], &error);
  if (!reader) {
    std::fprintf(stderr, "cupti_trace_check: %s\n", error.c_str());
    return 1;
  }
  Counts c;
  twinscope::ReadReport report = reader->Read(c);
  const nlohmann::json& status = reader->last_status();
  nlohmann::json out = {
      {"read_end", twinscope::ReadEndName(report.end)},
      {"read_message", report.message},
      {"kernel_records_read", c.kernels},
      {"kernel_valid", c.valid},
      {"kernel_invalid", c.invalid},
      {"first_invalid_index", c.first_invalid_index},
      {"kernel_graph", c.graph},
      {"kernel_no_key", c.no_key},
      {"kernel_key_fallback", c.fallback},
      {"launch_records", c.launches},
      {"memcpy_records_read", c.memcpys},
      {"memset_records_read", c.memsets},
      {"api_records_read", c.apis},
      {"nvtx_records_read", c.nvtx},
      {"counters", status.value("counters", nlohmann::json::object())},
      {"tool_state", status.value("tool_state", nlohmann::json::object())},
      {"config", reader->header().value("config", nlohmann::json::object())},
  };
  std::printf("%s\n", out.dump().c_str());
  return report.ok() ? 0 : 1;
}
