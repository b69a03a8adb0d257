// Table cells, labels and verdicts shared by the report's sections (fields.h).
#include "views/report/fields.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "views/report/html.h"

namespace twinscope::report {

int64_t Signed(uint64_t v) { return static_cast<int64_t>(std::min<uint64_t>(v, INT64_MAX)); }

std::string Cell(uint64_t v) { return Count(Signed(v)); }
std::string Cell(int64_t v) { return Count(v); }
std::string Cell(const std::optional<int64_t>& v) { return v ? Count(*v) : "&ndash;"; }

std::string Cell(const json& v) {
  if (v.is_null()) return "&ndash;";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_integer())
    return Count(v.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX))
                                        : v.get<int64_t>());
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v.get<double>());
    return buf;
  }
  if (v.is_string()) return Esc(v.get<std::string>());
  return Esc(v.dump(-1, ' ', false, json::error_handler_t::replace));
}

std::string Dims(const views::DimsDoc& v) {
  return "(" + std::to_string(v[0]) + "," + std::to_string(v[1]) + "," + std::to_string(v[2]) + ")";
}

std::string DurCell(uint64_t ns) { return Duration(static_cast<double>(ns)); }

std::string VerdictLabel(const std::string& v) {
  if (v == "fewer_blocks") return "fewer blocks";
  if (v == "fewer_sms") return "fewer SMs";
  if (v == "reordered") return "reordered";
  if (v == "straggler") return "straggler";
  if (v == "none") return "same structure";
  return v;
}

std::string ShortKernelName(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  std::string out;
  bool balanced = true;
  for (size_t i = 0; i < s.size() && balanced; ++i) {
    const char c = s[i];
    if (c != '<' && c != '(') {
      out += c;
      continue;
    }
    if (out.size() >= 8 && out.compare(out.size() - 8, 8, "operator") == 0) {  // operator<, operator()
      out += c;
      continue;
    }
    static constexpr std::string_view kAnon = "(anonymous namespace)";
    if (s.compare(i, kAnon.size(), kAnon) == 0) {
      out += kAnon;
      i += kAnon.size() - 1;
      continue;
    }
    const char close = c == '<' ? '>' : ')';
    size_t j = i, depth = 0;
    for (; j < s.size(); ++j) {
      if (s[j] == c) ++depth;
      if (s[j] == close && --depth == 0) break;
    }
    if (j >= s.size()) {
      balanced = false;
      break;
    }
    out += c;
    if (j > i + 1) out += "...";
    out += close;
    i = j;
  }
  if (!balanced) out = s;
  if (out.size() <= max) return out;
  // A middle ellipsis: the first and last max/2 - 1 characters (UTF-8 code points, as the page counts).
  std::vector<size_t> starts;
  for (size_t k = 0; k < out.size(); ++k)
    if ((static_cast<unsigned char>(out[k]) & 0xC0) != 0x80) starts.push_back(k);
  const size_t half = max / 2 - 1;
  if (starts.size() <= 2 * half) return out;
  return out.substr(0, starts[half]) + "\xE2\x80\xA6" + out.substr(starts[starts.size() - half]);
}

std::string Shorten(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n) + "..."; }

bool IsLossFinding(const views::LossFindingDoc& f) { return f.severity == "data_loss" || f.severity == "error"; }

int64_t DriftOf(const views::DriftDoc& d) {
  return Signed(d.time_only) + Signed(d.unmatched) + Signed(d.shape_differs);
}

}  // namespace twinscope::report
