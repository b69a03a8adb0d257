// The guard's per-entry-point accounting, without CUPTI's headers (the
// forwarders in guard_forwarded.cpp cannot see CUPTI's prototypes of the
// functions they define). guard.h holds the rest of the guard's state.
#pragma once

#include <atomic>
#include <cstdint>

namespace twinscope::guard {

// One entry point's accounting: a static per entry point, linked into the
// report's list at its first call.
struct CallSlot {
  const char* name;
  const char* how;  // "served" or "forwarded"
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> failed{0};   // non-success results (normal ends excepted)
  std::atomic<int> last_failure{0};  // the last such result
  std::atomic<uint64_t> refused{0};  // floor: not passed to CUPTI
  std::atomic<bool> linked{false};
  CallSlot* next = nullptr;
  CallSlot(const char* n, const char* h) : name(n), how(h) {}
};

// Counts a call and its result `r` (a CUptiResult; says the first failure of
// a few entry points on stderr) and returns `r`.
int NoteResult(CallSlot& slot, int r);
// dlsym in the one libcupti (loaded on first use), null if absent.
void* Symbol(const char* name);
// False when no libcupti could be loaded.
bool HaveCupti();

}  // namespace twinscope::guard
