// Times the join's two-level alignment (src/join/instances.h) on synthetic launch sequences of 1M launches:
// identical twins, a repacked and a skipped launch now and then with missing steps, and a Triton-like
// autotuner's benchmark stretch in step 0. Usage: align_bench [launches] [per_step] [reps]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "join/instances.h"
#include "join/range_names.h"

using namespace twinscope::join;

namespace {

struct Side {
  std::vector<std::string> path_store;
  AlignSide side;
  void Add(size_t step, uint32_t token, uint64_t key) {
    if (path_store.empty() || path_store.back() != "step " + std::to_string(step) + "#0")
      path_store.push_back("step " + std::to_string(step) + "#0");
    paths.push_back(path_store.size() - 1);
    side.tokens.push_back(token), side.kernels.push_back(token % 7), side.keys.push_back(key);
  }
  AlignSide& Finish() {
    side.paths.clear();
    for (size_t i : paths) side.paths.push_back(&path_store[i]);
    return side;
  }
  std::vector<size_t> paths;
};

// scenario 0: identical; 1: every 1000th launch repacked, every 5000th skipped, every 1000th step missing;
// 2: step 0 holds an autotuner's benchmark (5 configs, the primary 200 each, the shadow 80).
void Make(int scenario, size_t n, size_t per_step, Side* a, Side* b) {
  a->path_store.reserve(n / per_step + 2), b->path_store.reserve(n / per_step + 2);
  if (scenario == 2)
    for (uint32_t c = 0; c < 5; ++c)
      for (int i = 0; i < 200; ++i) {
        a->Add(0, 100 + c, (uint64_t{c} << 40) | static_cast<uint64_t>(i));
        if (i < 80) b->Add(0, 100 + c, (uint64_t{c} << 40) | static_cast<uint64_t>(i));
      }
  for (size_t i = 0; i < n; ++i) {
    const size_t step = i / per_step;
    const uint32_t token = static_cast<uint32_t>(i % per_step % 5);
    const uint64_t key = (uint64_t{step} << 20) | (i % per_step);
    a->Add(step, token, key);
    if (scenario == 1 && (step % 1000 == 999 || i % 5000 == 4999)) continue;
    b->Add(step, scenario == 1 && i % 1000 == 500 ? token + 50 : token, key);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  const size_t per_step = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 100;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 3;
  const char* names[] = {"identical", "diverged (repacked 1/1000, skipped 1/5000, missing steps 1/1000)",
                         "autotune benchmark in step 0"};
  RangeNormalizer norm;
  std::printf("scenario\tprimary\tshadow\tinstances\tpairs\tbounded\tbest_ms\tns_per_launch\n");
  for (int scenario = 0; scenario < 3; ++scenario) {
    Side a, b;
    Make(scenario, n, per_step, &a, &b);
    const AlignSide &sa = a.Finish(), &sb = b.Finish();
    double best = 1e300;
    TwoLevelResult r;
    for (int rep = 0; rep < reps; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      r = AlignTwoLevel(sa, sb, norm, TwoLevelOptions{});
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      best = ms < best ? ms : best;
    }
    std::printf("%s\t%zu\t%zu\t%zu/%zu\t%zu\t%llu\t%.1f\t%.1f\n", names[scenario], sa.tokens.size(), sb.tokens.size(),
                r.a.size(), r.b.size(), r.pairs.size(), static_cast<unsigned long long>(r.bounded_instances), best,
                best * 1e6 / static_cast<double>(sa.tokens.size()));
  }
  return 0;
}
