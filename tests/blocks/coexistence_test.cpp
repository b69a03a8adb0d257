// Naming the likely holder of the CUPTI/Sanitizer seat.
#include "blocks/coexistence.h"

#include <gtest/gtest.h>

namespace twinscope::blocks {
namespace {

const char kMapsWithCupti[] =
    "7f0000000000-7f0000001000 r-xp 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
    "7f0000002000-7f0000003000 r-xp 00000000 08:01 124 /usr/local/cuda/lib64/libcupti.so.13\n"
    "7f0000004000-7f0000005000 r--p 00000000 08:01 124 /usr/local/cuda/lib64/libcupti.so.13\n"
    "7ffd00000000-7ffd00001000 rw-p 00000000 00:00 0 [stack]\n";

TEST(Coexistence, NamesCuptiMappedOnce) {
  std::string h = LikelySeatHolder(kMapsWithCupti, "", "", false);
  EXPECT_NE(h.find("libcupti.so.13 is loaded"), std::string::npos) << h;
  EXPECT_EQ(h.find("libcupti.so.13", h.find("libcupti.so.13") + 1), std::string::npos) << "listed twice: " << h;
}

TEST(Coexistence, NamesOtherInjectionAndNsight) {
  std::string h = LikelySeatHolder("", "/opt/nsys/libToolsInjection64.so", "", true);
  EXPECT_NE(h.find("libToolsInjection64.so"), std::string::npos) << h;
  EXPECT_NE(h.find("Nsight"), std::string::npos) << h;
  // Our own library as the injection is not a holder.
  EXPECT_EQ(LikelySeatHolder("", "/x/lib/libtwinscope_blocks.so", "", false), "");
  EXPECT_NE(LikelySeatHolder("", "", "/x/libtwinscope_cupti.so", false).find("LD_PRELOAD"), std::string::npos);
}

TEST(Coexistence, NothingToBlame) {
  EXPECT_EQ(LikelySeatHolder("7f-7f r-xp 0 0 0 /usr/lib/libc.so.6\n", "", "", false), "");
}

TEST(Coexistence, MessagesSuggestTwin) {
  std::string silent = SilentProbeMessage(false, "", "libcupti.so.13 is loaded in the process (a CUPTI user)");
  EXPECT_NE(silent.find("no callback"), std::string::npos);
  EXPECT_NE(silent.find("libcupti.so.13"), std::string::npos);
  EXPECT_NE(silent.find("twinscope twin"), std::string::npos);
  std::string failed = SilentProbeMessage(true, "sanitizerSubscribe returned 10", "");
  EXPECT_NE(failed.find("could not subscribe"), std::string::npos);
  EXPECT_NE(failed.find("returned 10"), std::string::npos);
  EXPECT_NE(failed.find("CUPTI user"), std::string::npos);
}

}  // namespace
}  // namespace twinscope::blocks
