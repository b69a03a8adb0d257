// The launch key (../shared/DESIGN.md), computed identically by both
// collectors: NVTX range path at the launch, kernel name, ordinal of that
// kernel within the innermost range instance, grid and block shape.
//
// CUDA-free on purpose: the CUPTI collector and the block probe link this same
// code, so one deterministic program gives identical keys under either.
//
// Path syntax: one element per open push/pop range, outermost first, joined by
// '/'. An element is "name#k" where k counts earlier ranges of the same name
// opened directly under the same parent instance on this thread (so the 18th
// "step" range at top level is "step#17"). Ranges of a non-default NVTX domain
// are written "domain::name#k". Launches outside any range have path "".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "twinscope/records.h"

namespace twinscope {

struct LaunchKeyParts {
  std::string_view path;  // valid until the next Push/Pop on this thread
  uint32_t ordinal = 0;
  uint64_t hash = 0;
};

// Version of the launch key: the path syntax above and LaunchKeyHash below.
// Keys made by two builds join only if both have the same version; it changes
// whenever any launch would get a different key (docs/launch-key.md).
inline constexpr uint32_t kLaunchKeyVersion = 1;

// 64-bit FNV-1a over path, '|', kernel, '|', then ordinal and the six
// dimensions as little-endian u32s, with offset basis 1469598103934665603
// (not FNV's 14695981039346656037: a digit short since the first version, and
// kept, since the key is a stable format). Runs on every launch: no
// formatting, no allocation.
uint64_t LaunchKeyHash(std::string_view path, std::string_view kernel, uint32_t ordinal, Dim3 grid, Dim3 block);

// The outermost element of a key path: "decode step 3 [a/b]#0/attn#1" -> "decode step 3 [a/b]#0". It ends at
// the first '/' after "#<digits>" (an element's end), so a '/' in a range's own name (a request id, a file
// path) does not cut it; only a name that itself holds "#<digits>/" still does. A path whose elements lack
// "#k" (no collector writes one) ends at its first '/'. Points into `path`.
std::string_view TopLevelRange(std::string_view path);

// The push/pop ranges open on one thread, with the counters that make keys.
// Not thread-safe: one per thread (ThreadRangeStack()).
class RangeStack {
 public:
  RangeStack();
  ~RangeStack();

  // Opens a range. `domain` is "" for the default domain.
  void Push(std::string_view domain, std::string_view name);
  // Closes the innermost open range of `domain`. Returns false (and changes
  // nothing) if none is open.
  bool Pop(std::string_view domain);

  size_t depth() const { return frames_.size() - 1; }
  // Path of the open ranges (see above).
  const std::string& path() const { return frames_.back().path; }
  // Name of the innermost open range of `domain` ("" if none).
  std::string_view InnermostName(std::string_view domain) const;

  // Key of the next launch of `kernel` on this thread; counts it.
  LaunchKeyParts NextLaunch(std::string_view kernel, Dim3 grid, Dim3 block);

  // Identity of the open range instances: every frame (the root included) has
  // a serial number unique in the process and never reused, so a collector
  // can name "the range instance of this launch" without copying its path
  // (src/cupti/launch_tracker.h). frame_serial(0) is the root's.
  size_t frame_count() const { return frames_.size(); }
  uint64_t frame_serial(size_t i) const { return frames_[i].serial; }
  uint64_t innermost_serial() const { return frames_.back().serial; }

 private:
  // Lets kernel_counts be searched with a string_view (no allocation per launch).
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Frame {
    uint64_t serial = NextSerial();
    std::string domain;
    std::string name;
    std::string path;
    std::unordered_map<std::string, uint32_t> child_counts;  // range name -> times opened here
    std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> kernel_counts;  // kernel -> launches here
  };
  static uint64_t NextSerial();
  std::vector<Frame> frames_;  // frames_[0] is the thread's root (no range)
};

namespace range_stack_detail {
// This thread's stack once made; null before, and after the thread's
// thread_local destructors ran (launch_key.cpp). Read inline: the launch path
// calls ThreadRangeStack() on every launch.
extern thread_local constinit RangeStack* t_stack;
RangeStack& MakeThreadRangeStack();
}  // namespace range_stack_detail

// This thread's range stack (thread_local).
inline RangeStack& ThreadRangeStack() {
  if (RangeStack* s = range_stack_detail::t_stack) return *s;
  return range_stack_detail::MakeThreadRangeStack();
}

}  // namespace twinscope
