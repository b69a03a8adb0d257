// The cubin symbol reader on real cubins compiled at build time, on damaged
// images, and under randomized mutation (a fuzz-style test: the reader parses
// outside input, so no mutation may make it read out of bounds or invent a
// name that is not in the image).
#include "blocks/cubin_symbols.h"

#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace twinscope::blocks {
namespace {

std::vector<char> ReadFile(const char* path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

const char kTarget[] = "_ZN4vllm30reshape_and_cache_flash_kernelIffEEvPKT_PT0_PKlii";

TEST(CubinSymbols, TargetModuleListsItsKernelsOnly) {
  std::vector<char> cubin = ReadFile(TWINSCOPE_TEST_TARGET_CUBIN);
  auto names = CubinKernelNames(cubin.data(), cubin.size());
  ASSERT_TRUE(names.ok()) << names.status().message();
  std::vector<std::string> sorted = *names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<std::string>{kTarget, "neighbour_kernel"}));
}

TEST(CubinSymbols, OtherModuleHasNoTarget) {
  std::vector<char> cubin = ReadFile(TWINSCOPE_TEST_OTHER_CUBIN);
  auto names = CubinKernelNames(cubin.data(), cubin.size());
  ASSERT_TRUE(names.ok()) << names.status().message();
  std::vector<std::string> sorted = *names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<std::string>{"_Z16gemm_like_kernelPKfS0_Pfi", "rms_norm_kernel"}));
}

TEST(CubinSymbols, RejectsNonElfWithReason) {
  const char garbage[] = "this is not an ELF image at all, just text that is longer than an ELF header is....";
  auto r = CubinKernelNames(garbage, sizeof garbage);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no ELF magic"), std::string::npos) << r.status().message();
  EXPECT_FALSE(CubinKernelNames(nullptr, 100).ok());
  EXPECT_FALSE(CubinKernelNames(garbage, 10).ok());
}

TEST(CubinSymbols, RejectsTruncatedImage) {
  std::vector<char> cubin = ReadFile(TWINSCOPE_TEST_TARGET_CUBIN);
  Elf64_Ehdr eh;
  std::memcpy(&eh, cubin.data(), sizeof eh);
  const size_t table_end = eh.e_shoff + size_t{eh.e_shnum} * sizeof(Elf64_Shdr);
  ASSERT_LE(table_end, cubin.size());
  // Any cut into the section header table must be detected.
  for (size_t keep : {size_t{64}, size_t(eh.e_shoff), size_t(eh.e_shoff) + 1, table_end - 1}) {
    auto r = CubinKernelNames(cubin.data(), keep);
    EXPECT_FALSE(r.ok()) << "kept " << keep << " of " << cubin.size();
  }
}

#ifdef TWINSCOPE_TEST_PATCH_FATBIN
TEST(CubinSymbols, FatbinPatchIsNotMistakenForCubin) {
  std::vector<char> fatbin = ReadFile(TWINSCOPE_TEST_PATCH_FATBIN);
  EXPECT_FALSE(CubinKernelNames(fatbin.data(), fatbin.size()).ok());
  // The fallback still finds names in it.
  auto names = PrintableNames(fatbin.data(), fatbin.size());
  EXPECT_NE(std::find(names.begin(), names.end(), "twinscope_block_enter"), names.end());
}
#endif

TEST(CubinSymbols, PrintableNamesSplitsOnNonNameBytes) {
  const char bytes[] =
      "\x01\x02"
      "abc\0_Z3foov\0\xff"
      "$x.y_z\0ab";
  auto names = PrintableNames(bytes, sizeof bytes - 1, 3);
  EXPECT_EQ(names, (std::vector<std::string>{"abc", "_Z3foov", "$x.y_z"}));
}

bool Contains(const std::vector<char>& image, const std::string& s) {
  return std::search(image.begin(), image.end(), s.begin(), s.end()) != image.end();
}

// Randomized mutation of a real cubin: byte flips in the ELF header, the
// section table and the symbol table, random truncation, and fields set to
// extreme values. Properties: never crash or hang, and every name returned is
// a string present in the mutated image.
TEST(CubinSymbolsFuzz, MutatedCubinsNeverReadOutOfBoundsOrInventNames) {
  const std::vector<char> original = ReadFile(TWINSCOPE_TEST_TARGET_CUBIN);
  ASSERT_GT(original.size(), sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh;
  std::memcpy(&eh, original.data(), sizeof eh);
  std::mt19937_64 rng(20261129);
  size_t ok = 0, rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<char> img = original;
    const int mutations = 1 + int(rng() % 8);
    for (int m = 0; m < mutations; ++m) {
      switch (rng() % 6) {
        case 0:  // any byte
          img[rng() % img.size()] = char(rng());
          break;
        case 1:  // ELF header
          img[rng() % sizeof(Elf64_Ehdr)] = char(rng());
          break;
        case 2: {  // section header table
          const size_t table = eh.e_shoff, bytes = size_t{eh.e_shnum} * sizeof(Elf64_Shdr);
          if (table + bytes <= img.size()) img[table + rng() % bytes] = char(rng());
          break;
        }
        case 3: {  // a 64-bit field anywhere in the section table set to an extreme
          const size_t table = eh.e_shoff, bytes = size_t{eh.e_shnum} * sizeof(Elf64_Shdr);
          if (table + bytes <= img.size()) {
            uint64_t v = (rng() & 1) ? ~uint64_t{0} - (rng() % 64) : (rng() % (img.size() * 2));
            size_t at = table + (rng() % (bytes / 8)) * 8;
            std::memcpy(img.data() + at, &v, sizeof v);
          }
          break;
        }
        case 4:  // truncate
          img.resize(rng() % img.size());
          if (img.empty()) img.push_back(0);
          break;
        case 5:  // strings lose their terminators
          for (char& c : img)
            if (c == 0 && rng() % 4 == 0) c = 'A';
          break;
      }
    }
    auto r = CubinKernelNames(img.data(), img.size());
    if (!r.ok()) {
      ++rejected;
      EXPECT_FALSE(r.status().message().empty());
      continue;
    }
    ++ok;
    for (const std::string& name : *r) ASSERT_TRUE(Contains(img, name)) << "invented name " << name;
  }
  // Both outcomes happen, so the test exercised the parser, not just its first check.
  EXPECT_GT(ok, 100u);
  EXPECT_GT(rejected, 100u);
}

}  // namespace
}  // namespace twinscope::blocks
