// The demo input fuzz target (tests/fuzz/demo_input_fuzz.cpp) over mutations
// of valid requests, schedule lines and URLs, in CI without libFuzzer.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace twinscope::demo {
int DemoInputFuzzOne(const uint8_t* data, size_t size);
namespace {

TEST(DemoFuzzReplay, MutatedInputsNeverCrash) {
  const std::vector<std::string> seeds = {
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":5,"seed":3})",
      R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stream_options":{"include_usage":true}})",
      R"({"type":"step","step":3,"kind":"prefill","padded":4,"batch":[{"id":"a","tokens":4,"max_tokens":2,"seed":1}],"aborted":["b"],"finished":[],"name":"prefill step 3 [a:4]"})",
      R"({"type":"step","step":4,"kind":"decode","padded":2,"batch":[{"id":"a","tokens":1}]})",
      R"({"type":"header","version":1,"model":{"layers":4,"hidden":512,"heads":8,"kv_heads":4,"head_dim":64,"intermediate":1536,"vocab":32000},"block_size":16,"max_batch":8})",
      R"({"type":"end","steps":9})",
      "http://127.0.0.1:8000/api",
      "http://[::1]:1/",
  };
  std::mt19937_64 rng(20261201);
  const std::string alphabet = "{}[]\":,0123456789-.eE abcdefghijklmnopqrstuvwxyz\\/\x00\xff";
  for (int i = 0; i < 20000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    for (int m = 1 + static_cast<int>(rng() % 4); m > 0; --m) {
      const size_t pos = s.empty() ? 0 : rng() % s.size();
      switch (rng() % 4) {
        case 0:
          if (!s.empty()) s.erase(pos, 1 + rng() % 8);
          break;
        case 1:
          s.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 2:
          if (!s.empty()) s[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 3:
          s.insert(pos, seeds[rng() % seeds.size()].substr(0, rng() % 40));
          break;
      }
    }
    ASSERT_EQ(DemoInputFuzzOne(reinterpret_cast<const uint8_t*>(s.data()), s.size()), 0) << s;
  }
  // Deep nesting is parsed without recursion.
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(DemoInputFuzzOne(reinterpret_cast<const uint8_t*>(deep.data()), deep.size()), 0);
}

}  // namespace
}  // namespace twinscope::demo
