// Host benchmarks: how fast the trace writer takes records on the caller's
// thread and on disk, how fast the reader streams them, and the export rates.
// Items are records; bytes are raw (uncompressed) record bytes.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "format/trace_writer.h"
#include "sample_trace.h"
#include "twinscope/trace_reader.h"
#include "views/export/export.h"

namespace twinscope {
namespace {

KernelRecord MakeKernel(uint64_t i) {
  KernelRecord k{};
  k.start_ns = 1'000'000 + i * 1000;
  k.end_ns = k.start_ns + 500 + (i % 97);
  k.correlation_id = static_cast<uint32_t>(i + 1);
  k.device = 0;
  k.stream = 7 + (i % 4);
  k.name = 1 + (i % 16);
  k.grid = {static_cast<uint32_t>(128 + i % 8), 1, 1};
  k.block = {256, 1, 1};
  k.grid_id = i;
  k.key = {0x9e3779b97f4a7c15ull * (i + 1), 0, static_cast<uint32_t>(i % 100)};
  return k;
}

std::string TempFile(const char* suffix) { return testing::TempPath(suffix); }

// Records per iteration: 1M kernel records (128 MB raw).
constexpr int64_t kBatch = 1'000'000;

// Caller-side cost of Append(): the memory cap is large enough that nothing is
// dropped; Close() (drain + summary) is outside the timed region.
void BM_WriterAppendKernel(benchmark::State& state) {
  std::vector<KernelRecord> recs(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) recs[i] = MakeKernel(i);
  const std::string path = TempFile(".tsc");
  uint64_t dropped = 0;
  for (auto _ : state) {
    state.PauseTiming();
    WriterOptions o;
    o.path = path;
    o.max_buffered_bytes = 512u << 20;
    std::string error;
    auto w = TraceWriter::Open(o, {{"role", "bench"}}, &error);
    if (!w) state.SkipWithError(error.c_str());
    state.ResumeTiming();
    for (const auto& r : recs) w->Append(r);
    state.PauseTiming();
    w->Close(&error);
    dropped += w->dropped();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.SetBytesProcessed(state.iterations() * kBatch * sizeof(KernelRecord));
  state.counters["dropped_per_batch"] = static_cast<double>(dropped) / static_cast<double>(state.iterations());
  std::remove(path.c_str());
}
BENCHMARK(BM_WriterAppendKernel)->Unit(benchmark::kMillisecond)->UseRealTime();

// Sustained: Append() of every record plus the drain to disk (zstd level 1,
// 256 KiB chunks). Args = memory cap in MiB (64 is the default), compression
// threads (WriterOptions::compression_threads). Records over the cap are
// dropped and counted; items/s counts written records only, and
// "dropped_per_batch" says how many of the 1M did not make it.
void BM_WriterSustainedKernel(benchmark::State& state) {
  std::vector<KernelRecord> recs(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) recs[i] = MakeKernel(i);
  const std::string path = TempFile(".tsc");
  uint64_t dropped = 0, bytes = 0;
  for (auto _ : state) {
    WriterOptions o;
    o.path = path;
    o.max_buffered_bytes = static_cast<size_t>(state.range(0)) << 20;
    o.compression_threads = static_cast<unsigned>(state.range(1));
    std::string error;
    auto w = TraceWriter::Open(o, {{"role", "bench"}}, &error);
    for (const auto& r : recs) w->Append(r);
    w->Close(&error);
    dropped += w->dropped();
    bytes = w->bytes_written();
  }
  const double written = static_cast<double>(state.iterations() * kBatch - dropped);
  state.SetItemsProcessed(static_cast<int64_t>(written));
  state.SetBytesProcessed(static_cast<int64_t>(written * sizeof(KernelRecord)));
  state.counters["dropped_per_batch"] = static_cast<double>(dropped) / static_cast<double>(state.iterations());
  state.counters["file_MB"] = static_cast<double>(bytes) / 1e6;
  std::remove(path.c_str());
}
BENCHMARK(BM_WriterSustainedKernel)->ArgsProduct({{64, 512}, {1, 2, 4}})->Unit(benchmark::kMillisecond)->UseRealTime();

// Same with AppendMany() in batches of state.range(0) records.
void BM_WriterAppendManyKernel(benchmark::State& state) {
  std::vector<KernelRecord> recs(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) recs[i] = MakeKernel(i);
  const size_t batch = static_cast<size_t>(state.range(0));
  const std::string path = TempFile(".tsc");
  uint64_t dropped = 0;
  for (auto _ : state) {
    state.PauseTiming();
    WriterOptions o;
    o.path = path;
    o.max_buffered_bytes = 512u << 20;
    std::string error;
    auto w = TraceWriter::Open(o, {{"role", "bench"}}, &error);
    state.ResumeTiming();
    for (size_t i = 0; i < recs.size(); i += batch) w->AppendMany(recs.data() + i, std::min(batch, recs.size() - i));
    state.PauseTiming();
    w->Close(&error);
    dropped += w->dropped();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["dropped_per_batch"] = static_cast<double>(dropped) / static_cast<double>(state.iterations());
  std::remove(path.c_str());
}
BENCHMARK(BM_WriterAppendManyKernel)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

// A 1M-kernel trace written once for the reader and exporter benchmarks.
struct RemoveAtExit {
  std::string path;
  ~RemoveAtExit() {
    if (!path.empty()) std::remove(path.c_str());
  }
};

const std::string& BigTrace() {
  static RemoveAtExit cleanup;
  static const std::string path = [] {
    std::string p = TempFile(".tsc");
    WriterOptions o;
    o.path = p;
    o.max_buffered_bytes = 512u << 20;
    std::string error;
    auto w = TraceWriter::Open(o, {{"role", "primary"}, {"pid", 1}}, &error);
    for (int i = 0; i < 16; ++i) w->Intern("kernel_" + std::to_string(i));
    for (int64_t i = 0; i < kBatch; ++i) {
      w->Append(MakeKernel(i));
      if (i % 4 == 0) {
        ApiRecord a{};
        a.start_ns = 1'000'000 + i * 1000 - 300;
        a.end_ns = a.start_ns + 200;
        a.thread_id = 1;
        a.correlation_id = static_cast<uint32_t>(i + 1);
        a.name = 1;
        w->Append(a);
      }
    }
    w->Close(&error);
    cleanup.path = p;
    return p;
  }();
  return path;
}

class CountSink : public RecordSink {
 public:
  void OnKernel(const KernelRecord& r) override { sum += r.end_ns; }
  void OnApi(const ApiRecord& r) override { sum += r.end_ns; }
  uint64_t sum = 0;
};

void BM_ReaderKernel(benchmark::State& state) {
  const std::string& path = BigTrace();
  uint64_t records = 0;
  for (auto _ : state) {
    std::string error;
    auto r = TraceReader::Open(path, &error);
    CountSink sink;
    ReadReport report = r->Read(sink);
    records = report.records;
    benchmark::DoNotOptimize(sink.sum);
  }
  state.SetItemsProcessed(state.iterations() * records);
  state.counters["records"] = static_cast<double>(records);
}
BENCHMARK(BM_ReaderKernel)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ExportChrome(benchmark::State& state) {
  const std::string& path = BigTrace();
  const std::string out = TempFile(".json");
  uint64_t records = 0, events = 0;
  for (auto _ : state) {
    auto r = exporters::ExportChrome(path, out);
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    records = r->records;
    events = r->written;
  }
  state.SetItemsProcessed(state.iterations() * records);
  state.counters["events"] = static_cast<double>(events);
  std::remove(out.c_str());
}
BENCHMARK(BM_ExportChrome)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

void BM_ExportSqlite(benchmark::State& state) {
  if (!exporters::SqliteAvailable()) {
    state.SkipWithError("built without SQLite");
    return;
  }
  const std::string& path = BigTrace();
  const std::string out = TempFile(".db");
  uint64_t records = 0;
  for (auto _ : state) {
    auto r = exporters::ExportSqlite(path, out);
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    records = r->records;
  }
  state.SetItemsProcessed(state.iterations() * records);
  std::remove(out.c_str());
}
BENCHMARK(BM_ExportSqlite)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

}  // namespace
}  // namespace twinscope

BENCHMARK_MAIN();
