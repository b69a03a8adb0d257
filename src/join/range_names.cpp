// Per-process numbers in NVTX range names, replaced for the join's tokens.
#include "join/range_names.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

namespace twinscope::join {
namespace {

bool Digit(char c) { return c >= '0' && c <= '9'; }
bool Hex(char c) { return Digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Copies `in` to `out`, writing "N" for the digits after each `prefix`.
void AfterPrefix(const std::string& in, const char* prefix, std::string* out) {
  const size_t plen = std::strlen(prefix);
  out->clear();
  size_t i = 0;
  while (i < in.size()) {
    const size_t p = in.find(prefix, i);
    if (p == std::string::npos) break;
    size_t e = p + plen;
    out->append(in, i, e - i);
    if (e < in.size() && Digit(in[e])) {
      while (e < in.size() && Digit(in[e])) ++e;
      out->push_back('N');
    }
    i = e;
  }
  out->append(in, i, std::string::npos);
}

// 0x followed by hex digits -> 0xN.
void HexPointers(const std::string& in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size();) {
    if (in[i] == '0' && i + 2 < in.size() && (in[i + 1] == 'x' || in[i + 1] == 'X') && Hex(in[i + 2]) &&
        (i == 0 || !std::isalnum(static_cast<unsigned char>(in[i - 1])))) {
      out->append("0xN");
      i += 2;
      while (i < in.size() && Hex(in[i])) ++i;
    } else {
      out->push_back(in[i++]);
    }
  }
}

std::string DigitsToN(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (Digit(s[i])) {
      out.push_back('N');
      while (i < s.size() && Digit(s[i])) ++i;
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

}  // namespace

RangeNormalizer::RangeNormalizer(const std::vector<std::string>& patterns, std::string* error) {
  if (error) error->clear();
  for (const auto& p : patterns) {
    if (p.empty()) continue;
    try {
      user_.emplace_back(p, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      if (error)
        *error += (error->empty() ? "" : "; ") +
                  ("range pattern '" + p + "' is not a regular expression (" + e.what() + "): skipped");
    }
  }
}

std::string RangeNormalizer::Normalize(const std::string& path) const {
  if (path.empty()) return path;
  std::string s, t;
  const std::string& in = path;
  // Instance numbers: "name#12/..." -> "name/...". A "#k" right after a space is the name's own ("batch #3":
  // the collector appends "#k" to the name as it is), and stays.
  for (size_t i = 0; i < in.size();) {
    if (in[i] == '#' && (i == 0 || in[i - 1] != ' ')) {
      size_t e = i + 1;
      while (e < in.size() && Digit(in[e])) ++e;
      if (e > i + 1 && (e == in.size() || in[e] == '/')) {
        i = e;
        continue;
      }
    }
    s.push_back(in[i++]);
  }
  // Cheap checks first: most names hold none of these.
  for (const char* prefix :
       {"unique_hlo_op_id=", "program_id=", "pid=", "pid:", "pid ", "prefill step ", "decode step ", "mixed step "}) {
    if (s.find(prefix) == std::string::npos) continue;
    AfterPrefix(s, prefix, &t);
    s.swap(t);
  }
  if (s.find("0x") != std::string::npos || s.find("0X") != std::string::npos) {
    HexPointers(s, &t);
    s.swap(t);
  }
  for (const auto& re : user_) {
    std::string out;
    auto begin = std::sregex_iterator(s.begin(), s.end(), re);
    size_t last = 0;
    for (auto it = begin; it != std::sregex_iterator(); ++it) {
      const auto& mt = *it;
      out.append(s, last, static_cast<size_t>(mt.position()) - last);
      out += DigitsToN(mt.str());
      last = static_cast<size_t>(mt.position() + mt.length());
    }
    out.append(s, last, std::string::npos);
    s.swap(out);
  }
  return s;
}

std::vector<std::string> NormalizePatternsFromEnv() {
  std::vector<std::string> out;
  const char* v = std::getenv(kNormalizeRangeEnv);
  if (!v) return out;
  std::string s = v;
  for (size_t i = 0; i <= s.size();) {
    size_t e = s.find('\n', i);
    if (e == std::string::npos) e = s.size();
    if (e > i) out.push_back(s.substr(i, e - i));
    i = e + 1;
  }
  return out;
}

}  // namespace twinscope::join
