#include <cctype>

#include "cupti/callbacks.h"

namespace twinscope::cupti {

bool IsCopyApi(std::string_view n) {
  for (std::string_view p : {"cudaMemcpy", "cudaMemset", "cuMemcpy", "cuMemset"})
    if (n.substr(0, p.size()) == p) return true;
  return false;
}

std::string CleanApiName(std::string_view n) {
  size_t v = n.rfind("_v");
  if (v != std::string_view::npos && v + 2 < n.size()) {
    bool digits = true;
    for (size_t i = v + 2; i < n.size(); ++i) digits = digits && std::isdigit(static_cast<unsigned char>(n[i]));
    if (digits) n = n.substr(0, v);
  }
  return std::string(n);
}

}  // namespace twinscope::cupti
