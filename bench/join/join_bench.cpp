// Join throughput on one core: writes a synthetic twin of the issue's size
// (default 1M primary kernels, 100k shadow launches with 10M blocks), then
// times join::JoinTraces over it, interleaving repetitions, and prints records
// per second. Usage: join_bench [dir] [primary_kernels] [shadow_launches] [blocks_per_launch] [reps] [diverge]
// With `diverge` the shadow repacks every 1000th launch with another grid and
// skips every 5000th (the alignment then runs Myers instead of the fast path).
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench_traces.h"
#include "format/trace_writer.h"
#include "join/join_model.h"
#include "launchkey/launch_key.h"

using namespace twinscope;

namespace {}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "/tmp/twinscope_join_bench";
  const uint64_t kernels = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1'000'000;
  const uint64_t launches = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 100'000;
  const uint32_t blocks = argc > 4 ? static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 10)) : 100;
  const int reps = argc > 5 ? std::atoi(argv[5]) : 3;
  const bool diverge = argc > 6 && std::string(argv[6]) == "diverge";
  uint64_t repacked = 0, skipped = 0;
  mkdir(dir.c_str(), 0755);
  const std::string primary = dir + "/primary.tsc", shadow = dir + "/shadow.tsc";
  const char* target = "_ZN4vllm30reshape_and_cache_flash_kernelIffEEvPKT_PT0_PKlii";
  const char* other = "_Z17ampere_bf16_gemm_128x128v";
  const uint64_t every = kernels / launches;  // one target launch in `every` kernels

  auto t0 = std::chrono::steady_clock::now();
  uint64_t primary_records = 0, shadow_records = 0;
  {
    auto w = bench::OpenTrace("join_bench", primary, {{"role", "primary"}});
    const StringId tid = w->Intern(target), oid = w->Intern(other);
    StringId path = 0;
    for (uint64_t i = 0; i < kernels; ++i) {
      const bool is_target = i % every == 0;
      const uint64_t step = i / 100;
      if (i % 100 == 0) path = w->Intern("step#" + std::to_string(step));
      const Dim3 grid{is_target ? 1000u : 128u, 1, 1}, block{512, 1, 1};
      const std::string pstr = "step#" + std::to_string(step);
      const uint32_t ordinal = is_target ? 0 : static_cast<uint32_t>(i % 100);
      bench::AppendLaunchAndKernel(
          w.get(), i, LaunchKey{LaunchKeyHash(pstr, is_target ? target : other, ordinal, grid, block), path, ordinal},
          is_target ? tid : oid, grid, block);
      primary_records += 2;
    }
    w->Close();
  }
  {
    auto w = bench::OpenTrace("join_bench", shadow, {{"role", "shadow"}});
    const StringId tid = w->Intern(target);
    uint64_t seq = 0;
    for (uint64_t s = 0; s < launches; ++s) {
      const uint64_t i = s * every;
      if (diverge && s % 5000 == 4999) {
        ++skipped;
        continue;
      }
      const std::string pstr = "step#" + std::to_string(i / 100);
      const bool repack = diverge && s % 1000 == 500;
      repacked += repack ? 1 : 0;
      const Dim3 grid{repack ? 999u : 1000u, 1, 1}, block{512, 1, 1};
      LaunchRecord l{};
      l.seq = seq++;
      l.cpu_ns = 9'000'000 + i * 7'000;
      l.key = {LaunchKeyHash(pstr, target, 0, grid, block), w->Intern(pstr), 0};
      l.kernel = tid;
      l.grid = grid;
      l.block = block;
      l.blocks_recorded = blocks;
      w->Append(l);
      for (uint32_t b = 0; b < blocks; ++b) {
        BlockRecord br{};
        br.launch_seq = l.seq;
        br.enter_ns = 1'000'000'000 + s * 100'000 + b * 50;
        br.exit_ns = br.enter_ns + 1'000 + (b * 31) % 700;
        br.block_linear = b;
        br.order = b;
        br.sm = b % 132;
        w->Append(br);
      }
      shadow_records += 1 + blocks;
    }
    w->Close();
  }
  std::printf("wrote %llu primary and %llu shadow records in %.1f s\n",
              static_cast<unsigned long long>(primary_records), static_cast<unsigned long long>(shadow_records),
              bench::Seconds(t0));

  const double total = static_cast<double>(primary_records + shadow_records);
  std::printf("| rep | join s | records/s | exact | shadow launches |\n|---|---|---|---|---|\n");
  for (int r = 0; r < reps; ++r) {
    auto t = std::chrono::steady_clock::now();
    auto m = join::JoinTraces(primary, shadow);
    const double s = bench::Seconds(t);
    if (!m.ok()) {
      std::fprintf(stderr, "join_bench: %s\n", m.status().message().c_str());
      return 1;
    }
    std::printf("| %d | %.2f | %.2fM | %llu | %llu |\n", r, s, total / s / 1e6,
                static_cast<unsigned long long>(m->summary.exact),
                static_cast<unsigned long long>(m->summary.shadow_launches));
    if (m->summary.exact != launches - repacked - skipped || m->summary.diverged != repacked) {
      std::fprintf(stderr, "join_bench: expected %llu exact matches and %llu diverged\n",
                   static_cast<unsigned long long>(launches - repacked - skipped),
                   static_cast<unsigned long long>(repacked));
      return 1;
    }
  }
  return 0;
}
