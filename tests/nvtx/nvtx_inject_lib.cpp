// Test injection library: twinscope_nvtx plus C accessors the test calls.
#include <mutex>
#include <string>
#include <vector>

#include "launchkey/launch_key.h"
#include "nvtx/nvtx_capture.h"

namespace {
std::mutex mu;
std::vector<std::string> events;
uint64_t fake_now = 100;
uint64_t Clock() { return fake_now++; }

struct Listener : twinscope::NvtxListener {
  void OnNvtx(const twinscope::NvtxEvent& e) override {
    std::lock_guard<std::mutex> l(mu);
    events.push_back(std::to_string(int(e.kind)) + ":" + std::string(e.domain) + ":" + std::string(e.name) + ":" +
                     std::to_string(e.depth) + ":" + (e.end_ns >= e.start_ns && e.end_ns ? "closed" : "open"));
  }
} listener;
}  // namespace

extern "C" __attribute__((visibility("default"))) void test_install() { twinscope::SetNvtxListener(&listener, &Clock); }
extern "C" __attribute__((visibility("default"))) const char* test_path() {
  static thread_local std::string p;
  p = twinscope::ThreadRangeStack().path();
  return p.c_str();
}
extern "C" __attribute__((visibility("default"))) const char* test_events() {
  static std::string all;
  std::lock_guard<std::mutex> l(mu);
  all.clear();
  for (auto& e : events) all += e + "\n";
  return all.c_str();
}
extern "C" __attribute__((visibility("default"))) void test_flush() { twinscope::FlushOpenNvtxRanges(); }
