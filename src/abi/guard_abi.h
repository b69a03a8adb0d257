// The two functions libtwinscope_guard.so (src/guard) exports for the CUPTI
// collector, which looks them up with dlsym(RTLD_DEFAULT) when `record`
// preloaded the guard. Plain C: the two libraries share no C++ state.
#pragma once

#include <stddef.h>

extern "C" {

// One libcupti for the program's own CUPTI client and the collector: returns
// the path of the libcupti the guard serves the program from, the first one
// claimed by either side; `path` claims it when none is claimed yet (NULL
// only asks). Returns NULL when nothing is claimed. Thread-safe.
typedef const char* (*TwinscopeGuardClaimFn)(const char* path);

// Writes what the program asked of CUPTI through the guard and what it got
// back, as one JSON object (docs/design.md, "the program's own CUPTI client"),
// NUL-terminated into buf[size]; returns the JSON's length (when >= size, call
// again with a bigger buffer). Thread-safe; cheap enough for every flush.
typedef size_t (*TwinscopeGuardReportFn)(char* buf, size_t size);
}

#define TWINSCOPE_GUARD_CLAIM_SYMBOL "twinscope_guard_claim_cupti"
#define TWINSCOPE_GUARD_REPORT_SYMBOL "twinscope_guard_report"
