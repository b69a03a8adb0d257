// Kernel selection (substring / regex on mangled and demangled names);
// launch sampling is tested in sampler_test.cpp.
#include "blocks/kernel_selector.h"

#include <gtest/gtest.h>

namespace twinscope::blocks {
namespace {

const char kMangled[] = "_ZN4vllm30reshape_and_cache_flash_kernelIffEEvPKT_PT0_PKlii";

KernelSelector Make(const char* spec) {
  auto p = ParsePatterns(spec);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return KernelSelector(std::move(*p));
}

TEST(KernelPatterns, SplitsAndIgnoresEmptyItems) {
  auto p = ParsePatterns(";reshape;;re:^gemm.*$;");
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 2u);
  EXPECT_EQ((*p)[0].text, "reshape");
  EXPECT_FALSE((*p)[0].is_regex);
  EXPECT_EQ((*p)[1].text, "^gemm.*$");
  EXPECT_TRUE((*p)[1].is_regex);
  EXPECT_TRUE(ParsePatterns("")->empty());
}

TEST(KernelPatterns, BadRegexIsAnErrorNamingIt) {
  auto p = ParsePatterns("ok;re:foo(");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("re:foo("), std::string::npos) << p.status().message();
  EXPECT_FALSE(ParsePatterns("re:").ok());
}

TEST(Demangle, DemanglesCppAndKeepsCNames) {
  EXPECT_EQ(Demangle(kMangled),
            "void vllm::reshape_and_cache_flash_kernel<float, float>(float const*, float*, long const*, int, int)");
  EXPECT_EQ(Demangle("rms_norm_kernel"), "rms_norm_kernel");
  EXPECT_EQ(Demangle("_Znot_valid"), "_Znot_valid");
}

TEST(KernelSelector, SubstringMatchesMangledOrDemangled) {
  KernelSelector s = Make("reshape_and_cache_flash");
  EXPECT_TRUE(s.Matches(kMangled));
  EXPECT_FALSE(s.Matches("rms_norm_kernel"));
  // Only in the demangled form ("vllm::" has colons, the mangled one has "4vllm").
  KernelSelector d = Make("vllm::reshape");
  EXPECT_TRUE(d.Matches(kMangled));
  // Only in the mangled form.
  KernelSelector m = Make("IffEEvPKT_");
  EXPECT_TRUE(m.Matches(kMangled));
}

TEST(KernelSelector, RegexIsSearchedNotAnchoredUnlessAsked) {
  KernelSelector s = Make("re:cache_flash_kernel<float");
  EXPECT_TRUE(s.Matches(kMangled));
  KernelSelector anchored = Make("re:^rms_norm_kernel$");
  EXPECT_TRUE(anchored.Matches("rms_norm_kernel"));
  EXPECT_FALSE(anchored.Matches("fused_rms_norm_kernel"));
  KernelSelector several = Make("nothing;re:^rms");
  EXPECT_TRUE(several.Matches("rms_norm_kernel"));
  EXPECT_TRUE(several.AnyMatches({"a", "b", "rms_x"}));
  EXPECT_FALSE(several.AnyMatches({"a", "b"}));
}

TEST(KernelSelector, EmptySelectsNothing) {
  KernelSelector s = Make("");
  EXPECT_TRUE(s.empty());
  EXPECT_FALSE(s.Matches(kMangled));
}

}  // namespace
}  // namespace twinscope::blocks
