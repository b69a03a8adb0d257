// Case-insensitive ASCII comparison (src/base/ascii.h), used for HTTP fields and URL schemes by the mirror and the
// demo.
#include "base/ascii.h"

#include <gtest/gtest.h>

#include <memory>
#include <string_view>

namespace twinscope {
namespace {

TEST(AsciiIEquals, EqualIgnoringCaseOnlyWithTheSameLength) {
  EXPECT_TRUE(AsciiIEquals("http://", "HTTP://"));
  EXPECT_TRUE(AsciiIEquals("hTtP://", "http://"));
  EXPECT_TRUE(AsciiIEquals("", ""));
  EXPECT_FALSE(AsciiIEquals("http://", "http:/"));
  EXPECT_FALSE(AsciiIEquals("http:/", "http://"));
  EXPECT_FALSE(AsciiIEquals("100-continue", "100-continuE "));
  EXPECT_FALSE(AsciiIEquals("[", "{"));  // 0x5B and 0x7B differ by 0x20 but are not letters
  EXPECT_FALSE(AsciiIEquals("@", "`"));
  EXPECT_TRUE(AsciiIEquals("\xc3\x84", "\xc3\x84"));  // bytes past ASCII compare as they are
  EXPECT_FALSE(AsciiIEquals("\xc3\x84", "\xc3\xa4"));
}

// The case that Boost 1.74's beast::iequals got wrong (it read one byte past both ends): the last characters differ
// only in case. Exact-size heap buffers, so that AddressSanitizer builds catch any read past them.
TEST(AsciiIEquals, LastCharacterDifferingInCaseReadsNothingPastTheEnd) {
  auto a = std::make_unique<char[]>(7), b = std::make_unique<char[]>(7);
  std::copy_n("hTtp://", 7, a.get());
  std::copy_n("http:/X", 7, b.get());
  EXPECT_FALSE(AsciiIEquals(std::string_view(a.get(), 7), std::string_view(b.get(), 7)));
  std::copy_n("HTTP://", 7, b.get());
  EXPECT_TRUE(AsciiIEquals(std::string_view(a.get(), 7), std::string_view(b.get(), 7)));
}

}  // namespace
}  // namespace twinscope
