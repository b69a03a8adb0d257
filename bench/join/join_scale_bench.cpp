// The join at issue 31's scale (10M primary target launches, 2M shadow launches, 200k of them with 1,000
// blocks) divided by DIVISOR: writes the synthetic twin with the trace writer, then joins it in a child process
// and writes join.json, join.sqlite, Perfetto and the report, printing the child's time and peak RSS
// (bench/RESULTS.md, "Join at scale"). Usage:
//   join_scale_bench DIR DIVISOR [EVERY]
//                                     write (DIVISOR 100: 100k / 20k / 2k), then join in a child; EVERY (5
//                                     unless given): the shadow traced every EVERY-th launch
//   join_scale_bench --join DIR       join and write the views only
//   join_scale_bench DIR DIVISOR EVERY --check MAX_MB MAX_S
//                                     CI (ctest join_scale_1_100): the join only, in a child; fails unless its
//                                     peak RSS is at most MAX_MB, it takes at most MAX_S seconds, every shadow
//                                     launch is matched and "why slow" finds each planted straggler
// The twin: the primary's launches of one target kernel, 1,000 per step ("step#N"), 5 us apart; the shadow
// traced every EVERY-th (its header says so: sampling; 1 = a prefix of the primary, the rest primary-only), the
// launches of every 10th traced one with 1,000 blocks (the rest 2), and one launch in 20 is the shadow's own (in the
// same step, no primary counterpart: the time-only pass pairs it). Every 100th 1,000-block launch has a straggler block
// 7 and a 3x longer primary kernel.
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

// The join alone, checked: every shadow launch matched, each planted straggler (and nothing else) a finding.
int Check(const std::string& dir, uint64_t stragglers) {
  auto m = join::JoinTraces(dir + "/primary.tsc", dir + "/shadow.tsc");
  if (!m.ok()) {
    std::fprintf(stderr, "join_scale_bench: %s\n", m.status().message().c_str());
    return 1;
  }
  const auto& s = m->summary;
  uint64_t findings = 0, straggling = 0;
  for (const auto& g : m->groups)
    for (const auto& sl : g.slow) findings++, straggling += (sl.verdicts & join::kVerdictStraggler) ? 1 : 0;
  std::printf("check: %llu shadow launches, %llu unmatched; %llu why-slow findings, %llu stragglers (planted %llu)\n",
              static_cast<unsigned long long>(s.shadow_launches), static_cast<unsigned long long>(s.unmatched_shadow),
              static_cast<unsigned long long>(findings), static_cast<unsigned long long>(straggling),
              static_cast<unsigned long long>(stragglers));
  return s.unmatched_shadow == 0 && findings == stragglers && straggling == stragglers ? 0 : 1;
}

int Join(const std::string& dir) {
  auto t0 = std::chrono::steady_clock::now();
  auto run = join::JoinForViews(dir + "/primary.tsc", dir + "/shadow.tsc");
  if (!run.ok()) {
    std::fprintf(stderr, "join_scale_bench: %s\n", run.status().message().c_str());
    return 1;
  }
  const auto& s = run->model.summary;
  std::printf(
      "join: %.1f s, peak RSS %ld MB (%zu target launches, %zu shadow launches: exact %llu, diverged %llu, time "
      "only %llu, unmatched %llu; %zu why-slow groups)\n",
      bench::Seconds(t0), bench::PeakRssMb(), run->model.primary.size(), run->model.shadow.size(),
      static_cast<unsigned long long>(s.exact), static_cast<unsigned long long>(s.diverged),
      static_cast<unsigned long long>(s.time_only), static_cast<unsigned long long>(s.unmatched_shadow),
      run->model.groups.size());
  std::fflush(stdout);
  return bench::WriteViewsTimed(&*run, dir, "join_scale_bench");
}

// Waits for the writer every `every` records: it never blocks, it drops past its memory cap.
bool CatchUp(TraceWriter* w, uint64_t n, uint64_t every) {
  if (n % every != every - 1) return true;
  if (w->SummaryAtStopRequest(std::chrono::seconds(120))) return true;
  std::fprintf(stderr, "join_scale_bench: the writer did not catch up in 120 s\n");
  return false;
}

int Write(const std::string& dir, uint64_t divisor, uint64_t every, uint64_t* stragglers) {
  const uint64_t primary_n = 10'000'000 / divisor, shadow_n = 2'000'000 / divisor;
  constexpr uint64_t kPerStep = 1'000, kBigBlocks = 1'000;
  const char* target = "_ZN4cupy7reduce_sum_kernelIfEEvPKT_PS1_i";
  const Dim3 small{2, 1, 1}, big{static_cast<uint32_t>(kBigBlocks), 1, 1}, block{256, 1, 1};
  // Which primary launches the shadow mirrors, and which of those have 1,000 blocks and a straggler.
  auto is_big = [](uint64_t traced) { return traced % 10 == 0; };
  auto is_slow = [](uint64_t traced) { return traced % 1'000 == 0; };
  auto key = [&](TraceWriter* w, uint64_t i, Dim3 grid, std::string* pstr) {
    *pstr = "step#" + std::to_string(i / kPerStep);
    const uint32_t ordinal = static_cast<uint32_t>(i % kPerStep);
    return LaunchKey{LaunchKeyHash(*pstr, target, ordinal, grid, block), w->Intern(*pstr), ordinal};
  };
  auto t0 = std::chrono::steady_clock::now();
  {
    auto w = bench::OpenTrace("join_scale_bench", dir + "/primary.tsc", {{"role", "primary"}});
    const StringId tid = w->Intern(target);
    std::string pstr;
    for (uint64_t i = 0; i < primary_n; ++i) {
      const bool traced = i % every == 0;
      const uint64_t t = i / every;
      const Dim3 grid = traced && is_big(t) ? big : small;
      LaunchRecord l{};
      l.seq = i;
      l.cpu_ns = 1'000'000 + i * 5'000;
      l.key = key(w.get(), i, grid, &pstr);
      l.correlation_id = static_cast<uint32_t>(i + 1);
      l.kernel = tid;
      l.grid = grid;
      l.block = block;
      w->Append(l);
      KernelRecord k{};
      k.start_ns = l.cpu_ns + 3'000;
      k.end_ns = k.start_ns + (grid.x == big.x ? 20'000 : 2'000) + (i * 7919) % 500;
      if (traced && is_big(t) && is_slow(t)) k.end_ns += 40'000;
      k.key = l.key;
      k.correlation_id = l.correlation_id;
      k.name = tid;
      k.grid = grid;
      k.block = block;
      w->Append(k);
      if (!CatchUp(w.get(), i, 250'000)) return 1;
    }
    w->Close();
    if (w->dropped()) {
      std::fprintf(stderr, "join_scale_bench: the primary's writer dropped %llu records\n",
                   static_cast<unsigned long long>(w->dropped()));
      return 1;
    }
  }
  uint64_t blocks = 0, extra = 0;
  {
    auto w =
        bench::OpenTrace("join_scale_bench", dir + "/shadow.tsc", {{"role", "shadow"}, {"config", {{"every", every}}}});
    const StringId tid = w->Intern(target);
    std::string pstr;
    uint64_t traced = 0, written = 0;
    for (uint64_t s = 0; s < shadow_n; ++s) {
      const bool own = s % 20 == 19;  // the shadow's own launch: no counterpart in the primary
      const uint64_t i = traced * every;
      const Dim3 grid = !own && is_big(traced) ? big : small;
      LaunchRecord l{};
      l.seq = s;
      if (own) {
        l.cpu_ns = 9'000'000 + i * 7'000 + 1'000;
        // In the step it ran in, with an ordinal the primary never used there.
        pstr = "step#" + std::to_string(i / kPerStep);
        const uint32_t ordinal = static_cast<uint32_t>(kPerStep + s);
        l.key = {LaunchKeyHash(pstr, target, ordinal, grid, block), w->Intern(pstr), ordinal};
        ++extra;
      } else {
        l.cpu_ns = 9'000'000 + i * 7'000;
        l.key = key(w.get(), i, grid, &pstr);
      }
      l.kernel = tid;
      l.grid = grid;
      l.block = block;
      l.blocks_recorded = grid.x;
      w->Append(l);
      const bool straggler = !own && is_big(traced) && is_slow(traced);
      *stragglers += straggler ? 1 : 0;
      for (uint32_t b = 0; b < grid.x; ++b) {
        BlockRecord br{};
        br.launch_seq = s;
        br.enter_ns = 1'000'000'000 + s * 1'000'000 + b * 2;  // all resident at once: a short tail
        br.exit_ns = br.enter_ns + 1'000 + (b * 31) % 700 + (straggler && b == 7 ? 200'000 : 0);
        br.block_linear = b;
        br.order = b;
        br.sm = b % 132;
        w->Append(br);
        if (!CatchUp(w.get(), written++, 500'000)) return 1;
      }
      blocks += grid.x;
      if (!own) ++traced;
    }
    w->Close();
    if (w->dropped()) {
      std::fprintf(stderr, "join_scale_bench: the shadow's writer dropped %llu records\n",
                   static_cast<unsigned long long>(w->dropped()));
      return 1;
    }
  }
  struct stat ps {
  }, ss{};
  stat((dir + "/primary.tsc").c_str(), &ps);
  stat((dir + "/shadow.tsc").c_str(), &ss);
  std::printf(
      "wrote a primary of %llu target launches (%.0f MB) and a shadow of %llu launches (%llu its own), %llu "
      "blocks (%.0f MB) in %.1f s\n",
      static_cast<unsigned long long>(primary_n), static_cast<double>(ps.st_size) / 1e6,
      static_cast<unsigned long long>(shadow_n), static_cast<unsigned long long>(extra),
      static_cast<unsigned long long>(blocks), static_cast<double>(ss.st_size) / 1e6, bench::Seconds(t0));
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--join") return Join(argv[2]);
  if (argc > 3 && std::string(argv[1]) == "--check-join") return Check(argv[2], std::strtoull(argv[3], nullptr, 10));
  if (argc < 3) {
    std::fprintf(stderr, "usage: join_scale_bench DIR DIVISOR [EVERY [--check MAX_MB MAX_S]] | --join DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const uint64_t divisor = std::strtoull(argv[2], nullptr, 10);
  if (divisor < 1) {
    std::fprintf(stderr, "join_scale_bench: DIVISOR must be 1 or more (1 = the issue's full size)\n");
    return 2;
  }
  const uint64_t every = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 5;
  const bool check = argc > 6 && std::string(argv[4]) == "--check";
  const long max_mb = check ? std::strtol(argv[5], nullptr, 10) : 0;
  const double max_s = check ? std::strtod(argv[6], nullptr) : 0;
  if (every < 1) {
    std::fprintf(stderr, "join_scale_bench: EVERY must be 1 or more\n");
    return 2;
  }
  mkdir(dir.c_str(), 0755);
  uint64_t stragglers = 0;
  if (int rc = Write(dir, divisor, every, &stragglers)) return rc;
  // The join in a child of its own: its peak RSS is the join's, not the writer's.
  const auto t0 = std::chrono::steady_clock::now();
  const std::string planted = std::to_string(stragglers);
  const pid_t pid = fork();
  if (pid == 0) {
    if (check)
      execl("/proc/self/exe", argv[0], "--check-join", dir.c_str(), planted.c_str(), static_cast<char*>(nullptr));
    else
      execl("/proc/self/exe", argv[0], "--join", dir.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  rusage u{};
  wait4(pid, &status, 0, &u);
  const double secs = bench::Seconds(t0);
  const long mb = u.ru_maxrss / 1024;
  std::printf("child: %.1f s wall, %.1f s user, peak RSS %ld MB\n", secs,
              static_cast<double>(u.ru_utime.tv_sec) + static_cast<double>(u.ru_utime.tv_usec) / 1e6, mb);
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  if (!check) return rc;
  if (mb > max_mb || secs > max_s) {
    std::fprintf(stderr,
                 "join_scale_bench: the join took %.1f s and %ld MB at 1/%llu of the scale (bounds: %.0f s, %ld MB)\n",
                 secs, mb, static_cast<unsigned long long>(divisor), max_s, max_mb);
    return 1;
  }
  return rc;
}
