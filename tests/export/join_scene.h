// One small joined run with known answers for the tests of the joined views
// (Perfetto, Chrome, SQLite): five matched launches of one target kernel with a
// long name, one of them by time only, a straggler, two blocks resident on one
// SM together, and a primary-only kernel between targets.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "join/join_model.h"
#include "join/joined_run.h"
#include "join_fixture.h"
#include "views/export/join/block_detail.h"

namespace twinscope::testing {

// The target kernel's name: long, as real template kernels are, so that a
// view that repeats it per event shows in the file size.
inline std::string SceneKernel() {
  return "_ZN4vllm30reshape_and_cache_flash_kernelIN3c108BFloat16ELb1EEEvPKT_" + std::string(200, 'x') + "v";
}

// step#0..step#3: one exact launch each (grid 8, stream 7, 1 ms apart;
// durations 10, 10.01, 30, 10.03 us). step#0's blocks: EvenBlocks(8, 4, 1000)
// (span 1700 ns); step#1's: EvenBlocks(8, 2, 1000), so blocks 0 and 2 overlap
// on SM 0; step#2 is slow with block 5 (SM 1) a straggler. step#4: a primary
// launch whose shadow launch at the same place has another shape (grid 4;
// its 8 blocks as recorded): a diverged pair (docs/join.md, "Matching").
// "_Z4gemmv" runs after every primary target kernel.
inline std::vector<FakeLaunch> SceneLaunches() {
  std::vector<FakeLaunch> v;
  for (int i = 0; i < 4; ++i) {
    FakeLaunch l;
    l.kernel = SceneKernel();
    l.path = "step#" + std::to_string(i);
    l.cpu_ns = 1'000'000 * static_cast<uint64_t>(i + 1);
    l.dur_ns = 10'000 + 10 * static_cast<uint64_t>(i);
    l.blocks = EvenBlocks(8, 4, 1'000);
    if (i == 1) l.blocks = EvenBlocks(8, 2, 1'000);
    if (i == 2) {
      l.dur_ns = 30'000;
      l.blocks[5].exit_ns = l.blocks[5].enter_ns + 6'000;
    }
    v.push_back(l);
  }
  FakeLaunch p;
  p.kernel = SceneKernel();
  p.path = "step#4";
  p.cpu_ns = 5'000'000;
  p.in_shadow = false;
  p.blocks = EvenBlocks(8, 4, 1'000);
  v.push_back(p);
  FakeLaunch s = p;
  s.in_shadow = true;
  s.in_primary = false;
  s.ordinal = 1;
  s.shadow_grid = {4, 1, 1};
  s.cpu_ns = 5'000'100;
  v.push_back(s);
  return v;
}

inline join::JoinedModel WriteAndJoinScene(const std::string& dir) {
  WriteOptions o;
  o.other_kernels = {"_Z4gemmv"};
  auto f = WriteTwin(dir, SceneLaunches(), o);
  auto m = join::JoinTraces(f.primary, f.shadow);
  if (!m.ok()) throw std::runtime_error(m.status().message());
  return std::move(*m);
}

// `m` as the joined views take it (join/joined_run.h): the primary's records
// and the block detail of the launches a timeline with `bounds` draws, read
// here (a join keeps them from its own passes).
inline join::JoinedRun ViewsOf(const join::JoinedModel& m,
                               const exporters::BlockBounds& bounds = exporters::kPerfettoBlockBounds) {
  join::JoinedRun run;
  run.model = m;
  Status s = join::ReadRecordLog(m.primary_path, &run.primary);
  if (!s.ok()) throw std::runtime_error(s.message());
  join::ReadDetail(&run, exporters::PlanBlocks(m, bounds).drawn_seqs);
  return run;
}

// The SQLite view of `m`, with its own detail pass (as `twinscope export DIR --format sqlite`).
inline StatusOr<exporters::ExportResult> ExportSqliteOf(const join::JoinedModel& m, const std::string& out) {
  join::JoinedRun run;
  run.model = m;
  Status s = join::ReadRecordLog(m.primary_path, &run.primary);
  if (!s.ok()) return s;
  return exporters::ExportJoinSqlite(&run, out);
}

// A fresh folder for the current test.
inline std::string SceneDir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("twinscope_views_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

}  // namespace twinscope::testing
