// Runs the fuzz entry point on mutations of a real trace (bit flips, cuts,
// splices, random headers) for a bounded number of inputs: CI coverage of the
// reader's error paths without libFuzzer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <random>

#include "reader_fuzz_entry.h"
#include "test_util.h"

TEST(ReaderFuzzReplay, MutatedTracesNeverCrash) {
  std::string src = twinscope::test::WriteSampleTrace("fuzz_seed", 300, 4096);
  std::ifstream f(src, std::ios::binary);
  std::string seed((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GT(seed.size(), 100u);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 4000; ++i) {
    std::string d = seed;
    int edits = 1 + rng() % 8;
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 4) {
        case 0:
          d[rng() % d.size()] = static_cast<char>(rng());
          break;
        case 1:
          d.resize(rng() % d.size() + 1);
          break;
        case 2: {
          size_t a = rng() % d.size(), b = rng() % d.size();
          d.insert(a, d.substr(b, std::min<size_t>(64, d.size() - b)));
          break;
        }
        case 3: {
          // Large length fields: set 4 random bytes to 0xff.
          size_t a = rng() % d.size();
          for (size_t k = a; k < std::min(d.size(), a + 4); ++k) d[k] = '\xff';
          break;
        }
      }
    }
    FuzzReadTrace(reinterpret_cast<const uint8_t*>(d.data()), d.size());
  }
  SUCCEED();
}
