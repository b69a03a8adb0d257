#include "cupti/pending_launches.h"

#include <gtest/gtest.h>

#include "cupti/callbacks.h"

namespace twinscope::cupti {
namespace {

LaunchKey Key(uint64_t h) { return LaunchKey{h, 1, static_cast<uint32_t>(h)}; }

std::shared_ptr<GraphExecInfo> Exec() {
  auto e = std::make_shared<GraphExecInfo>();
  e->exec_id = 5;
  e->kernels = {{"a", 10, {1, 1, 1}, {32, 1, 1}}, {"b", 11, {2, 1, 1}, {32, 1, 1}}, {"a", 10, {4, 1, 1}, {32, 1, 1}}};
  e->index_by_node_id = {{100, 0}, {101, 1}, {102, 2}, {200, 0}, {201, 1}, {202, 2}};
  return e;
}

TEST(PendingLaunches, PlainLaunchResolvesOnce) {
  PendingLaunches p(100);
  p.AddPlain(7, Key(70), 3);
  LaunchKey k{};
  EXPECT_EQ(p.Resolve(7, 0, 3, &k), PendingLaunches::Match::kExact);
  EXPECT_EQ(k.hash, 70u);
  EXPECT_EQ(p.Resolve(7, 0, 3, &k), PendingLaunches::Match::kNone);
  EXPECT_EQ(p.pending_keys(), 0u);
}

TEST(PendingLaunches, PlainLaunchWithOtherNameIsFallback) {
  PendingLaunches p(100);
  p.AddPlain(7, Key(70), 3);
  LaunchKey k{};
  EXPECT_EQ(p.Resolve(7, 0, 4, &k), PendingLaunches::Match::kFallback);
  EXPECT_EQ(k.hash, 70u);
}

TEST(PendingLaunches, AliasAndRemove) {
  PendingLaunches p(100);
  p.AddPlain(7, Key(70), 3);
  p.Alias(8, 7);
  LaunchKey k{};
  EXPECT_EQ(p.Resolve(8, 0, 3, &k), PendingLaunches::Match::kExact);
  EXPECT_EQ(k.hash, 70u);
  EXPECT_EQ(p.Resolve(7, 0, 3, &k), PendingLaunches::Match::kNone);  // both ids released
  p.AddPlain(9, Key(90), 3);
  p.Remove(9);
  EXPECT_EQ(p.Resolve(9, 0, 3, &k), PendingLaunches::Match::kNone);
  EXPECT_EQ(p.evicted_keys(), 0u);
}

TEST(PendingLaunches, GraphByNodeIdThenByName) {
  PendingLaunches p(100);
  p.AddGraph(20, Exec(), {Key(1), Key(2), Key(3)});
  EXPECT_EQ(p.pending_keys(), 3u);
  LaunchKey k{};
  EXPECT_EQ(p.Resolve(20, 202, 10, &k), PendingLaunches::Match::kExact);
  EXPECT_EQ(k.hash, 3u);
  EXPECT_EQ(p.Resolve(20, 999, 10, &k), PendingLaunches::Match::kFallback);  // unknown node: first unused "a"
  EXPECT_EQ(k.hash, 1u);
  EXPECT_EQ(p.Resolve(20, 999, 10, &k), PendingLaunches::Match::kNone);  // no "a" left
  EXPECT_EQ(p.Resolve(20, 101, 11, &k), PendingLaunches::Match::kExact);
  EXPECT_EQ(k.hash, 2u);
  EXPECT_EQ(p.pending_keys(), 0u);
  EXPECT_EQ(p.Resolve(20, 101, 11, &k), PendingLaunches::Match::kNone);
}

TEST(PendingLaunches, BoundEvictsOldestAndCounts) {
  PendingLaunches p(4);
  for (uint32_t i = 1; i <= 4; ++i) p.AddPlain(i, Key(i), 1);
  p.AddGraph(10, Exec(), {Key(11), Key(12), Key(13)});  // needs 3 slots: evicts 1, 2, 3
  EXPECT_EQ(p.evicted_keys(), 3u);
  EXPECT_EQ(p.pending_keys(), 4u);
  LaunchKey k{};
  EXPECT_EQ(p.Resolve(1, 0, 1, &k), PendingLaunches::Match::kNone);
  EXPECT_EQ(p.Resolve(4, 0, 1, &k), PendingLaunches::Match::kExact);
  EXPECT_EQ(p.Resolve(10, 100, 10, &k), PendingLaunches::Match::kExact);
  // Resolved keys free their slots: two more fit without eviction...
  EXPECT_EQ(p.pending_keys(), 2u);
  for (uint32_t i = 20; i < 22; ++i) p.AddPlain(i, Key(i), 1);
  EXPECT_EQ(p.evicted_keys(), 3u);
  // ...the next evicts the oldest entry: the graph launch's 2 unresolved keys.
  p.AddPlain(22, Key(22), 1);
  EXPECT_EQ(p.evicted_keys(), 5u);
  EXPECT_EQ(p.Resolve(10, 101, 11, &k), PendingLaunches::Match::kNone);
  EXPECT_EQ(p.Resolve(20, 0, 1, &k), PendingLaunches::Match::kExact);
}

TEST(CallbacksTable, ClassifiesLaunchApis) {
  EXPECT_EQ(ClassifyLaunch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000).api,
            LaunchApi::kRuntimeKernel);
  auto ptsz = ClassifyLaunch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000);
  EXPECT_EQ(ptsz.api, LaunchApi::kRuntimeGraph);
  EXPECT_TRUE(ptsz.per_thread_stream);
  EXPECT_EQ(ClassifyLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz).api,
            LaunchApi::kDriverKernelEx);
  EXPECT_EQ(ClassifyLaunch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel).api,
            LaunchApi::kDriverKernel);
  EXPECT_EQ(ClassifyLaunch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020).api,
            LaunchApi::kNone);
  EXPECT_EQ(ClassifyLaunch(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000).api,
            LaunchApi::kNone);
}

TEST(CallbacksTable, CopyApisAndNames) {
  EXPECT_TRUE(IsCopyApi("cudaMemcpyAsync_v3020"));
  EXPECT_TRUE(IsCopyApi("cuMemsetD8_v2"));
  EXPECT_FALSE(IsCopyApi("cudaMalloc_v3020"));
  EXPECT_FALSE(IsCopyApi("cudaMemGetInfo_v3020"));
  EXPECT_EQ(CleanApiName("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(CleanApiName("cudaLaunchKernel_ptsz_v7000"), "cudaLaunchKernel_ptsz");
  EXPECT_EQ(CleanApiName("cuLaunchKernel"), "cuLaunchKernel");
  EXPECT_EQ(CleanApiName("cuMemcpyDtoD_v2"), "cuMemcpyDtoD");
  EXPECT_EQ(CleanApiName("x_v"), "x_v");
}

// Many launches past the bound: the oldest go, counted, the rest resolve.
TEST(PendingLaunches, ManyLaunchesKeepTheBound) {
  PendingLaunches p(10000);
  for (uint32_t id = 1; id <= 9000; ++id) p.AddPlain(id, Key(id), 3);
  EXPECT_EQ(p.pending_keys(), 9000u);
  EXPECT_EQ(p.evicted_keys(), 0u);
  for (uint32_t id = 9001; id <= 12000; ++id) p.AddPlain(id, Key(id), 3);
  EXPECT_EQ(p.pending_keys(), 10000u);
  EXPECT_EQ(p.evicted_keys(), 2000u) << "the oldest 2000 launches go";
  LaunchKey k{};
  EXPECT_EQ(p.Resolve(2000, 0, 3, &k), PendingLaunches::Match::kNone);
  EXPECT_EQ(p.Resolve(2001, 0, 3, &k), PendingLaunches::Match::kExact);
  EXPECT_EQ(k.hash, 2001u);
}

}  // namespace
}  // namespace twinscope::cupti
