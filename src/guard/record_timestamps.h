// Where the timestamps are in CUPTI's activity records, per activity kind, for
// the guard's timestamp translation (guard_timestamps.h). Only kinds whose
// layout was checked are listed; a record of any other kind is handed to the
// program untranslated and counted, never guessed at.
//
// CUPTI fills each kind with the newest record struct of its own release
// (13.5.25: CUpti_ActivityKernel13, Memcpy7, Memset5, CudaEvent3, ...), which
// the 13.0 headers the guard is built with do not have. The offsets below are
// those of the 13.5.25 structs (read from its cupti_activity.h); the 13.0
// structs have every one of these fields at the same offset, which
// record_timestamps.cpp asserts at compile time, so the table is right for
// records of either release. A newer CUPTI that moved a field would need a new
// row (checked against its headers) before the guard translates it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace twinscope::guard {

struct TimestampFields {
  uint32_t kind;        // CUpti_ActivityKind
  const char* name;     // for messages and the report
  const char* record;   // the 13.5.25 struct CUPTI fills
  uint8_t count;        // 0: the kind carries no timestamps
  uint16_t offsets[5];  // of uint64_t fields, in ns of CUPTI's clock; 0 in a field means "unknown"
  uint16_t min_size;    // the record reaches at least this far (the last field's end)
};

// The layout of `kind`, or null when the guard does not know it.
const TimestampFields* TimestampFieldsOf(uint32_t kind);

// Rewrites every known timestamp field of `record` (a record of `fields`'s
// kind) with map(value); fields holding 0 (CUPTI_TIMESTAMP_UNKNOWN) stay 0.
template <typename Map>
void RewriteTimestamps(const TimestampFields& fields, void* record, Map&& map) {
  auto* bytes = static_cast<unsigned char*>(record);
  for (uint8_t i = 0; i < fields.count; ++i) {
    uint64_t v;
    __builtin_memcpy(&v, bytes + fields.offsets[i], sizeof v);
    if (v == 0) continue;
    v = map(v);
    __builtin_memcpy(bytes + fields.offsets[i], &v, sizeof v);
  }
}

}  // namespace twinscope::guard
