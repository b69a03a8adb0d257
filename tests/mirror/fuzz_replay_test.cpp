// Runs the mirror's fuzz target (tests/fuzz/mirror_input_fuzz.cpp) without
// libFuzzer: every file of tests/fuzz/mirror_corpus, then 20,000 random
// inputs (seeded, so a failure repeats) made by mutating the corpus.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::string> Corpus() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(TWINSCOPE_MIRROR_CORPUS)) {
    std::ifstream in(e.path(), std::ios::binary);
    out.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return out;
}

void RunOne(const std::string& s) { LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

TEST(MirrorFuzzReplay, Corpus) {
  auto corpus = Corpus();
  ASSERT_GE(corpus.size(), 5u);
  for (const auto& s : corpus) RunOne(s);
}

TEST(MirrorFuzzReplay, RandomInputs) {
  auto corpus = Corpus();
  std::mt19937_64 rng(20261129);
  const std::string kDict[] = {"\r\n",
                               ":",
                               "[",
                               "]",
                               "http://",
                               "https://",
                               "X-Request-Id: ",
                               "Connection: ",
                               "Transfer-Encoding: chunked\r\n",
                               "Content-Length: ",
                               "/",
                               "?",
                               "%",
                               "\0",
                               "\xff",
                               "::1",
                               "65535",
                               "65536",
                               "0"};
  for (int i = 0; i < 20000; ++i) {
    std::string s = corpus[rng() % corpus.size()];
    int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
      switch (rng() % 5) {
        case 0:  // flip a byte
          if (!s.empty()) s[rng() % s.size()] = static_cast<char>(rng());
          break;
        case 1:  // insert random bytes
          s.insert(pos, std::string(1 + rng() % 4, static_cast<char>(rng())));
          break;
        case 2:  // erase a run
          if (!s.empty()) s.erase(rng() % s.size(), 1 + rng() % 8);
          break;
        case 3:  // insert a token
          s.insert(pos, kDict[rng() % std::size(kDict)]);
          break;
        case 4:  // splice another corpus entry
          s.insert(pos, corpus[rng() % corpus.size()].substr(0, rng() % 64));
          break;
      }
    }
    RunOne(s);
  }
}

}  // namespace
