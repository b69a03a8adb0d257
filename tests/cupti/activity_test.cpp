// Unit tests of the activity-buffer conversion with hand-built CUPTI 13
// records and a hand-built record iterator (no CUPTI library involved).
#include "cupti/activity.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace twinscope::cupti {
namespace {

struct Interner {
  std::map<std::string, StringId> ids;
  std::vector<std::string> names{""};
  StringId operator()(std::string_view s) {
    auto [it, inserted] = ids.emplace(std::string(s), static_cast<StringId>(names.size()));
    if (inserted) names.emplace_back(s);
    return it->second;
  }
};

// A "buffer" that is really a list of record pointers; the iterator walks it.
struct FakeBuffer {
  std::vector<CUpti_Activity*> records;
  CUptiResult fail_at_end = CUPTI_ERROR_MAX_LIMIT_REACHED;
  NextRecordFn Iterator() {
    return [this](uint8_t*, size_t, CUpti_Activity** r) -> CUptiResult {
      size_t i = 0;
      if (*r) {
        while (i < records.size() && records[i] != *r) ++i;
        ++i;
      }
      if (i >= records.size()) return fail_at_end;
      *r = records[i];
      return CUPTI_SUCCESS;
    };
  }
};

KernelActivity Kernel(uint64_t start, uint64_t end, uint32_t corr, const char* name) {
  KernelActivity k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = end;
  k.correlationId = corr;
  k.name = name;
  k.gridX = 132;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = 1;
  k.blockZ = 1;
  k.deviceId = 3;
  k.contextId = 4;
  k.streamId = 5;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 2048;
  k.registersPerThread = 40;
  k.gridId = 77;
  return k;
}

TEST(Activity, ConvertsKernelFields) {
  Interner in;
  NameCache names(std::ref(in));
  KernelActivity a = Kernel(1000, 5000, 42, "_ZN4vllm30reshape_and_cache_flash_kernelEPKfPf");
  a.graphNodeId = 9001;
  a.graphId = 12;
  KernelRecord r = ConvertKernel(a, names);
  EXPECT_EQ(r.start_ns, 1000u);
  EXPECT_EQ(r.end_ns, 5000u);
  EXPECT_EQ(r.correlation_id, 42u);
  EXPECT_EQ(r.grid_id, 77u);
  EXPECT_EQ(r.graph_node_id, 9001u);
  EXPECT_EQ(r.graph_id, 12u);
  EXPECT_EQ(r.device, 3u);
  EXPECT_EQ(r.context, 4u);
  EXPECT_EQ(r.stream, 5u);
  EXPECT_EQ(r.grid.x, 132u);
  EXPECT_EQ(r.grid.y, 2u);
  EXPECT_EQ(r.block.x, 256u);
  EXPECT_EQ(r.static_shared_bytes, 1024u);
  EXPECT_EQ(r.dynamic_shared_bytes, 2048u);
  EXPECT_EQ(r.registers_per_thread, 40u);
  EXPECT_EQ(r.flags, static_cast<uint32_t>(kFlagGraph));
  EXPECT_EQ(in.names[r.name], "_ZN4vllm30reshape_and_cache_flash_kernelEPKfPf");
  EXPECT_EQ(in.names[r.demangled], "vllm::reshape_and_cache_flash_kernel(float const*, float*)");
}

TEST(Activity, PlainCNamesHaveNoDemangledForm) {
  Interner in;
  NameCache names(std::ref(in));
  KernelActivity a = Kernel(1, 2, 1, "my_c_kernel");
  KernelRecord r = ConvertKernel(a, names);
  EXPECT_EQ(in.names[r.name], "my_c_kernel");
  EXPECT_EQ(r.demangled, 0u);
  EXPECT_EQ(Demangle("_Z3fooi"), "foo(int)");
  EXPECT_EQ(Demangle("_Znot-a-name"), "");
  EXPECT_EQ(Demangle(nullptr), "");
}

TEST(Activity, InvalidTimestamps) {
  EXPECT_FALSE(InvalidTimestamps(10, 20));
  EXPECT_FALSE(InvalidTimestamps(10, 10));
  EXPECT_TRUE(InvalidTimestamps(0, 0));
  EXPECT_TRUE(InvalidTimestamps(0, 20));
  EXPECT_TRUE(InvalidTimestamps(10, 0));
  EXPECT_TRUE(InvalidTimestamps(20, 10));
}

TEST(Activity, ParsesMixedBufferAndCountsInvalid) {
  Interner in;
  NameCache names(std::ref(in));
  KernelActivity k1 = Kernel(100, 200, 1, "_Z1av");
  KernelActivity k2 = Kernel(300, 250, 2, "_Z1av");  // end < start
  KernelActivity k3 = Kernel(0, 0, 3, "_Z1bv");      // both zero (seed 001)
  MemcpyActivity m;
  std::memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
  m.bytes = 65536;
  m.start = 10;
  m.end = 20;
  m.graphNodeId = 5;
  MemsetActivity s;
  std::memset(&s, 0, sizeof s);
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.bytes = 4096;
  s.value = 7;
  s.start = 30;
  s.end = 0;
  CUpti_Activity other{};
  other.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;

  FakeBuffer buf;
  for (CUpti_Activity* p : {reinterpret_cast<CUpti_Activity*>(&k1), reinterpret_cast<CUpti_Activity*>(&m),
                            reinterpret_cast<CUpti_Activity*>(&k2), reinterpret_cast<CUpti_Activity*>(&s), &other,
                            reinterpret_cast<CUpti_Activity*>(&k3)})
    buf.records.push_back(p);
  uint8_t dummy[8];
  ParsedBuffer out;
  ParseBuffer(dummy, sizeof dummy, buf.Iterator(), names, &out);
  ASSERT_EQ(out.kernels.size(), 3u);
  ASSERT_EQ(out.memcpys.size(), 1u);
  ASSERT_EQ(out.memsets.size(), 1u);
  EXPECT_EQ(out.other, 1u);
  EXPECT_EQ(out.kernel_invalid, 2u);
  EXPECT_EQ(out.copy_invalid, 1u);
  EXPECT_FALSE(out.iterator_error);
  EXPECT_EQ(out.kernels[0].flags, 0u);
  EXPECT_EQ(out.kernels[1].flags, static_cast<uint32_t>(kFlagInvalidTimestamp));
  EXPECT_EQ(out.kernels[2].flags, static_cast<uint32_t>(kFlagInvalidTimestamp));
  EXPECT_EQ(out.memcpys[0].copy_kind, static_cast<uint8_t>(CopyKind::kDtoD));
  EXPECT_EQ(out.memcpys[0].bytes, 65536u);
  EXPECT_EQ(out.memcpys[0].flags, static_cast<uint32_t>(kFlagGraph));
  EXPECT_EQ(out.memsets[0].value, 7u);
  EXPECT_EQ(out.memsets[0].flags, static_cast<uint32_t>(kFlagInvalidTimestamp));
  // One name interned once.
  EXPECT_EQ(out.kernels[0].name, out.kernels[1].name);
}

TEST(Activity, IteratorErrorStopsAndIsReported) {
  Interner in;
  NameCache names(std::ref(in));
  KernelActivity k1 = Kernel(100, 200, 1, "_Z1av");
  FakeBuffer buf;
  buf.records.push_back(reinterpret_cast<CUpti_Activity*>(&k1));
  buf.fail_at_end = CUPTI_ERROR_INVALID_KIND;
  uint8_t dummy[8];
  ParsedBuffer out;
  ParseBuffer(dummy, sizeof dummy, buf.Iterator(), names, &out);
  EXPECT_EQ(out.kernels.size(), 1u);
  EXPECT_TRUE(out.iterator_error);
  EXPECT_EQ(out.error, CUPTI_ERROR_INVALID_KIND);
}

TEST(Activity, EmptyBufferIsNothing) {
  Interner in;
  NameCache names(std::ref(in));
  ParsedBuffer out;
  int calls = 0;
  ParseBuffer(
      nullptr, 0,
      [&](uint8_t*, size_t, CUpti_Activity**) {
        ++calls;
        return CUPTI_SUCCESS;
      },
      names, &out);
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(out.kernels.empty());
}

}  // namespace
}  // namespace twinscope::cupti
