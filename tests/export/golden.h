// Golden files of the joined views' tests (tests/export/golden/): canonical
// text compared line by line; TWINSCOPE_UPDATE_GOLDEN=1 rewrites them.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "join_scene.h"

namespace twinscope::testing {

inline std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Compares `text` with the golden file `name`, or rewrites it on request.
inline void ExpectGolden(const std::string& name, const std::string& text) {
  const std::string path = std::string(TWINSCOPE_GOLDEN_DIR) + "/" + name;
  if (std::getenv("TWINSCOPE_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << text;
    GTEST_SKIP() << "rewrote " << path;
  }
  const std::string golden = Slurp(path);
  ASSERT_FALSE(golden.empty()) << path << " is missing (TWINSCOPE_UPDATE_GOLDEN=1 writes it)";
  if (golden == text) return;
  // The first differing line, for the failure message.
  std::istringstream a(golden), b(text);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ga = static_cast<bool>(std::getline(a, la)), gb = static_cast<bool>(std::getline(b, lb));
    if (!ga && !gb) break;
    if (la != lb || ga != gb) {
      ADD_FAILURE() << name << " differs at line " << line << ":\n  golden: " << (ga ? la : "<end>")
                    << "\n  output: " << (gb ? lb : "<end>");
      return;
    }
  }
}

// The scene's long kernel name as "K".
inline std::string Shorten(std::string s) {
  const std::string k = SceneKernel();
  for (size_t at = s.find(k); at != std::string::npos; at = s.find(k)) s.replace(at, k.size(), "K");
  return s;
}

}  // namespace twinscope::testing
