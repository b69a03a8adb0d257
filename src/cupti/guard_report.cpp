#include "cupti/guard_report.h"

#include <dlfcn.h>

#include <string>

#include "abi/guard_abi.h"

namespace twinscope::cupti {

std::optional<nlohmann::json> GuardReport() {
  static auto report = reinterpret_cast<TwinscopeGuardReportFn>(dlsym(RTLD_DEFAULT, TWINSCOPE_GUARD_REPORT_SYMBOL));
  if (!report) return std::nullopt;
  std::string buf(4096, '\0');
  for (int attempt = 0; attempt < 3; ++attempt) {
    size_t n = report(buf.data(), buf.size());
    if (n < buf.size()) {
      buf.resize(n);
      auto j = nlohmann::json::parse(buf, nullptr, false);
      if (j.is_discarded() || !j.is_object() || j.value("calls", nlohmann::json::object()).empty()) return std::nullopt;
      return j;
    }
    buf.assign(n + 1024, '\0');
  }
  return std::nullopt;
}

}  // namespace twinscope::cupti
