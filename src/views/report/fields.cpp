// Tolerant JSON reads, table cells, labels and key sets shared by the report's sections (fields.h).
#include "views/report/fields.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "views/report/html.h"

namespace twinscope::report {

const json& At(const json& j, std::string_view key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}
bool Has(const json& j, std::string_view key) { return !At(j, key).is_null(); }
double Num(const json& j, std::string_view key, double def) {
  const json& v = At(j, key);
  return v.is_number() ? v.get<double>() : def;
}
int64_t Int(const json& j, std::string_view key, int64_t def) {
  const json& v = At(j, key);
  if (v.is_number_unsigned()) return static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX));
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float() && std::isfinite(v.get<double>())) return static_cast<int64_t>(v.get<double>());
  return def;
}
std::string Str(const json& j, std::string_view key, std::string def) {
  const json& v = At(j, key);
  return v.is_string() ? v.get<std::string>() : def;
}
bool Bool(const json& j, std::string_view key) {
  const json& v = At(j, key);
  return v.is_boolean() && v.get<bool>();
}

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

std::string Dims(const json& v) {
  if (!v.is_array() || v.empty()) return "&ndash;";
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + (v[i].is_number_integer() ? v[i].dump() : Cell(v[i]));
  return s + ")";
}

std::string DurCell(const json& j, std::string_view key) {
  const json& v = At(j, key);
  return v.is_number() ? Duration(v.get<double>()) : "&ndash;";
}

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

bool IsLossFinding(const json& f) {
  const std::string sev = Str(f, "severity");
  return sev == "data_loss" || sev == "error";
}

int64_t DriftOf(const json& d) { return Int(d, "time_only") + Int(d, "unmatched") + Int(d, "shape_differs"); }

}  // namespace twinscope::report
