// Which libcupti to use: `twinscope record` and `twinscope probe` take the
// newest copy they find (README, "Which CUPTI"), unless
// TWINSCOPE_CUPTI_LIBRARY names one. Looked for, in this order (the earlier
// wins between equal versions): the loader's own libcupti.so.13
// (LD_LIBRARY_PATH, ld.so.cache), the CUDA toolkit's ($CUDA_HOME,
// /usr/local/cuda), and PyPI's nvidia-cuda-cupti (nvidia/cu13/lib) in every
// folder on the sys.path of the given Pythons and in the usual site-packages.
// Each copy is loaded in a child process to read cuptiGetVersion, so a broken
// or foreign library cannot harm the caller. CUDA-free; not thread-safe
// (forks: call it before starting threads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "abi/cupti_versions.h"
#include "base/env_names.h"
#include "base/status.h"

namespace twinscope::cuptilib {

inline constexpr const auto& kCuptiLibraryEnv = env::kCuptiLibrary;  // the settings table's name

struct Candidate {
  std::string path;   // as found (resolved to the file for the loader's copy)
  std::string where;  // "CUDA toolkit", "pip package nvidia-cuda-cupti (python3)", ...
  uint32_t version = 0;
  bool multi_subscriber = false;  // version >= 13.5 and the per-subscriber calls are there
  std::string error;              // why it could not be used (then version is 0)
  bool usable() const { return error.empty() && version > 0; }
};

struct SearchOptions {
  std::vector<std::string> pythons = {"python3"};  // asked for their sys.path
  std::vector<std::string> site_dirs;              // more site-packages folders
  bool standard_places = true;                     // the loader's, the toolkit's and the usual site-packages
};

// Loads `path` in a child process and reads its version. Never throws.
Candidate ProbeLibrary(const std::string& path, const std::string& where);

// Every copy found, each once (by real path), in order of preference.
std::vector<Candidate> FindLibraries(const SearchOptions& options);

// The newest usable candidate (the earliest of equal versions), or null.
const Candidate* Newest(const std::vector<Candidate>& candidates);

struct Choice {
  Candidate chosen;
  std::vector<Candidate> found;  // empty when TWINSCOPE_CUPTI_LIBRARY chose
  bool from_env = false;
};
// TWINSCOPE_CUPTI_LIBRARY if set (probed, and an error if unusable), else
// the newest found; an error names every place looked.
StatusOr<Choice> Choose(const SearchOptions& options);

// The folders of `python`'s sys.path ({} if it cannot run within a few
// seconds). `python` is looked up in PATH unless it holds a '/'.
std::vector<std::string> PythonSysPath(const std::string& python);

// One line for users: "CUPTI 13.5 (API 130500) at PATH (WHERE)".
std::string Describe(const Candidate& c);

}  // namespace twinscope::cuptilib
