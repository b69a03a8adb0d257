// Conversion of CUPTI activity buffers into twinscope records.
//
// Pure over its inputs: the buffer walk uses the record iterator it is given
// (cuptiActivityGetNextRecord in the collector, a hand-built one in tests) and
// names go through a NameCache, so this runs without CUPTI or a GPU. Launch
// keys are filled in afterwards by the collector (PendingLaunches).
#pragma once

#include <cupti.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "twinscope/records.h"

namespace twinscope::cupti {

// The activity record versions of the CUPTI 13 headers.
using KernelActivity = CUpti_ActivityKernel10;
using MemcpyActivity = CUpti_ActivityMemcpy6;
using MemsetActivity = CUpti_ActivityMemset4;

// Interns kernel names once per distinct name, with their demangled form.
// Not thread-safe: one per buffer-processing lock.
class NameCache {
 public:
  using InternFn = std::function<StringId(std::string_view)>;
  explicit NameCache(InternFn intern) : intern_(std::move(intern)) {}

  struct Names {
    StringId mangled = 0;
    StringId demangled = 0;  // 0 when demangling gives nothing new
  };
  Names Get(const char* mangled);

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  InternFn intern_;
  std::unordered_map<std::string, Names, Hash, std::equal_to<>> cache_;
};

// abi::__cxa_demangle, or "" if `mangled` is not a mangled C++ name.
std::string Demangle(const char* mangled);

// start or end zero, or end before start: never passed on as timing.
inline bool InvalidTimestamps(uint64_t start, uint64_t end) { return start == 0 || end == 0 || end < start; }

KernelRecord ConvertKernel(const KernelActivity& a, NameCache& names);
MemcpyRecord ConvertMemcpy(const MemcpyActivity& a);
MemsetRecord ConvertMemset(const MemsetActivity& a);

// What one buffer held.
struct ParsedBuffer {
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> memcpys;
  std::vector<MemsetRecord> memsets;
  uint64_t kernel_invalid = 0;  // kernels flagged kFlagInvalidTimestamp
  uint64_t copy_invalid = 0;    // memcpys + memsets flagged
  uint64_t other = 0;           // records of kinds we do not convert
  bool iterator_error = false;  // the walk stopped on an error, not at the end
  CUptiResult error = CUPTI_SUCCESS;
};

using NextRecordFn = std::function<CUptiResult(uint8_t* buffer, size_t valid_bytes, CUpti_Activity** record)>;

// Walks `valid_bytes` of `buffer` with `next` and converts every record.
void ParseBuffer(uint8_t* buffer, size_t valid_bytes, const NextRecordFn& next, NameCache& names, ParsedBuffer* out);

}  // namespace twinscope::cupti
