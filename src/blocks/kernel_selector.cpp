#include "blocks/kernel_selector.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace twinscope::blocks {

StatusOr<std::vector<KernelPattern>> ParsePatterns(std::string_view spec) {
  std::vector<KernelPattern> out;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t end = spec.find(';', pos);
    if (end == std::string_view::npos) end = spec.size();
    std::string_view item = spec.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    KernelPattern p;
    if (item.substr(0, 3) == "re:") {
      p.is_regex = true;
      p.text = std::string(item.substr(3));
      if (p.text.empty()) return Status::Error("kernel pattern \"re:\" has an empty regular expression");
      try {
        p.regex = std::regex(p.text, std::regex::ECMAScript | std::regex::optimize);
      } catch (const std::regex_error& e) {
        return Status::Error("kernel pattern \"re:" + p.text +
                             "\" is not a valid ECMAScript regular expression: " + e.what());
      }
    } else {
      p.text = std::string(item);
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string Demangle(std::string_view mangled) {
  std::string name(mangled);
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  return (status == 0 && out) ? std::string(out.get()) : name;
}

KernelSelector::KernelSelector(std::vector<KernelPattern> patterns) : patterns_(std::move(patterns)) {}

bool KernelSelector::Matches(std::string_view mangled) {
  if (patterns_.empty()) return false;
  std::string key(mangled);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  const std::string demangled = Demangle(mangled);
  bool match = false;
  for (const KernelPattern& p : patterns_) {
    if (p.is_regex) {
      match = std::regex_search(key, p.regex) || std::regex_search(demangled, p.regex);
    } else {
      match = key.find(p.text) != std::string::npos || demangled.find(p.text) != std::string::npos;
    }
    if (match) break;
  }
  cache_.emplace(std::move(key), match);
  return match;
}

bool KernelSelector::AnyMatches(const std::vector<std::string>& mangled_names) {
  for (const std::string& n : mangled_names)
    if (Matches(n)) return true;
  return false;
}

}  // namespace twinscope::blocks
