// Which kernels the block probe traces (TWINSCOPE_KERNELS). Which of their
// launches it traces is the Sampler's business (sampler.h).
//
// Patterns are ';'-separated. "re:<regex>" is an ECMAScript regular
// expression searched anywhere in the name; anything else is a plain
// substring. A kernel matches if any pattern matches its mangled name or its
// demangled name. Decisions per kernel name are cached.
//
// KernelSelector is not thread-safe (the collector calls it under its lock);
// ParsePatterns and Demangle are pure.
#pragma once

#include <cstdint>
#include <regex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace twinscope::blocks {

struct KernelPattern {
  std::string text;  // as given (without "re:")
  bool is_regex = false;
  std::regex regex;  // valid if is_regex
};

// Parses "a;re:b.*c;;d" (empty items are ignored). A bad regex is an error
// that names the pattern and says why.
StatusOr<std::vector<KernelPattern>> ParsePatterns(std::string_view spec);

// Itanium demangling of `mangled`; returns it unchanged if it is not a
// mangled C++ name (e.g. an extern "C" kernel).
std::string Demangle(std::string_view mangled);

class KernelSelector {
 public:
  explicit KernelSelector(std::vector<KernelPattern> patterns);

  bool empty() const { return patterns_.empty(); }
  const std::vector<KernelPattern>& patterns() const { return patterns_; }

  // Does this kernel (mangled name) match a pattern? Cached per name.
  bool Matches(std::string_view mangled);
  // Does any of these kernels match?
  bool AnyMatches(const std::vector<std::string>& mangled_names);

 private:
  std::vector<KernelPattern> patterns_;
  std::unordered_map<std::string, bool> cache_;
};

}  // namespace twinscope::blocks
