// The join tests' per-test folders (join_fixture.h TestDir); apart from the fixture's writer so that
// tools linking the fixture (tests/python/write_twin_fixture) need no GoogleTest.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "join_fixture.h"

namespace twinscope::testing {

std::string TestDir(const std::string& prefix) {
  auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto d = std::filesystem::temp_directory_path() /
           (prefix + "_" + std::to_string(getpid()) + "_" + info->test_suite_name() + "_" + info->name());
  std::filesystem::create_directories(d);
  return d.string();
}

}  // namespace twinscope::testing
