// Memory of a join against the size of its primary: writes a synthetic primary
// of N records (launch + kernel record pairs, one target kernel in `every`)
// and a small shadow (the targets, 16 blocks each) with the trace writer, then
// joins them in a child process and writes every view (join.json, Perfetto,
// SQLite, the report), printing the child's peak RSS (getrusage) after the
// join and after the views, against the primary's record count
// (bench/RESULTS.md, "Join memory"). Usage:
//   join_memory_bench DIR RECORDS [EVERY]      write, then join in a child
//   join_memory_bench --join DIR               join and write the views only
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench_traces.h"
#include "bench_views.h"
#include "format/trace_writer.h"
#include "join/joined_run.h"
#include "launchkey/launch_key.h"
#include "views/join_writer.h"

using namespace twinscope;

namespace {

int Join(const std::string& dir) {
  auto t0 = std::chrono::steady_clock::now();
  auto run = join::JoinForViews(dir + "/primary.tsc", dir + "/shadow.tsc");
  if (!run.ok()) {
    std::fprintf(stderr, "join_memory_bench: %s\n", run.status().message().c_str());
    return 1;
  }
  std::printf(
      "join: %.1f s, peak RSS %ld MB (primary: %llu records read, %llu kept for the views; %zu target "
      "launches, %zu shadow launches, %zu steps)\n",
      bench::Seconds(t0), bench::PeakRssMb(), static_cast<unsigned long long>(run->primary.report.records),
      static_cast<unsigned long long>(run->primary.kept()), run->model.primary.size(), run->model.shadow.size(),
      run->model.steps.size());
  std::fflush(stdout);
  return bench::WriteViewsTimed(&*run, dir, "join_memory_bench");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--join") return Join(argv[2]);
  if (argc < 3) {
    std::fprintf(stderr, "usage: join_memory_bench DIR RECORDS [EVERY] | --join DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const uint64_t records = std::strtoull(argv[2], nullptr, 10);
  const uint64_t every = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1000;
  mkdir(dir.c_str(), 0755);
  const char* target = "_ZN4vllm30reshape_and_cache_flash_kernelIffEEvPKT_PT0_PKlii";
  const char* other = "_Z17ampere_bf16_gemm_128x128v";
  auto t0 = std::chrono::steady_clock::now();
  const uint64_t kernels = records / 2;
  uint64_t targets = 0;
  {
    auto w = bench::OpenTrace("join_memory_bench", dir + "/primary.tsc", {{"role", "primary"}});
    const StringId tid = w->Intern(target), oid = w->Intern(other);
    // One top-level range per 10,000 kernels: the model's steps stay few.
    StringId path = 0;
    std::string pstr;
    for (uint64_t i = 0; i < kernels; ++i) {
      const bool is_target = i % every == 0;
      if (i % 10'000 == 0) pstr = "step#" + std::to_string(i / 10'000), path = w->Intern(pstr);
      const Dim3 grid{is_target ? 1000u : 128u, 1, 1}, block{512, 1, 1};
      const uint32_t ordinal = static_cast<uint32_t>((i % 10'000) / every);
      bench::AppendLaunchAndKernel(
          w.get(), i, LaunchKey{is_target ? LaunchKeyHash(pstr, target, ordinal, grid, block) : i, path, ordinal},
          is_target ? tid : oid, grid, block);
      targets += is_target;
      // The writer never blocks, it drops past its memory cap: every 500,000 kernels wait until what was
      // written is on disk (a SUMMARY marked at_stop_request; the last one, at Close, is the trace's).
      if (i % 500'000 == 499'999 && !w->SummaryAtStopRequest(std::chrono::seconds(120))) {
        std::fprintf(stderr, "join_memory_bench: the writer did not catch up in 120 s\n");
        return 1;
      }
    }
    w->Close();
    if (w->dropped()) {
      std::fprintf(stderr, "join_memory_bench: the writer dropped %llu records\n",
                   static_cast<unsigned long long>(w->dropped()));
      return 1;
    }
  }
  {
    auto w = bench::OpenTrace("join_memory_bench", dir + "/shadow.tsc", {{"role", "shadow"}});
    const StringId tid = w->Intern(target);
    for (uint64_t s = 0; s < targets; ++s) {
      const uint64_t i = s * every;
      const std::string pstr = "step#" + std::to_string(i / 10'000);
      const Dim3 grid{1000u, 1, 1}, block{512, 1, 1};
      const uint32_t ordinal = static_cast<uint32_t>((i % 10'000) / every);
      LaunchRecord l{};
      l.seq = s;
      l.cpu_ns = 9'000'000 + i * 7'000;
      l.key = {LaunchKeyHash(pstr, target, ordinal, grid, block), w->Intern(pstr), ordinal};
      l.kernel = tid;
      l.grid = grid;
      l.block = block;
      l.blocks_recorded = 16;
      w->Append(l);
      for (uint32_t b = 0; b < 16; ++b) {
        BlockRecord br{};
        br.launch_seq = s;
        br.enter_ns = 1'000'000'000 + s * 100'000 + b * 50;
        br.exit_ns = br.enter_ns + 1'000 + (b * 31) % 700;
        br.block_linear = b;
        br.order = b;
        br.sm = b % 132;
        w->Append(br);
      }
    }
    w->Close();
  }
  struct stat st {};
  stat((dir + "/primary.tsc").c_str(), &st);
  std::printf(
      "wrote a primary of %llu records (%llu target launches, %.0f MB) and a shadow of %llu launches in %.1f s\n",
      static_cast<unsigned long long>(kernels * 2), static_cast<unsigned long long>(targets),
      static_cast<double>(st.st_size) / 1e6, static_cast<unsigned long long>(targets), bench::Seconds(t0));
  std::fflush(stdout);
  // The join in a child of its own: its peak RSS is the join's, not the writer's.
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", argv[0], "--join", dir.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  rusage u{};
  wait4(pid, &status, 0, &u);
  std::printf("child peak RSS %ld MB\n", u.ru_maxrss / 1024);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
