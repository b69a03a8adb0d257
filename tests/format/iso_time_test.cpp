// ISO 8601 UTC time text (src/base/iso_time.h), as the mirror's request log and the demo's schedule write it.
#include "base/iso_time.h"

#include <gtest/gtest.h>

namespace twinscope {
namespace {

TEST(IsoTime, MicrosecondsInUtc) {
  using namespace std::chrono;
  const system_clock::time_point t{seconds(1764590400) + microseconds(123)};  // 2025-12-01 12:00:00 UTC
  EXPECT_EQ(IsoTimeUtc(t), "2025-12-01T12:00:00.000123Z");
  EXPECT_EQ(IsoTimeUtc(system_clock::time_point{}), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(IsoTimeUtcNow().size(), 27u);
}

}  // namespace
}  // namespace twinscope
