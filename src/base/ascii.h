// Case-insensitive comparison of ASCII text (HTTP field names and values, URL schemes). Used instead of Boost.Beast's
// iequals, which in Boost 1.74 (Debian 12) reads one byte past the end of its arguments when they differ in case in
// their last character (found by tests/fuzz/mirror_input_fuzz.cpp; regression seed in tests/fuzz/mirror_corpus).
#pragma once

#include <string_view>

namespace twinscope {

constexpr char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

constexpr bool AsciiIEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  return true;
}

}  // namespace twinscope
