// The join's alignment (src/join/align.*) against a brute-force LCS on random
// sequences, its anchors and fallback, and range-name normalization.
#include "join/align.h"

#include <gtest/gtest.h>

#include <random>

#include "join/range_names.h"

namespace twinscope::join {
namespace {

size_t BruteLcs(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  std::vector<std::vector<size_t>> t(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j)
      t[i][j] = a[i - 1] == b[j - 1] ? t[i - 1][j - 1] + 1 : std::max(t[i - 1][j], t[i][j - 1]);
  return t[a.size()][b.size()];
}

// Every pair is of equal tokens, strictly increasing on both sides.
void ExpectValid(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, const std::vector<AlignPair>& p) {
  for (size_t i = 0; i < p.size(); ++i) {
    ASSERT_LT(p[i].first, a.size());
    ASSERT_LT(p[i].second, b.size());
    EXPECT_EQ(a[p[i].first], b[p[i].second]) << i;
    if (i) {
      EXPECT_LT(p[i - 1].first, p[i].first) << i;
      EXPECT_LT(p[i - 1].second, p[i].second) << i;
    }
  }
}

TEST(Align, MyersEqualsBruteForceLcsOnRandomSequences) {
  std::mt19937 rng(20);
  for (int round = 0; round < 400; ++round) {
    const size_t n = rng() % 40, m = rng() % 40;
    const uint32_t alphabet = 1 + rng() % 6;
    std::vector<uint32_t> a(n), b(m);
    for (auto& x : a) x = rng() % alphabet;
    for (auto& x : b) x = rng() % alphabet;
    std::vector<AlignPair> p;
    ASSERT_TRUE(MyersAlign(a.data(), n, b.data(), m, 1000, 0, 0, &p));
    EXPECT_EQ(p.size(), BruteLcs(a, b)) << "round " << round;
    ExpectValid(a, b, p);
  }
}

TEST(Align, SequencesWithFewEditsAlignToTheLcs) {
  std::mt19937 rng(7);
  for (int round = 0; round < 100; ++round) {
    std::vector<uint32_t> a(200);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint32_t>(i % 5);  // repeated identical steps
    std::vector<uint32_t> b = a;
    for (int e = 0; e < 5; ++e) {
      const size_t at = rng() % (b.size() + 1);
      if (rng() % 2)
        b.insert(b.begin() + static_cast<long>(at), rng() % 8);
      else if (at < b.size())
        b.erase(b.begin() + static_cast<long>(at));
    }
    std::vector<uint64_t> ka(a.size()), kb(b.size());  // keys all different: no anchors
    for (size_t i = 0; i < ka.size(); ++i) ka[i] = i;
    for (size_t i = 0; i < kb.size(); ++i) kb[i] = 1'000'000 + i;
    AlignStats st;
    auto p = AlignSequences(a, b, ka, kb, {}, &st);
    EXPECT_EQ(p.size(), BruteLcs(a, b)) << round;
    ExpectValid(a, b, p);
    EXPECT_EQ(st.capped_segments, 0u);
  }
}

TEST(Align, CapFallsBackToGreedyAndSaysSo) {
  std::vector<uint32_t> a, b;
  for (uint32_t i = 0; i < 100; ++i) a.push_back(i), b.push_back(99 - i);
  std::vector<uint64_t> ka(a.begin(), a.end()), kb(b.begin(), b.end());
  for (auto& k : ka) k += 5000;  // no anchor
  AlignOptions o;
  o.max_d = 10;
  AlignStats st;
  auto p = AlignSequences(a, b, ka, kb, o, &st);
  EXPECT_EQ(st.capped_segments, 1u);
  EXPECT_EQ(st.capped_launches, 100u);
  ExpectValid(a, b, p);
  EXPECT_FALSE(p.empty());
}

TEST(Align, IdenticalSequencesAreTheFastPath) {
  std::vector<uint32_t> a = {1, 2, 3, 1, 2, 3};
  std::vector<uint64_t> k = {1, 2, 3, 4, 5, 6};
  AlignStats st;
  auto p = AlignSequences(a, a, k, k, {}, &st);
  EXPECT_TRUE(st.identical);
  ASSERT_EQ(p.size(), 6u);
  for (uint32_t i = 0; i < 6; ++i) EXPECT_EQ(p[i], AlignPair(i, i));
}

// A sampling shadow (every 10th launch of 100,000): a subsequence of the
// primary, paired through its unique keys without a Myers search.
TEST(Align, SamplingShadowIsASubsequenceAnchoredByKeys) {
  std::vector<uint32_t> a, b;
  std::vector<uint64_t> ka, kb;
  for (uint32_t i = 0; i < 100'000; ++i) {
    a.push_back(i % 3);
    ka.push_back(0x9e3779b97f4a7c15ull * (i + 1));
    if (i % 10 == 0) b.push_back(a.back()), kb.push_back(ka.back());
  }
  AlignStats st;
  auto p = AlignSequences(a, b, ka, kb, {}, &st);
  ASSERT_EQ(p.size(), b.size());
  for (size_t j = 0; j < p.size(); ++j) EXPECT_EQ(p[j].first, j * 10) << j;
  EXPECT_EQ(st.anchors, b.size());
  EXPECT_EQ(st.capped_segments, 0u);
}

TEST(Align, SlidePositionsOfAnInsertedRepeat) {
  // a b a b [a b] a b: the inserted run could start at any of 7 launch positions (0..6).
  std::vector<uint32_t> s = {1, 2, 1, 2, 1, 2, 1, 2};
  EXPECT_EQ(SlidePositions(s, 4, 2, 0, s.size()), 7u);
  EXPECT_EQ(SlidePositions(s, 4, 2, 3, 7), 3u) << "bounded by the neighbouring regions";
  std::vector<uint32_t> t = {1, 2, 3, 4, 9, 5};
  EXPECT_EQ(SlidePositions(t, 4, 1, 0, t.size()), 1u);
}

TEST(RangeNames, XlaIdsPointersPidsAndStepNumbersAreNormalized) {
  RangeNormalizer n;
  EXPECT_EQ(n.Normalize("TSL::Thunk:#name=jit(step),hlo_op=loop_multiply_fusion,unique_hlo_op_id=8589934597#0"),
            n.Normalize("TSL::Thunk:#name=jit(step),hlo_op=loop_multiply_fusion,unique_hlo_op_id=8589934596#0"));
  EXPECT_NE(n.Normalize("TSL::Thunk:#name=jit(step),hlo_op=loop_multiply_fusion,unique_hlo_op_id=1#0"),
            n.Normalize("TSL::Thunk:#name=jit(step),hlo_op=loop_add_fusion,unique_hlo_op_id=1#0"));
  EXPECT_EQ(n.Normalize("XlaModule:#hlo_module=jit_step,program_id=12#0/op#3"),
            "XlaModule:#hlo_module=jit_step,program_id=N/op");
  EXPECT_EQ(n.Normalize("buf 0x7f00deadbeef#0"), "buf 0xN");
  EXPECT_EQ(n.Normalize("worker pid=4242#1"), "worker pid=N");
  EXPECT_EQ(n.Normalize("decode step 17 [r3:1,r5:1]#0"), "decode step N [r3:1,r5:1]");
  EXPECT_EQ(n.Normalize("step#17/attn#0"), "step/attn");
  EXPECT_EQ(n.Normalize("layer 3#0"), "layer 3") << "other numbers stay";
  std::string error;
  RangeNormalizer user({"layer \\d+", "("}, &error);
  EXPECT_EQ(user.Normalize("layer 3#0/x#1"), "layer N/x");
  EXPECT_NE(error.find("'(' is not a regular expression"), std::string::npos) << error;
}

}  // namespace
}  // namespace twinscope::join
