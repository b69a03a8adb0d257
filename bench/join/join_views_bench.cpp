// Joined views over a synthetic joined run shaped like the PyTorch shadow of
// docs/join.md's users (2,008 traced launches of one kernel with a name of
// ~300 characters, 580 blocks each on 132 SMs: 1.16M blocks), written once
// with the real trace writer and joined once, outside the timed region.
// Reports, per export: the file size, the bytes spent per block drawn (a
// block is one slice: one "X" event in Chrome JSON, a begin and an end packet
// in Perfetto), and blocks drawn per second. The Chrome export of the same
// launches is the same-run baseline for the Perfetto figure.
#include <benchmark/benchmark.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "join/joined_run.h"
#include "join_fixture.h"
#include "views/export/join/block_detail.h"
#include "views/export/join/join_export.h"

namespace twinscope {
namespace {

constexpr int kLaunches = 2008;
constexpr uint32_t kBlocks = 580, kSms = 132;

std::string KernelName() {
  return "void at::native::(anonymous namespace)::reshape_and_cache_flash_kernel<c10::BFloat16, c10::BFloat16, "
         "(vllm::Fp8KVCacheDataType)0>(c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16*, c10::BFloat16*, "
         "long const*, int, int, int, int, int, int, float const*, float const*)" +
         std::string(40, ' ');
}

const std::string& Dir() {
  static const std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("twinscope_bench_join_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] { std::filesystem::remove_all(Dir()); });
    return d.string();
  }();
  return dir;
}

std::string OutPath(const char* suffix) { return Dir() + "/out" + suffix; }

const join::JoinedRun& Model() {
  static join::JoinedRun* m = [] {
    const std::string dir = Dir();
    std::vector<testing::FakeLaunch> v;
    const auto blocks = testing::EvenBlocks(kBlocks, kSms, 5'000);
    for (int i = 0; i < kLaunches; ++i) {
      testing::FakeLaunch l;
      l.kernel = KernelName();
      l.path = "step#" + std::to_string(i / 8);
      l.ordinal = static_cast<uint32_t>(i % 8);
      l.grid = {kBlocks, 1, 1};
      l.cpu_ns = 1'000'000 + 100'000 * static_cast<uint64_t>(i);
      l.dur_ns = 20'000 + 37 * static_cast<uint64_t>(i % 13);
      l.blocks = blocks;
      v.push_back(std::move(l));
    }
    testing::WriteOptions o;
    o.other_kernels = {"_Z4gemmv", "_Z7softmaxv", "_Z9layernormv"};
    auto f = testing::WriteTwin(dir, v, o);
    auto joined = join::JoinForViews(f.primary, f.shadow);
    if (!joined.ok()) {
      std::fprintf(stderr, "join failed: %s\n", joined.status().message().c_str());
      std::exit(1);
    }
    // Every matched launch's blocks, as a join's detail pass brings them for the largest bounds below.
    join::ReadDetail(&*joined, exporters::PlanBlocks(joined->model, {kLaunches, 10'000'000}).drawn_seqs);
    return new join::JoinedRun(std::move(*joined));
  }();
  return *m;
}

uint64_t FileSize(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

using Export = StatusOr<exporters::TimelineExportResult> (*)(const join::JoinedRun&, const std::string&,
                                                             const exporters::BlockBounds&);

// Arg 0: launches drawn with blocks (0 = none: the file without block detail).
// bytes_per_block = (file size - size of the same export without blocks) /
// blocks drawn; block_bytes_per_block (Perfetto) counts the block packets.
void Run(benchmark::State& state, Export fn, const char* suffix) {
  const join::JoinedRun& m = Model();
  const std::string out = OutPath(suffix);
  const exporters::BlockBounds bounds{static_cast<size_t>(state.range(0)), 10'000'000};
  auto base = fn(m, out, exporters::BlockBounds{0, 0});
  if (!base.ok()) return state.SkipWithError(base.status().message().c_str());
  const uint64_t base_size = FileSize(out);
  exporters::TimelineExportResult last;
  for (auto _ : state) {
    auto r = fn(m, out, bounds);
    if (!r.ok()) return state.SkipWithError(r.status().message().c_str());
    last = std::move(*r);
  }
  const uint64_t size = FileSize(out);
  const double blocks = static_cast<double>(last.blocks.blocks_drawn);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(last.blocks.blocks_drawn));
  state.counters["launches_drawn"] = static_cast<double>(last.blocks.launches_drawn);
  state.counters["blocks"] = blocks;
  state.counters["file_MB"] = static_cast<double>(size) / 1e6;
  state.counters["no_blocks_MB"] = static_cast<double>(base_size) / 1e6;
  if (blocks > 0) {
    state.counters["bytes_per_block"] = static_cast<double>(size - base_size) / blocks;
    if (last.blocks.block_bytes)
      state.counters["block_bytes_per_block"] = static_cast<double>(last.blocks.block_bytes) / blocks;
  }
  std::remove(out.c_str());
}

void BM_JoinPerfetto(benchmark::State& state) {
  if (!exporters::PerfettoAvailable()) return state.SkipWithError("built without the Perfetto exporter");
  Run(
      state,
      [](const join::JoinedRun& m, const std::string& out, const exporters::BlockBounds& b) {
        return exporters::ExportJoinPerfetto(m, out, b);
      },
      ".perfetto-trace");
}
BENCHMARK(BM_JoinPerfetto)->Arg(200)->Arg(kLaunches)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

void BM_JoinChrome(benchmark::State& state) { Run(state, exporters::ExportJoinChrome, ".json"); }
BENCHMARK(BM_JoinChrome)->Arg(200)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

// The shadow trace alone, every block drawn: the Chrome export repeats the
// kernel's name in every block event (the ~415 bytes of docs/join.md's users);
// the Perfetto export interns it.
void BM_ShadowChrome(benchmark::State& state) {
  const join::JoinedRun& m = Model();
  const std::string out = OutPath(".shadow.json");
  uint64_t events = 0;
  for (auto _ : state) {
    auto r = exporters::ExportChrome(m.model.shadow_path, out);
    if (!r.ok()) return state.SkipWithError(r.status().message().c_str());
    events = r->written;
  }
  const double blocks = static_cast<double>(kLaunches) * kBlocks;
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(blocks));
  state.counters["events"] = static_cast<double>(events);
  state.counters["file_MB"] = static_cast<double>(FileSize(out)) / 1e6;
  state.counters["bytes_per_block"] = static_cast<double>(FileSize(out)) / blocks;  // launches' events included
  std::remove(out.c_str());
}
BENCHMARK(BM_ShadowChrome)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

void BM_ShadowPerfetto(benchmark::State& state) {
  if (!exporters::PerfettoAvailable()) return state.SkipWithError("built without the Perfetto exporter");
  const join::JoinedRun& m = Model();
  const std::string out = OutPath(".shadow.perfetto-trace");
  exporters::TimelineExportResult last;
  for (auto _ : state) {
    auto r = exporters::ExportPerfetto(m.model.shadow_path, out, exporters::BlockBounds{100'000, 100'000'000});
    if (!r.ok()) return state.SkipWithError(r.status().message().c_str());
    last = std::move(*r);
  }
  const double blocks = static_cast<double>(last.blocks.blocks_drawn);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(last.blocks.blocks_drawn));
  state.counters["blocks"] = blocks;
  state.counters["file_MB"] = static_cast<double>(FileSize(out)) / 1e6;
  if (blocks > 0) {
    state.counters["bytes_per_block"] = static_cast<double>(FileSize(out)) / blocks;
    state.counters["block_bytes_per_block"] = static_cast<double>(last.blocks.block_bytes) / blocks;
  }
  std::remove(out.c_str());
}
BENCHMARK(BM_ShadowPerfetto)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

void BM_JoinSqlite(benchmark::State& state) {
  const join::JoinedRun& m = Model();
  const std::string out = OutPath(".sqlite");
  uint64_t rows = 0;
  for (auto _ : state) {
    join::JoinedRun run{m.model, m.primary, {}, {}};  // its own detail pass (every block to the blocks table)
    auto r = exporters::ExportJoinSqlite(&run, out);
    if (!r.ok()) return state.SkipWithError(r.status().message().c_str());
    rows = r->written;
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(rows));
  state.counters["rows"] = static_cast<double>(rows);
  state.counters["file_MB"] = static_cast<double>(FileSize(out)) / 1e6;
  std::remove(out.c_str());
}
BENCHMARK(BM_JoinSqlite)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace
}  // namespace twinscope

BENCHMARK_MAIN();
