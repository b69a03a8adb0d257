// The report's block codec against a decoder written here from block_codec.h's description (the page's
// decoder, in report.js, is checked in the browser test), on random blocks.
#include "views/report/block_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "chromium.h"  // DecodeBase64

#ifdef TWINSCOPE_REPORT_ZLIB
#include <zlib.h>
#endif

namespace twinscope::report {
namespace {

using nlohmann::json;
using Row = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>;  // order, block, sm, enter, exit (units)

std::string Inflate(const std::string& z, uint64_t size) {
#ifdef TWINSCOPE_REPORT_ZLIB
  std::string out(size, '\0');
  uLongf n = size;
  EXPECT_EQ(uncompress(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(z.data()), z.size()),
            Z_OK);
  out.resize(n);
  return out;
#else
  ADD_FAILURE() << "deflated block data in a build without zlib";
  return z;
#endif
}

// Decodes EncodeBlocks' output back into rows, as block_codec.h describes the format.
std::vector<Row> Decode(const EncodedBlocks& e) {
  std::string bytes = testing_report::DecodeBase64(e.base64);
  if (std::string(e.codec) == "deflate") bytes = Inflate(bytes, e.bytes);
  EXPECT_EQ(bytes.size(), e.bytes);
  size_t p = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      EXPECT_LT(p, bytes.size());
      if (p >= bytes.size()) return v;
      uint8_t b = static_cast<uint8_t>(bytes[p++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  };
  auto zig = [&]() {
    uint64_t v = varint();
    return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
  };
  size_t n = e.count;
  std::vector<int64_t> order(n), block(n), sm(n), enter(n), exit(n);
  int64_t acc = -1;
  for (size_t k = 0; k < n; ++k) order[k] = e.order_implicit ? static_cast<int64_t>(k) : (acc += zig() + 1);
  acc = -1;
  for (size_t k = 0; k < n; ++k) block[k] = (acc += zig() + 1);
  for (size_t k = 0; k < n; ++k) sm[k] = static_cast<int64_t>(varint());
  acc = 0;
  for (size_t k = 0; k < n; ++k) enter[k] = (acc += zig());
  for (size_t k = 0; k < n; ++k) exit[k] = enter[k] + zig();
  EXPECT_EQ(p, bytes.size()) << "bytes left over";
  std::vector<Row> rows;
  for (size_t k = 0; k < n; ++k) rows.emplace_back(order[k], block[k], sm[k], enter[k], exit[k]);
  return rows;
}

// What the encoder should keep of one input row: times in units from t0, rounded to nearest.
Row Expected(const json& b, int64_t t0, uint64_t unit) {
  auto q = [&](int64_t t) {
    double d = static_cast<double>(t - t0) / static_cast<double>(unit);
    return static_cast<int64_t>(d >= 0 ? std::floor(d + 0.5) : -std::floor(-d + 0.5));
  };
  return {b[4].get<int64_t>(), b[0].get<int64_t>(), b[1].get<int64_t>(), q(b[2].get<int64_t>()),
          q(b[3].get<int64_t>())};
}

json RandomBlocks(std::mt19937_64& rng, size_t n, int64_t span, bool permutation) {
  json rows = json::array();
  std::vector<int64_t> orders(n);
  for (size_t i = 0; i < n; ++i)
    orders[i] = permutation ? static_cast<int64_t>(i) : static_cast<int64_t>(rng() % (n * 2));
  std::shuffle(orders.begin(), orders.end(), rng);
  for (size_t i = 0; i < n; ++i) {
    int64_t enter = static_cast<int64_t>(rng() % static_cast<uint64_t>(span));
    int64_t exit = enter + static_cast<int64_t>(rng() % static_cast<uint64_t>(span / 4 + 1)) - (i % 17 == 0 ? 5 : 0);
    int64_t block = i % 11 == 0 ? static_cast<int64_t>(rng() % 100000) : static_cast<int64_t>(i);
    rows.push_back({block, static_cast<int64_t>(rng() % 300), enter + 1000, exit + 1000, orders[i]});
  }
  return rows;
}

void CheckRoundTrip(const json& rows, bool deflate) {
  EncodedBlocks e = EncodeBlocks(rows, deflate);
  ASSERT_EQ(e.count, rows.size());
  EXPECT_EQ(e.malformed, 0u);
  EXPECT_EQ(std::string(e.codec), deflate && BlockCodecDeflates() ? "deflate" : "raw");
  std::vector<Row> want;
  for (const auto& b : rows) want.push_back(Expected(b, e.t0_ns, e.unit_ns));
  std::sort(want.begin(), want.end(), [](const Row& a, const Row& b) {
    return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) < std::get<0>(b) : std::get<1>(a) < std::get<1>(b);
  });
  std::vector<Row> got = Decode(e);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(std::get<0>(got[k]), std::get<0>(want[k])) << "order, row " << k;
    EXPECT_EQ(std::get<1>(got[k]), std::get<1>(want[k])) << "block, row " << k;
    EXPECT_EQ(std::get<2>(got[k]), std::get<2>(want[k])) << "sm, row " << k;
    // Rows with equal (order, block) may come in either order; their times are then checked loosely.
    if (k + 1 < got.size() && std::get<0>(want[k]) == std::get<0>(want[k + 1]) &&
        std::get<1>(want[k]) == std::get<1>(want[k + 1]))
      continue;
    EXPECT_EQ(std::get<3>(got[k]), std::get<3>(want[k])) << "enter, row " << k;
    EXPECT_EQ(std::get<4>(got[k]), std::get<4>(want[k])) << "exit, row " << k;
  }
}

TEST(BlockCodec, RandomBlocksRoundTrip) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 30; ++round) {
    size_t n = 1 + rng() % 3000;
    int64_t span = round % 3 == 0 ? 5'000'000'000 : 1 + static_cast<int64_t>(rng() % 900'000);
    json rows = RandomBlocks(rng, n, span, round % 2 == 0);
    CheckRoundTrip(rows, true);
    CheckRoundTrip(rows, false);
  }
}

TEST(BlockCodec, ShortSpansKeepNanoseconds) {
  std::mt19937_64 rng(3);
  json rows = RandomBlocks(rng, 500, 800'000, true);
  EncodedBlocks e = EncodeBlocks(rows);
  EXPECT_EQ(e.unit_ns, 1u);
  EXPECT_TRUE(e.order_implicit);
  EXPECT_EQ(e.t0_ns, [&] {
    int64_t t0 = INT64_MAX;
    for (const auto& b : rows) t0 = std::min(t0, b[2].get<int64_t>());
    return t0;
  }());
}

TEST(BlockCodec, LongSpansAreRoundedToASmallUnit) {
  json rows = json::array({{0, 0, 0, 3'000'000'000, 0}, {1, 1, 10, 20, 1}});
  EncodedBlocks e = EncodeBlocks(rows);
  EXPECT_EQ(e.unit_ns, (3'000'000'000 + kTimeSteps - 1) / kTimeSteps);
  std::vector<Row> got = Decode(e);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_LE(std::abs(std::get<4>(got[0]) * static_cast<int64_t>(e.unit_ns) - 3'000'000'000),
            static_cast<int64_t>(e.unit_ns));
}

TEST(BlockCodec, OrdersWithGapsAreWritten) {
  json rows = json::array({{5, 0, 0, 10, 3}, {6, 1, 5, 10, 9}});
  EncodedBlocks e = EncodeBlocks(rows);
  EXPECT_FALSE(e.order_implicit);
  std::vector<Row> got = Decode(e);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(std::get<0>(got[0]), 3);
  EXPECT_EQ(std::get<0>(got[1]), 9);
}

TEST(BlockCodec, MalformedRowsAreCountedAndLeftOut) {
  json rows = json::array(
      {{0, 1, 0, 10, 0}, {1, 2, 3}, "x", {2, -1, 0, 1, 1}, {3, 1, "a", 4, 2}, {4, 1, 1.5, 4, 3}, {5, 1, 0, 9, 1}});
  EncodedBlocks e = EncodeBlocks(rows);
  EXPECT_EQ(e.count, 2u);
  EXPECT_EQ(e.malformed, 5u);
  EXPECT_EQ(Decode(e).size(), 2u);
  EXPECT_EQ(EncodeBlocks(json::object()).count, 0u);
  EXPECT_TRUE(EncodeBlocks(json::array()).base64.empty());
}

TEST(BlockCodec, Base64MatchesRfc4648) {
  const std::pair<const char*, const char*> cases[] = {{"", ""},
                                                       {"f", "Zg=="},
                                                       {"fo", "Zm8="},
                                                       {"foo", "Zm9v"},
                                                       {"foob", "Zm9vYg=="},
                                                       {"fooba", "Zm9vYmE="},
                                                       {"foobar", "Zm9vYmFy"}};
  for (auto [in, out] : cases) EXPECT_EQ(Base64(in), out) << in;
  EXPECT_EQ(Base64(std::string("\xff\x00\xfe", 3)), "/wD+");
}

}  // namespace
}  // namespace twinscope::report
