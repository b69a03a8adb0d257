// Fuzz target for what the demo server parses from outside: chat completion
// request bodies, schedule lines (files and a primary's GET /v1/schedule) and
// follower URLs. None may crash or hang; every rejection carries a message.
// libFuzzer entry (demo_input_fuzzer) and a replay over random inputs in CI
// (tests/demo/fuzz_replay_test.cpp).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "net/url.h"
#include "server/protocol.h"
#include "server/schedule.h"

namespace twinscope::demo {

int DemoInputFuzzOne(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto req = ParseChatRequest(in);
  if (!req.ok() && req.status().message().empty()) std::abort();
  if (req.ok() && req->messages.empty()) std::abort();
  auto line = ParseScheduleLine(in);
  if (!line.ok() && line.status().message().empty()) std::abort();
  if (line.ok() && line->type == ScheduleLine::Type::kStep) {
    // What parses formats and parses back to the same line.
    auto again = ParseScheduleLine(FormatStep(line->step));
    if (!again.ok() || FormatStep(again->step) != FormatStep(line->step)) std::abort();
  }
  auto url = ParseHttpUrl(in);
  if (url.ok() && (url->host.empty() || url->port == 0)) std::abort();
  return 0;
}

}  // namespace twinscope::demo

#ifdef TWINSCOPE_DEMO_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return twinscope::demo::DemoInputFuzzOne(data, size);
}
#endif
