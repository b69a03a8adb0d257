// Writes the synthetic twin traces of join_fixture.h with the real trace writer.
#include "join_fixture.h"

#include <sys/stat.h>
#include <unistd.h>

#include <stdexcept>

#include "../testutil/trace_writer.h"
#include "format/trace_writer.h"
#include "launchkey/launch_key.h"

namespace twinscope::testing {
namespace {

bool Zero(Dim3 d) { return d.x == 0 && d.y == 0 && d.z == 0; }

}  // namespace

std::vector<FakeBlock> EvenBlocks(uint32_t n, uint32_t sms, uint64_t block_ns) {
  std::vector<FakeBlock> b;
  for (uint32_t i = 0; i < n; ++i) b.push_back({i, i % sms, i, i * 100ull, i * 100ull + block_ns});
  return b;
}

TwinFiles WriteTwin(const std::string& dir, const std::vector<FakeLaunch>& launches, const WriteOptions& o) {
  mkdir(dir.c_str(), 0755);
  TwinFiles f{dir + "/primary.tsc", dir + "/shadow.tsc"};
  {
    nlohmann::json header = {{"role", "primary"}, {"pid", 100}, {"command_line", {"./app"}}};
    if (o.primary_clock_realtime_ns) header["clock"] = {{"cupti_ns", 0}, {"realtime_ns", o.primary_clock_realtime_ns}};
    auto w = OpenTestTrace(f.primary, header);
    uint32_t corr = 1;
    uint64_t seq = 0;
    for (const auto& l : launches) {
      if (!l.in_primary) continue;
      const uint32_t c = l.correlation ? l.correlation : 1000 + corr++;
      LaunchRecord r{};
      r.seq = seq++;
      r.cpu_ns = l.cpu_ns;
      r.thread_id = 1;
      r.key = {LaunchKeyHash(l.path, l.kernel, l.ordinal, l.grid, l.block), l.path.empty() ? 0 : w->Intern(l.path),
               l.ordinal};
      r.correlation_id = c;
      r.stream = l.stream;
      r.kernel = w->Intern(l.kernel);
      r.grid = l.grid;
      r.block = l.block;
      r.flags = l.graph ? static_cast<uint32_t>(kFlagGraph) : 0u;
      w->Append(r);
      if (!l.primary_kernel_record) continue;
      KernelRecord k{};
      k.start_ns = l.cpu_ns + 2'000;
      k.end_ns = k.start_ns + l.dur_ns;
      k.key = r.key;
      k.correlation_id = c;
      k.stream = l.stream;
      k.flags = r.flags;
      k.grid = l.grid;
      k.block = l.block;
      k.name = r.kernel;
      w->Append(k);
      for (const auto& other : o.other_kernels) {
        KernelRecord ok{};
        ok.start_ns = k.end_ns + 100;
        ok.end_ns = ok.start_ns + 500;
        ok.key = {LaunchKeyHash(l.path, other, 0, {1, 1, 1}, {32, 1, 1}), r.key.path, 0};
        ok.correlation_id = c + 100000;
        ok.grid = {1, 1, 1};
        ok.block = {32, 1, 1};
        ok.name = w->Intern(other);
        w->Append(ok);
      }
    }
    for (const auto& [name, value] : o.primary_counters) w->SetCounter(name, value);
    std::string error;
    if (!w->Close(&error)) throw std::runtime_error(error);
  }
  {
    auto w = OpenTestTrace(f.shadow, {{"role", "shadow"}, {"pid", 200}, {"config", {{"every", o.shadow_every}}}});
    uint64_t seq = 0;
    for (const auto& l : launches) {
      if (!l.in_shadow) continue;
      const Dim3 grid = Zero(l.shadow_grid) ? l.grid : l.shadow_grid;
      const std::string& path = l.shadow_path.empty() ? l.path : l.shadow_path;
      const std::string& kernel = l.shadow_kernel.empty() ? l.kernel : l.shadow_kernel;
      LaunchRecord r{};
      r.seq = seq++;
      r.cpu_ns = o.shadow_clock_offset_ns + static_cast<uint64_t>(static_cast<double>(l.cpu_ns) * o.shadow_stretch);
      r.key = {LaunchKeyHash(path, kernel, l.ordinal, grid, l.block), path.empty() ? 0 : w->Intern(path), l.ordinal};
      r.stream = l.stream;
      r.kernel = w->Intern(kernel);
      r.grid = grid;
      r.block = l.block;
      auto blocks = l.blocks.empty() ? EvenBlocks(grid.x * grid.y * grid.z, 4, 1'000) : l.blocks;
      r.blocks_recorded = static_cast<uint32_t>(blocks.size());
      w->Append(r);
      const uint64_t base = 1'000'000'000'000ull + r.cpu_ns;
      for (const auto& b : blocks) {
        BlockRecord br{};
        br.launch_seq = r.seq;
        br.enter_ns = base + b.enter_ns;
        br.exit_ns = base + b.exit_ns;
        br.block_linear = b.block;
        br.order = b.order;
        br.x = b.block;
        br.sm = b.sm;
        w->Append(br);
      }
    }
    for (const auto& [name, value] : o.shadow_counters) w->SetCounter(name, value);
    std::string error;
    if (!w->Close(&error)) throw std::runtime_error(error);
  }
  if (o.shadow_keep_fraction < 1.0) {
    // A killed shadow: the file ends inside a chunk, its summary never written.
    struct stat st {};
    stat(f.shadow.c_str(), &st);
    if (truncate(f.shadow.c_str(), static_cast<off_t>(static_cast<double>(st.st_size) * o.shadow_keep_fraction)) != 0)
      throw std::runtime_error("truncate failed");
  }
  return f;
}

std::vector<FakeLaunch> EvenSteps(int n, uint32_t blocks, uint32_t sms) {
  std::vector<FakeLaunch> v;
  for (int i = 0; i < n; ++i) {
    FakeLaunch l;
    l.path = "step#" + std::to_string(i);
    l.grid = {blocks, 1, 1};
    l.cpu_ns = 1'000'000 * static_cast<uint64_t>(i + 1);
    l.dur_ns = 10'000 + 10 * static_cast<uint64_t>(i);
    l.blocks = EvenBlocks(blocks, sms, 2'000);
    v.push_back(l);
  }
  return v;
}

std::vector<FakeLaunch> SlowLaunches() {
  std::vector<FakeLaunch> v = EvenSteps(12, 64, 8);
  v[3].dur_ns = 40'000;
  v[3].blocks[50].exit_ns += 200'000;
  v[5].dur_ns = 35'000;
  v[5].blocks = EvenBlocks(64, 2, 2'000);
  v[7].dur_ns = 30'000;
  for (auto& b : v[7].blocks) b.order = 63 - b.block;
  return v;
}

}  // namespace twinscope::testing
