// libtwinscope_guard.so: what `twinscope record` preloads (LD_PRELOAD) so
// that the watched program's own CUPTI client (torch.profiler's Kineto, a
// program using the activity API) keeps working beside the collector.
//
// The guard defines the cupti* entry points, so the program's calls reach it
// and not its own copy of libcupti (PyTorch wheels bring one), and serves them
// from the libcupti the collector uses: one copy in the process
// (guard_abi.h's claim). With CUPTI >= 13.5 the legacy (v1) calls are served
// by subscribers of the guard's own in multi-subscriber mode
// (guard_served.cpp): one for the program's callbacks (cuptiSubscribe), one
// for its activity; records and callbacks reach the program's functions
// unchanged (their timestamps moved into the program's own clock where it
// registered one and CUPTI refused it: guard_timestamps.h). Every other documented entry point goes to that libcupti as
// is (guard_forwarded.cpp). Below 13.5 CUPTI cannot hold two clients: the guard refuses the calls that would take the
// collector's seat (the floor), so twinscope's trace stays complete and the program gets a clear error. Either way each
// call and its result are counted, said once on stderr and reported to the collector (twinscope_guard_report), which
// puts them in the trace's tool_state.
//
// Threads: any application thread, and CUPTI's own (buffer callbacks). The
// guard starts nothing and does nothing until the program calls CUPTI.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "abi/cupti_v2.h"
#include "guard/guard_slots.h"

namespace twinscope::guard {

enum class Mode {
  kServe,    // CUPTI >= 13.5: served from the guard's own multi-subscriber subscribers
  kFloor,    // CUPTI < 13.5 (or without the per-subscriber calls): seat-taking calls refused
  kNoCupti,  // no libcupti could be loaded: every call fails
};

// The one libcupti, loaded at the program's first CUPTI call.
struct Library {
  void* handle = nullptr;
  std::string path;
  uint32_t version = 0;
  Mode mode = Mode::kNoCupti;
  std::string why_floor;  // what keeps the guard from serving (kFloor)
  cupti::v2::Api v2;
  decltype(&cuptiSubscribe) Subscribe = nullptr;
  decltype(&cuptiUnsubscribe) Unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) EnableCallback = nullptr;
  decltype(&cuptiEnableDomain) EnableDomain = nullptr;
  decltype(&cuptiEnableAllDomains) EnableAllDomains = nullptr;
  decltype(&cuptiGetCallbackState) GetCallbackState = nullptr;
  decltype(&cuptiActivityFlushAll) ActivityFlushAll = nullptr;
  decltype(&cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
  decltype(&cuptiGetTimestamp) GetTimestamp = nullptr;
  decltype(&cuptiActivityGetAttribute) ActivityGetAttribute = nullptr;
  decltype(&cuptiGetThreadIdType) GetThreadIdType = nullptr;
};

// Loads the library on first use (never fails: see mode). Thread-safe.
const Library& Lib();

// CUPTI's name of a result ("CUPTI_ERROR_NOT_COMPATIBLE").
std::string ResultName(CUptiResult r);

// Counts a call and its result (guard_slots.h) and returns `r`.
inline CUptiResult Note(CallSlot& slot, CUptiResult r) { return static_cast<CUptiResult>(NoteResult(slot, r)); }
// Floor: counts the refusal, says it once on stderr, returns 39.
CUptiResult Refuse(CallSlot& slot);
// The program's records read through the guard (cuptiActivityGetNextRecord).
void CountRecord();

// The guard's subscribers (serve mode). ActivitySubscriber() creates the
// activity one on first use; null (with *error) if CUPTI refused it.
CUpti_SubscriberHandle ActivitySubscriber(CUptiResult* error);
// Drops the activity subscriber (cuptiFinalize by the program).
void ResetActivitySubscriber();

}  // namespace twinscope::guard
