// Writes the join tests' golden twin scene (tests/join/golden/stats.txt) as
// DIR/primary.tsc and DIR/shadow.tsc, for the Python API test
// (tests/python/test_api.py) to join with the installed `twinscope`.
#include <cstdio>
#include <string>
#include <vector>

#include "join_fixture.h"

int main(int argc, char** argv) {
  using twinscope::testing::FakeLaunch;
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_twin_fixture DIR\n");
    return 2;
  }
  std::vector<FakeLaunch> launches;
  uint64_t t = 1'000'000;
  for (int s = 0; s < 3; ++s) {
    for (int i = 0; i < 3; ++i) {
      FakeLaunch l;
      l.path = "step#" + std::to_string(s);
      l.ordinal = static_cast<uint32_t>(i);
      l.cpu_ns = t;
      t += 1'000'000;
      launches.push_back(l);
    }
  }
  launches[4].shadow_grid = {5, 1, 1};  // step#1 #1: another batch shape
  launches[7].in_shadow = false;        // step#2 #1: not traced
  launches[8].dur_ns = 50'000;          // step#2 #2: slow, one straggler block
  launches[8].blocks = twinscope::testing::EvenBlocks(8, 4, 1'000);
  launches[8].blocks[5].exit_ns += 40'000;
  auto files = twinscope::testing::WriteTwin(argv[1], launches);
  std::printf("%s\n%s\n", files.primary.c_str(), files.shadow.c_str());
  return 0;
}
