// Escaping and number formatting for the HTML report (html.h).
#include "views/report/html.h"

#include <cmath>
#include <cstdio>

namespace twinscope::report {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if the bytes there are not one.
size_t Utf8Length(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  auto cont = [&](size_t k) { return k < s.size() && (b(k) & 0xC0) == 0x80; };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;
    if (c == 0xF4 && b(i + 1) >= 0x90) return 0;
    return 4;
  }
  return 0;
}

}  // namespace

std::string Esc(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    switch (c) {
      case '&':
        out += "&amp;";
        ++i;
        continue;
      case '<':
        out += "&lt;";
        ++i;
        continue;
      case '>':
        out += "&gt;";
        ++i;
        continue;
      case '"':
        out += "&quot;";
        ++i;
        continue;
      case '\'':
        out += "&#39;";
        ++i;
        continue;
      default:
        break;
    }
    size_t n = Utf8Length(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else if (n == 1 && static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') {
      out += "\xEF\xBF\xBD";  // control characters are not allowed in HTML text
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string JsonForScript(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(s.size() + s.size() / 16);
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    // < > & only occur inside JSON strings, where \u escapes mean the same characters.
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (c == '\xE2' && i + 2 < s.size() && s[i + 1] == '\x80' && (s[i + 2] == '\xA8' || s[i + 2] == '\xA9')) {
      out += s[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string Count(int64_t v) {
  uint64_t magnitude = v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
  std::string digits = std::to_string(magnitude);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return v < 0 ? "-" + out : out;
}

std::string Duration(double ns) {
  if (!std::isfinite(ns)) return "-";
  double a = std::fabs(ns);
  char buf[64];
  auto fmt = [&](double v, const char* unit) {
    int decimals = v >= 100 ? 0 : v >= 10 ? 1 : 2;
    std::snprintf(buf, sizeof buf, "%.*f %s", decimals, v, unit);
    return std::string(buf);
  };
  if (a < 1e3) {
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
    return buf;
  }
  if (a < 1e6) return fmt(ns / 1e3, "\xC2\xB5s");
  if (a < 1e9) return fmt(ns / 1e6, "ms");
  return fmt(ns / 1e9, "s");
}

std::string Percent(double part, double whole) {
  if (whole == 0) return "-";
  double p = 100.0 * part / whole;
  // Never round a partial share to 100% or a non-zero one to 0%.
  if (part < whole && p >= 99.95) return ">99.9%";
  if (part > 0 && p < 0.05) return "<0.1%";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", p);
  return buf;
}

}  // namespace twinscope::report
