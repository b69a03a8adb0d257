#include "sample_trace.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "../testutil/trace_writer.h"
#include "format/chunk.h"
#include "format/trace_writer.h"
#include "twinscope/counters.h"

namespace twinscope::testing {

std::string TempPath(const std::string& suffix) {
  std::string t = "/tmp/twinscope_test_XXXXXX" + suffix;
  std::vector<char> buf(t.begin(), t.end());
  buf.push_back(0);
  int fd = mkstemps(buf.data(), static_cast<int>(suffix.size()));
  if (fd < 0) throw std::runtime_error("mkstemps failed");
  close(fd);
  return buf.data();
}

void WritePrimaryTrace(const std::string& path, uint64_t extra_kernels) {
  nlohmann::json header = {{"role", "primary"},
                           {"pid", 4242},
                           {"host", "testhost"},
                           {"command_line", {"./app", "--steps", "1"}},
                           {"cupti_version", 130001}};
  auto w = OpenTestTrace(path, header);
  const StringId gemm = w->Intern("_Z4gemmv");
  const StringId gemm_d = w->Intern("gemm()");
  const StringId node = w->Intern("graph_node_kernel");
  const StringId launch = w->Intern("cudaLaunchKernel");
  const StringId memcpy_api = w->Intern("cudaMemcpyAsync");
  const StringId graph_api = w->Intern("cudaGraphLaunch");
  const StringId step = w->Intern("step");
  const StringId path0 = w->Intern("step#0");
  const StringId filler = w->Intern("filler");

  // API calls on thread 4242 (the main thread) and 4243.
  auto api = [&](uint32_t corr, StringId name, uint64_t start, uint64_t end, uint64_t tid) {
    ApiRecord a{};
    a.correlation_id = corr;
    a.name = name;
    a.start_ns = start;
    a.end_ns = end;
    a.thread_id = tid;
    a.domain = static_cast<uint32_t>(ApiDomain::kRuntime);
    a.cbid = 211;
    w->Append(a);
  };
  api(1, launch, 1000, 1500, 4242);
  api(2, memcpy_api, 2000, 2300, 4242);
  api(3, graph_api, 3000, 3200, 4243);

  auto kernel = [&](uint32_t corr, StringId name, StringId demangled, uint64_t start, uint64_t end, uint32_t flags) {
    KernelRecord k{};
    k.correlation_id = corr;
    k.name = name;
    k.demangled = demangled;
    k.start_ns = start;
    k.end_ns = end;
    k.device = 0;
    k.stream = 7;
    k.flags = flags;
    k.grid = {128, 2, 1};
    k.block = {256, 1, 1};
    k.registers_per_thread = 32;
    k.key = {0x1234abcdull, path0, 0};
    if (flags & kFlagGraph) {
      k.graph_id = 9;
      k.graph_node_id = 100 + start;
    }
    w->Append(k);
  };
  kernel(1, gemm, gemm_d, 5000, 6000, 0);      // 1.000 us, 4.100 us after the base (900)
  kernel(3, node, 0, 7000, 7500, kFlagGraph);  // graph launch: 2 kernel nodes, one API call
  kernel(3, node, 0, 7600, 8000, kFlagGraph);
  kernel(4, gemm, gemm_d, 0, 0, kFlagInvalidTimestamp);  // never placed on a timeline
  for (uint64_t i = 0; i < extra_kernels; ++i) kernel(0, filler, 0, 10000 + i * 100, 10050 + i * 100, 0);

  MemcpyRecord m{};
  m.correlation_id = 2;
  m.start_ns = 6100;
  m.end_ns = 6400;
  m.bytes = 4096;
  m.copy_kind = static_cast<uint8_t>(CopyKind::kHtoD);
  m.stream = 7;
  w->Append(m);
  MemsetRecord s{};
  s.correlation_id = 5;  // no API record: no flow
  s.start_ns = 8100;
  s.end_ns = 8200;
  s.bytes = 64;
  s.stream = 8;
  w->Append(s);

  NvtxRecord n{};
  n.kind = static_cast<uint32_t>(NvtxKind::kPushPop);
  n.name = step;
  n.thread_id = 4242;
  n.start_ns = 900;  // the earliest timestamp: the export's time base
  n.end_ns = 9000;
  w->Append(n);
  n.kind = static_cast<uint32_t>(NvtxKind::kStartEnd);
  n.range_id = 11;
  n.start_ns = 950;
  n.end_ns = 8500;
  w->Append(n);
  n.kind = static_cast<uint32_t>(NvtxKind::kMark);
  n.range_id = 0;
  n.start_ns = n.end_ns = 4000;
  w->Append(n);

  for (uint64_t seq = 1; seq <= 4; ++seq) {
    LaunchRecord l{};
    l.seq = seq;
    l.cpu_ns = 1000 * seq;
    l.thread_id = 4242;
    l.correlation_id = static_cast<uint32_t>(seq);
    l.kernel = seq == 1 ? gemm : node;
    l.grid = {128, 2, 1};
    l.block = {256, 1, 1};
    l.key = {0x1234abcdull + seq, path0, static_cast<uint32_t>(seq - 1)};
    w->Append(l);
  }
  w->SetMetadata("devices", nlohmann::json::array({{{"ordinal", 0}, {"name", "Fake GPU"}, {"sm_count", 132}}}));
  w->SetMetadata("tool_state", "running");
  w->SetCounter(counters::kLaunchesSeen, 5);
  w->SetCounter(counters::kKernelRecords, 4);
  w->SetCounter(counters::kKernelInvalidTs, 1);
  std::string error;
  if (!w->Close(&error)) throw std::runtime_error("Close: " + error);
}

void WriteShadowTrace(const std::string& path) {
  auto w = OpenTestTrace(path, {{"role", "shadow"}, {"pid", 5151}, {"command_line", {"./app"}}});
  const StringId probe = w->Intern("probe_k");
  auto launch = [&](uint64_t seq, uint32_t grid_x) {
    LaunchRecord l{};
    l.seq = seq;
    l.cpu_ns = 100 + seq;
    l.thread_id = 5151;
    l.kernel = probe;
    l.device = 0;
    l.grid = {grid_x, 1, 1};
    l.block = {512, 1, 1};
    w->Append(l);
  };
  launch(1, 4);
  launch(2, 2);
  auto block = [&](uint64_t seq, uint32_t linear, uint32_t order, uint32_t sm, uint64_t enter, uint64_t exit) {
    BlockRecord b{};
    b.launch_seq = seq;
    b.block_linear = linear;
    b.x = linear;
    b.order = order;
    b.sm = sm;
    b.enter_ns = enter;
    b.exit_ns = exit;
    w->Append(b);
  };
  block(1, 0, 0, 0, 1000, 2000);
  block(1, 1, 2, 1, 1010, 2010);
  block(1, 2, 1, 0, 1020, 2020);
  block(1, 3, 3, 1, 1030, 3000);  // straggler
  block(2, 1, 0, 1, 5000, 5100);  // block 0 of launch 2 missing
  w->SetCounter(counters::kLaunchesTraced, 2);
  w->SetCounter(counters::kBlocksExpected, 6);
  w->SetCounter(counters::kBlocksRecorded, 5);
  std::string error;
  if (!w->Close(&error)) throw std::runtime_error("Close: " + error);
}

void WriteSampledShadowTrace(const std::string& path, uint64_t pinned_by_graph) {
  auto w = OpenTestTrace(
      path, {{"role", "shadow"},
             {"pid", 5152},
             {"command_line", {"./app"}},
             {"sampling",
              {{"every", 10}, {"max_launches", 0}, {"per_second", 0.0}, {"budget_pct", 5.0}, {"patch", "toggle"}}}});
  LaunchRecord l{};
  l.seq = 3;
  l.kernel = w->Intern("probe_k");
  l.grid = {2, 1, 1};
  l.block = {64, 1, 1};
  l.sample_index = 10;
  l.flags = kFlagSampleBudget | kFlagPatchToggled;
  l.blocks_recorded = 2;
  w->Append(l);
  for (uint32_t b = 0; b < 2; ++b) {
    BlockRecord r{};
    r.launch_seq = 3;
    r.block_linear = b;
    r.x = b;
    r.order = b;
    r.enter_ns = 1000 + b;
    r.exit_ns = 2000 + b;
    w->Append(r);
  }
  w->SetCounter(counters::kLaunchesTraced, 2);
  w->SetCounter(counters::kLaunchesMatching, 20);
  w->SetCounter(counters::kModulesRepatched, 2);
  w->SetCounter(counters::kModulesUnpatched, 2);
  w->SetCounter(counters::kToggleNs, 150000);
  w->SetCounter(counters::kSamplingCostNs, 1000000);
  w->SetCounter(counters::kSamplingProgramNs, 40000000);
  if (pinned_by_graph) w->SetCounter(counters::kModulesPinnedByGraph, pinned_by_graph);
  std::string error;
  if (!w->Close(&error)) throw std::runtime_error("Close: " + error);
}

bool CorruptChunk(const std::string& path, int chunk) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  format::FilePreamble pre{};
  if (!f.read(reinterpret_cast<char*>(&pre), sizeof pre)) return false;
  uint64_t offset = sizeof pre + pre.header_size;
  for (int i = 0;; ++i) {
    format::ChunkHeader h{};
    f.seekg(static_cast<std::streamoff>(offset));
    if (!f.read(reinterpret_cast<char*>(&h), sizeof h)) return false;
    if (i == chunk) {
      if (h.stored_size == 0) return false;
      const uint64_t at = offset + sizeof h + h.stored_size / 2;
      f.seekg(static_cast<std::streamoff>(at));
      char c = 0;
      f.read(&c, 1);
      c = static_cast<char>(c ^ 0x5a);
      f.seekp(static_cast<std::streamoff>(at));
      f.write(&c, 1);
      return static_cast<bool>(f);
    }
    offset += sizeof h + h.stored_size;
  }
}

}  // namespace twinscope::testing
