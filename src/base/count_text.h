// Counts as people read them: 1234567 -> "1,234,567" (stats, twin, serve and CLI text).
#pragma once

#include <cstdint>
#include <string>

namespace twinscope {

inline std::string CountText(uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

}  // namespace twinscope
