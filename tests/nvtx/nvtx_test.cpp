#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdlib>
#include <string>

namespace {

struct Lib {
  void* h = nullptr;
  void (*install)() = nullptr;
  const char* (*path)() = nullptr;
  const char* (*events)() = nullptr;
  void (*flush)() = nullptr;
  Lib() {
    const char* p = std::getenv("NVTX_INJECTION64_PATH");
    if (!p) return;
    h = dlopen(p, RTLD_NOW);  // the same handle the NVTX loader gets
    if (!h) return;
    install = reinterpret_cast<void (*)()>(dlsym(h, "test_install"));
    path = reinterpret_cast<const char* (*)()>(dlsym(h, "test_path"));
    events = reinterpret_cast<const char* (*)()>(dlsym(h, "test_events"));
    flush = reinterpret_cast<void (*)()>(dlsym(h, "test_flush"));
  }
};

TEST(NvtxInjection, RealNvtxCallsReachTheRangeStackAndTheListener) {
  Lib lib;
  ASSERT_TRUE(lib.h) << "NVTX_INJECTION64_PATH must point at the test injection library: " << dlerror();
  lib.install();
  nvtxRangePushA("step");
  nvtxRangePushA("attn");
  EXPECT_STREQ(lib.path(), "step#0/attn#0");
  nvtxMarkA("here");
  nvtxRangePop();
  nvtxDomainHandle_t d = nvtxDomainCreateA("vllm");
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = nvtxDomainRegisterStringA(d, "decode");
  nvtxDomainRangePushEx(d, &a);
  EXPECT_STREQ(lib.path(), "step#0/vllm::decode#0");
  nvtxDomainRangePop(d);
  nvtxRangePop();
  EXPECT_STREQ(lib.path(), "");
  nvtxRangeId_t id = nvtxRangeStartA("request 1");
  nvtxRangeEnd(id);
  nvtxRangeStartA("never ended");
  lib.flush();
  std::string ev = lib.events();
  EXPECT_NE(ev.find("3::here:0:closed"), std::string::npos) << ev;
  EXPECT_NE(ev.find("1::attn:1:closed"), std::string::npos) << ev;
  EXPECT_NE(ev.find("1:vllm:decode:1:closed"), std::string::npos) << ev;
  EXPECT_NE(ev.find("1::step:0:closed"), std::string::npos) << ev;
  EXPECT_NE(ev.find("2::request 1:0:closed"), std::string::npos) << ev;
  EXPECT_NE(ev.find("2::never ended:0:open"), std::string::npos) << ev;
}

}  // namespace
