// Checked CUPTI calls. CUPTI_CHECK logs a failed call (its text, file, line
// and CUPTI's own error string; at most a few times per call site) and yields
// false. CUPTI_SETUP is for setup steps that must succeed: it throws
// SetupError, which InitializeInjection turns into a tool_state in the trace
// and one message on stderr.
#pragma once

#include <atomic>
#include <stdexcept>
#include <string>

#include "base/log.h"
#include "cupti/cupti_api.h"

namespace twinscope::cupti {

class SetupError : public std::runtime_error {
 public:
  SetupError(const std::string& what, CUptiResult result) : std::runtime_error(what), result_(result) {}
  CUptiResult result() const { return result_; }

 private:
  CUptiResult result_;
};

std::string DescribeFailedCall(const char* call, const char* file, int line, CUptiResult r);

}  // namespace twinscope::cupti

#define CUPTI_CHECK(call)                                                                                            \
  ([&]() -> bool {                                                                                                   \
    CUptiResult _ts_r = (call);                                                                                      \
    if (_ts_r == CUPTI_SUCCESS) return true;                                                                         \
    static std::atomic<int> _ts_reports{0};                                                                          \
    if (_ts_reports.fetch_add(1, std::memory_order_relaxed) < 3)                                                     \
      ::twinscope::LogError("%s", ::twinscope::cupti::DescribeFailedCall(#call, __FILE__, __LINE__, _ts_r).c_str()); \
    return false;                                                                                                    \
  }())

#define CUPTI_SETUP(call)                                                                                            \
  do {                                                                                                               \
    CUptiResult _ts_r = (call);                                                                                      \
    if (_ts_r != CUPTI_SUCCESS)                                                                                      \
      throw ::twinscope::cupti::SetupError(::twinscope::cupti::DescribeFailedCall(#call, __FILE__, __LINE__, _ts_r), \
                                           _ts_r);                                                                   \
  } while (0)
