// Per-process traces of a run for the merged views' tests (process_traces.h).
#include "process_traces.h"

#include <stdexcept>

#include "../testutil/trace_writer.h"
#include "format/trace_writer.h"
#include "twinscope/counters.h"

namespace twinscope::testing {

void WriteProcessTrace(const std::string& path, const ProcessTraceSpec& s) {
  nlohmann::json process = {{"pid", s.pid},         {"ppid", s.ppid},
                            {"host", s.host},       {"command_line", s.command},
                            {"top", s.top},         {"start_realtime_ns", s.start_realtime_ns},
                            {"ancestors", {s.ppid}}};
  if (s.rank) process["rank"] = {{"rank", *s.rank}, {"world_size", 2}, {"source", "RANK"}};
  nlohmann::json header = {{"role", "primary"},
                           {"pid", s.pid},
                           {"host", s.host},
                           {"command_line", s.command},
                           {"start_realtime_ns", s.start_realtime_ns},
                           {"process", process}};
  if (s.clock_pair) header["clock"] = {{"cupti_ns", s.cupti_ns}, {"realtime_ns", s.realtime_ns}};
  auto w = OpenTestTrace(path, header);
  const StringId name = w->Intern(s.kernel);
  const StringId api_name = w->Intern("cudaLaunchKernel");
  uint32_t corr = 0;
  for (const auto& [start, end] : s.kernels) {
    ++corr;
    ApiRecord a{};
    a.correlation_id = corr;
    a.name = api_name;
    a.start_ns = start - 500;
    a.end_ns = start - 100;
    a.thread_id = static_cast<uint64_t>(s.pid);
    a.domain = static_cast<uint32_t>(ApiDomain::kRuntime);
    w->Append(a);
    LaunchRecord l{};
    l.seq = corr;
    l.cpu_ns = start - 400;
    l.thread_id = static_cast<uint64_t>(s.pid);
    l.correlation_id = corr;
    l.kernel = name;
    l.stream = 7;
    l.grid = {2, 1, 1};
    l.block = {32, 1, 1};
    w->Append(l);
    KernelRecord k{};
    k.correlation_id = corr;
    k.name = name;
    k.start_ns = start;
    k.end_ns = end;
    k.stream = 7;
    k.grid = {2, 1, 1};
    k.block = {32, 1, 1};
    w->Append(k);
  }
  uint64_t t = s.kernels.empty() ? 1000000 : s.kernels.back().second + 1000;
  for (uint64_t i = 0; i < s.memcpys; ++i, t += 1000) {
    MemcpyRecord m{};
    m.start_ns = t;
    m.end_ns = t + 100;
    m.bytes = 4096;
    m.copy_kind = 1;
    m.stream = 7;
    w->Append(m);
  }
  w->SetMetadata("devices", nlohmann::json::array({{{"ordinal", 0}, {"name", "Fake GPU"}, {"sm_count", 132}}}));
  w->SetCounter(counters::kLaunchesSeen, s.kernels.size());
  w->SetCounter(counters::kKernelRecords, s.kernels.size());
  std::string error;
  if (!w->Close(&error)) throw std::runtime_error("Close: " + error);
}

}  // namespace twinscope::testing
