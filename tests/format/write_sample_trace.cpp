// Writes a small real trace to argv[1] (seed input for the reader fuzzer).
#include <filesystem>

#include "test_util.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::string p = twinscope::test::WriteSampleTrace("seed", 200, 4096);
  if (p.empty()) return 1;
  std::filesystem::copy_file(p, argv[1], std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(p);
  return 0;
}
