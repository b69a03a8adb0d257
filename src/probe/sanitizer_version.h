// Which Compute Sanitizer API library (libsanitizer-public.so) a program of ours would load, its
// version, and whether that version is one the block probe was measured with (`blocks`, `probe`).
// CUDA-free: the dynamic loader is asked to list the program's libraries, nothing is loaded.
#pragma once

#include <string>
#include <vector>

namespace twinscope::probe {

// The Sanitizer API versions the block probe ran with on a GPU (bench/RESULTS.md, section 33: both ends of
// pyproject.toml's range on the H200, `twin` 288 of 288 exact with each).
inline const std::vector<std::string>& MeasuredSanitizerVersions() {
  static const std::vector<std::string> v = {"13.0.85", "13.5.25"};
  return v;
}
// The pip requirement of the Sanitizer API, as pyproject.toml declares it (keep the two equal).
inline constexpr const char* kSanitizerRequirement = "nvidia-cuda-sanitizer-api>=13.0.85,<=13.5.25";
inline constexpr const char* kSanitizerLibrary = "libsanitizer-public.so";

// The pip package that brings `library` (a file name such as "libsanitizer-public.so"), with its
// version range; "" for a library no nvidia-* wheel brings.
std::string PipRequirementFor(const std::string& library);

struct SanitizerLibrary {
  bool resolved = false;  // the loader named a file for it
  bool missing = false;   // the loader said "not found": the program will fail to start
  std::string path;       // the file (resolved)
  std::string version;    // "13.0.85"; "" if it cannot be told
  std::string source;     // "pip package nvidia-cuda-sanitizer-api", "CUDA toolkit", ""
  std::string error;      // why not resolved
};

// The libsanitizer-public.so that `elf` (an executable or shared library of ours that needs it:
// twinscope_probe_child, libtwinscope_blocks.so) resolves to in this environment.
SanitizerLibrary ResolveSanitizer(const std::string& elf);

// The version of the Sanitizer API library at `path`: the pip package's dist-info beside it, else the
// CUDA toolkit's version.json above it; "" if neither says. `source` (may be null) says which.
std::string SanitizerVersionAt(const std::string& path, std::string* source = nullptr);

bool SanitizerVersionMeasured(const std::string& version);

// One line for stderr: "Compute Sanitizer API 13.0.85 at PATH (pip package ...)", and where the version
// is not among the measured ones (or unknown) a warning line after it. `tool`: "twinscope blocks".
std::string DescribeSanitizer(const SanitizerLibrary& s, const std::string& tool);

}  // namespace twinscope::probe
