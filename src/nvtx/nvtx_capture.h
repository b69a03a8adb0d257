// Our NVTX injection: the part of both collectors that receives the
// application's NVTX calls (the loader reads NVTX_INJECTION64_PATH, which the
// CLI points at the collector library, and calls its exported
// InitializeInjectionNvtx2). Shared unchanged by libtwinscope_cupti.so and
// libtwinscope_blocks.so, so both processes see ranges the same way.
//
// Every push/pop updates ThreadRangeStack() (src/launchkey), which the launch
// key reads. Completed ranges and marks are handed to the registered listener
// with timestamps from the registered clock. Thread-safe; callbacks run on the
// application thread that called NVTX.
#pragma once

#include <cstdint>
#include <string_view>

#include "twinscope/records.h"

namespace twinscope {

struct NvtxEvent {
  NvtxKind kind;
  std::string_view domain;  // "" = default domain
  std::string_view name;
  uint64_t start_ns;
  uint64_t end_ns;  // == start_ns for marks; 0 if still open at shutdown
  uint64_t thread_id;
  uint64_t range_id;  // start/end ranges only
  uint32_t depth;     // push/pop depth (0 = outermost)
};

// The on-disk record of an event; `intern` maps a string to its StringId
// (TraceWriter::Intern). Used by both collectors' listeners.
template <typename Intern>
NvtxRecord ToNvtxRecord(const NvtxEvent& e, Intern&& intern) {
  NvtxRecord r{};
  r.start_ns = e.start_ns;
  r.end_ns = e.end_ns;
  r.thread_id = e.thread_id;
  r.range_id = e.range_id;
  r.kind = static_cast<uint32_t>(e.kind);
  r.domain = e.domain.empty() ? 0 : intern(e.domain);
  r.name = intern(e.name);
  r.depth = e.depth;
  return r;
}

class NvtxListener {
 public:
  virtual ~NvtxListener() = default;
  virtual void OnNvtx(const NvtxEvent& event) = 0;  // must not throw
};

using NvtxClock = uint64_t (*)();

// Installs the listener and clock (either may be null: ranges are then still
// tracked for launch keys but not reported). Call before the application's
// first NVTX call if possible (at InitializeInjection).
void SetNvtxListener(NvtxListener* listener, NvtxClock clock);

// Reports every start/end range still open, with end_ns = 0 (at shutdown).
void FlushOpenNvtxRanges();

// Number of NVTX calls seen, and pops/ends with nothing open.
uint64_t NvtxCallsSeen();
uint64_t NvtxUnbalanced();

// Entry points used by the injection table (and by tests, which call them
// directly instead of going through libnvToolsExt).
namespace nvtx_capture {
void Push(std::string_view domain, std::string_view name);
void Pop(std::string_view domain);
uint64_t Start(std::string_view domain, std::string_view name);
void End(uint64_t range_id);
void Mark(std::string_view domain, std::string_view name);
}  // namespace nvtx_capture

uint64_t CurrentThreadId();  // gettid()

}  // namespace twinscope
