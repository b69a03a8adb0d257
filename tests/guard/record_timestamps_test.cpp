// The guard's table of timestamp fields (src/guard/record_timestamps.h)
// against records built from CUPTI 13.0's own structs: for each kind, exactly
// the timestamp fields named in CUPTI's headers change, and nothing else.
#include "guard/record_timestamps.h"

#include <cupti.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace twinscope::guard {
namespace {

// Fills a record with a byte pattern, sets its kind and its timestamp fields
// (named by member in `fields`), rewrites it with +7, and checks every byte:
// the timestamps moved, nothing else did.
template <typename T, typename Fields>
void Check(CUpti_ActivityKind kind, Fields fields) {
  SCOPED_TRACE(kind);
  const TimestampFields* f = TimestampFieldsOf(kind);
  ASSERT_NE(f, nullptr);
  T rec;
  std::memset(&rec, 0xAB, sizeof rec);
  rec.kind = kind;
  std::vector<uint64_t*> ts = fields(rec);
  ASSERT_EQ(f->count, ts.size());
  for (size_t i = 0; i < ts.size(); ++i) *ts[i] = 1'000'000 + i;
  T want = rec;
  for (uint64_t* t : ts) {
    const size_t at = reinterpret_cast<char*>(t) - reinterpret_cast<char*>(&rec);
    uint64_t v;
    std::memcpy(&v, reinterpret_cast<char*>(&want) + at, sizeof v);
    v += 7;
    std::memcpy(reinterpret_cast<char*>(&want) + at, &v, sizeof v);
  }
  RewriteTimestamps(*f, &rec, [](uint64_t v) { return v + 7; });
  EXPECT_EQ(std::memcmp(&rec, &want, sizeof rec), 0);
  EXPECT_LE(f->min_size, sizeof(T));
}

TEST(RecordTimestampsTest, EveryTranslatedKindRewritesExactlyItsTimestampFields) {
  auto kernel = [](CUpti_ActivityKernel10& r) {
    return std::vector<uint64_t*>{&r.start, &r.end, &r.completed, &r.queued, &r.submitted};
  };
  Check<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_KERNEL, kernel);
  Check<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, kernel);
  auto both = [](auto& r) { return std::vector<uint64_t*>{&r.start, &r.end}; };
  Check<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY, both);
  Check<CUpti_ActivityMemcpyPtoP4>(CUPTI_ACTIVITY_KIND_MEMCPY2, both);
  Check<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET, both);
  Check<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME, both);
  Check<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER, both);
  Check<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API, both);
  Check<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, both);
  Check<CUpti_ActivityOverhead3>(CUPTI_ACTIVITY_KIND_OVERHEAD, both);
  Check<CUpti_ActivityGraphTrace2>(CUPTI_ACTIVITY_KIND_GRAPH_TRACE, both);
  Check<CUpti_ActivityMarker2>(CUPTI_ACTIVITY_KIND_MARKER,
                               [](auto& r) { return std::vector<uint64_t*>{&r.timestamp}; });
  Check<CUpti_ActivityCudaEvent2>(CUPTI_ACTIVITY_KIND_CUDA_EVENT,
                                  [](auto& r) { return std::vector<uint64_t*>{&r.deviceTimestamp}; });
  Check<CUpti_ActivityMemory4>(CUPTI_ACTIVITY_KIND_MEMORY2,
                               [](auto& r) { return std::vector<uint64_t*>{&r.timestamp}; });
  Check<CUpti_ActivityMemoryPool3>(CUPTI_ACTIVITY_KIND_MEMORY_POOL,
                                   [](auto& r) { return std::vector<uint64_t*>{&r.timestamp}; });
}

// CUPTI_TIMESTAMP_UNKNOWN (0: a kernel's queued/submitted without latency
// timestamps) stays 0.
TEST(RecordTimestampsTest, UnknownTimestampsStayZero) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 1000;
  k.end = 2000;
  RewriteTimestamps(*TimestampFieldsOf(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), &k, [](uint64_t v) { return v * 3; });
  EXPECT_EQ(k.start, 3000u);
  EXPECT_EQ(k.end, 6000u);
  EXPECT_EQ(k.completed, 0u);
  EXPECT_EQ(k.queued, 0u);
  EXPECT_EQ(k.submitted, 0u);
}

TEST(RecordTimestampsTest, KindsWithoutTimestampsAndUnknownKinds) {
  for (auto kind : {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_NAME, CUPTI_ACTIVITY_KIND_CONTEXT,
                    CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_STREAM}) {
    ASSERT_NE(TimestampFieldsOf(kind), nullptr) << kind;
    EXPECT_EQ(TimestampFieldsOf(kind)->count, 0u) << kind;
  }
  // Kinds whose layout the guard has not checked: never guessed at.
  for (auto kind : {CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER, CUPTI_ACTIVITY_KIND_ENVIRONMENT,
                    CUPTI_ACTIVITY_KIND_PCIE, CUPTI_ACTIVITY_KIND_NVLINK, CUPTI_ACTIVITY_KIND_INVALID})
    EXPECT_EQ(TimestampFieldsOf(kind), nullptr) << kind;
  EXPECT_EQ(TimestampFieldsOf(4096), nullptr);
}

}  // namespace
}  // namespace twinscope::guard
