// Block records of one launch into the report's compact base64 form (format: block_codec.h).
#include "views/report/block_codec.h"

#include <algorithm>
#include <limits>
#include <vector>

#ifdef TWINSCOPE_REPORT_ZLIB
#include <zlib.h>
#endif

namespace twinscope::report {
namespace {

struct Row {
  int64_t block, sm, enter, exit, order;
};

bool ToInt(const nlohmann::json& v, int64_t* out) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) return false;
    *out = v.get<int64_t>();
    return true;
  }
  return false;
}

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void PutSigned(std::string& out, int64_t v) {
  PutVarint(out, (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
}

// a - b - 1 and a - b without signed overflow (wraps; trace values are far from the limits).
int64_t Minus(int64_t a, int64_t b, int64_t c = 0) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b) - static_cast<uint64_t>(c));
}

// Rounds (t - t0) / unit to nearest; t >= t0 for entries, exits may lie anywhere.
int64_t Quantize(int64_t t, int64_t t0, uint64_t unit) {
  __int128 d = static_cast<__int128>(t) - t0;
  __int128 u = unit;
  __int128 q = d >= 0 ? (d + u / 2) / u : -((-d + u / 2) / u);
  return static_cast<int64_t>(q);
}

}  // namespace

std::string Base64(const std::string& in) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out.push_back(kAlphabet[v >> 18]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(kAlphabet[(v >> 6) & 63]);
    out.push_back(kAlphabet[v & 63]);
  }
  if (i < in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    if (i + 1 < in.size()) v |= uint8_t(in[i + 1]) << 8;
    out.push_back(kAlphabet[v >> 18]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

EncodedBlocks EncodeBlocks(const nlohmann::json& blocks, bool deflate) {
  if (!blocks.is_array()) return {};
  std::vector<BlockRow> rows;
  rows.reserve(blocks.size());
  uint64_t malformed = 0;
  for (const auto& b : blocks) {
    BlockRow r{};
    if (!b.is_array() || b.size() != 5 || !ToInt(b[0], &r[0]) || !ToInt(b[1], &r[1]) || !ToInt(b[2], &r[2]) ||
        !ToInt(b[3], &r[3]) || !ToInt(b[4], &r[4])) {
      ++malformed;
      continue;
    }
    rows.push_back(r);
  }
  EncodedBlocks e = EncodeBlocks(rows, deflate);
  e.malformed += malformed;
  return e;
}

EncodedBlocks EncodeBlocks(const std::vector<BlockRow>& blocks, bool deflate) {
  EncodedBlocks e;
  std::vector<Row> rows;
  rows.reserve(blocks.size());
  for (const BlockRow& b : blocks) {
    if (b[1] < 0) {
      ++e.malformed;
      continue;
    }
    rows.push_back({b[0], b[1], b[2], b[3], b[4]});
  }
  e.count = rows.size();
  if (rows.empty()) return e;
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.order != b.order ? a.order < b.order : a.block < b.block; });
  int64_t t0 = rows[0].enter, t1 = rows[0].exit;
  for (const Row& r : rows) {
    t0 = std::min(t0, r.enter);
    t1 = std::max({t1, r.exit, r.enter});
  }
  uint64_t span = static_cast<uint64_t>(static_cast<__int128>(t1) - t0);
  e.t0_ns = t0;
  e.unit_ns = span > kTimeSteps ? (span + kTimeSteps - 1) / kTimeSteps : 1;

  bool implicit = true;
  for (size_t k = 0; k < rows.size() && implicit; ++k) implicit = rows[k].order == static_cast<int64_t>(k);
  e.order_implicit = implicit;

  std::string bytes;
  bytes.reserve(rows.size() * 6);
  if (!implicit) {
    int64_t prev = -1;
    for (const Row& r : rows) {
      PutSigned(bytes, Minus(r.order, prev, 1));
      prev = r.order;
    }
  }
  int64_t prev_block = -1;
  for (const Row& r : rows) {
    PutSigned(bytes, Minus(r.block, prev_block, 1));
    prev_block = r.block;
  }
  for (const Row& r : rows) PutVarint(bytes, static_cast<uint64_t>(r.sm));
  int64_t prev_enter = 0;
  for (const Row& r : rows) {
    int64_t enter = Quantize(r.enter, t0, e.unit_ns);
    PutSigned(bytes, Minus(enter, prev_enter));
    prev_enter = enter;
  }
  for (const Row& r : rows) PutSigned(bytes, Minus(Quantize(r.exit, t0, e.unit_ns), Quantize(r.enter, t0, e.unit_ns)));
  e.bytes = bytes.size();
  (void)deflate;
#ifdef TWINSCOPE_REPORT_ZLIB
  uLongf size = compressBound(bytes.size());
  std::string z(size, '\0');
  if (deflate && compress2(reinterpret_cast<Bytef*>(z.data()), &size, reinterpret_cast<const Bytef*>(bytes.data()),
                           bytes.size(), 6) == Z_OK) {
    z.resize(size);
    bytes.swap(z);
    e.codec = "deflate";
  }
#endif
  e.base64 = Base64(bytes);
  return e;
}

bool BlockCodecDeflates() {
#ifdef TWINSCOPE_REPORT_ZLIB
  return true;
#else
  return false;
#endif
}

}  // namespace twinscope::report
