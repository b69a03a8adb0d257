// The program's own timestamp source (cuptiActivityRegisterTimestampCallback,
// or CUPTI_ACTIVITY_ATTR_TIMESTAMP_CALLBACK), served in serve mode.
//
// The guard first asks CUPTI to use the program's callback for the guard's
// activity subscriber (the per-subscriber attribute). When CUPTI refuses (13.5
// does, with CUPTI_ERROR_NOT_COMPATIBLE, once twinscope's own subscriber has
// activity enabled: measured on the H200), the guard serves the call anyway:
// the program is told SUCCESS, its cuptiGetTimestamp returns its own clock,
// and every record the guard hands to its buffer-completed callback has its
// timestamps rewritten from CUPTI's clock into the program's (clock_map.h
// says how, and how far off they can be), for each kind whose layout the
// guard knows (record_timestamps.h); records of other kinds go through
// untranslated and are counted. torch.profiler needs this: Kineto registers
// its TSC clock and keeps only GPU events inside its profiling window in that
// clock, so untranslated records are all dropped (0 of 4,000 kernels).
//
// Threads: the program's threads (registration, cuptiGetTimestamp), CUPTI's
// (buffer callbacks) and the collector's flush thread (report); one mutex
// guards the clock map.
#pragma once

#include <cupti.h>

#include <string>

#include "guard/guard.h"

namespace twinscope::guard {

// The program registers `fn` (null: unregisters); `cupti_result` is what
// CUPTI answered when the guard set it on its activity subscriber `sub`.
// Returns what the program gets.
CUptiResult ServeTimestampCallback(CUpti_SubscriberHandle sub, CUpti_TimestampCallbackFunc fn,
                                   CUptiResult cupti_result);

// The program's clock, once it registered one (cuptiGetTimestamp served).
bool ProgramTimestamp(uint64_t* timestamp);

// The program's v1 buffer callbacks, registered on the guard's activity
// subscriber `sub` through the guard's bridge (which translates).
CUptiResult RegisterProgramBuffers(const Library& l, CUpti_SubscriberHandle sub,
                                   CUpti_BuffersCallbackRequestFunc requested,
                                   CUpti_BuffersCallbackCompleteFunc completed);

// A new clock pair while translating (called every flush period).
void ResampleProgramClock();

// cuptiFinalize: the program's callback is forgotten (its counts stay).
void ForgetTimestampCallback();

// The report's "timestamps" object, or "" if the program registered none.
std::string TimestampReportJson();

}  // namespace twinscope::guard
