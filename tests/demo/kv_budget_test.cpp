// The demo server's KV-cache sizing (demo/common/kv_budget.h): its share of the
// GPU, less what it allocated itself, also while a twin allocates beside it.
#include "common/kv_budget.h"

#include <gtest/gtest.h>

namespace twinscope::demo {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// An H200-sized GPU, a 1b-model server's own 2.3 GiB, blocks of 2 MiB.
KvBudgetInput H200(size_t free_drop) {
  KvBudgetInput in;
  in.memory_fraction = 0.3;
  in.total = 143156 * kMiB;
  in.free_before = 140000 * kMiB;
  in.free_after = in.free_before - free_drop;
  in.own_bytes = 2300 * kMiB;
  in.block_bytes = 2 * kMiB;
  in.min_blocks = 256;
  in.max_model_len = 4096;
  in.gpu_name = "H200";
  return in;
}

TEST(KvBudget, AloneTheFreeMemoryDropCounts) {
  // Alone: the drop is its own allocations plus the context's (here 100 MiB more).
  KvBudgetInput in = H200(2400 * kMiB);
  EXPECT_EQ(ServerUsedBytes(in), 2400 * kMiB);
  auto kv = KvCacheBytes(in);
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  EXPECT_EQ(*kv % in.block_bytes, 0u);
  const double share = 0.3 * double(in.total);
  EXPECT_LE(double(*kv + 2400 * kMiB + kGraphReserve), share);
  EXPECT_GT(double(*kv + 2400 * kMiB + kGraphReserve + in.block_bytes), share);
}

TEST(KvBudget, ATwinAllocatingBesideItIsNotCounted) {
  // The shadow took 56 GiB between the two readings: the primary still counts only its own.
  KvBudgetInput in = H200(58280 * kMiB);
  EXPECT_EQ(ServerUsedBytes(in), in.own_bytes + kRuntimeSlack);
  auto kv = KvCacheBytes(in);
  ASSERT_TRUE(kv.ok()) << kv.status().message();
  EXPECT_GT(*kv, 30000 * kMiB);
}

TEST(KvBudget, TooSmallAShareSaysWhatToChange) {
  KvBudgetInput in = H200(2400 * kMiB);
  in.memory_fraction = 0.02;  // 2.8 GiB: weights and the graph reserve leave no room
  auto kv = KvCacheBytes(in);
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.status().message().find("--gpu-memory-fraction 0.02"), std::string::npos) << kv.status().message();
  EXPECT_NE(kv.status().message().find("raise the fraction"), std::string::npos);
}

TEST(KvBudget, LessFreeThanTheShareSaysOthersHoldIt) {
  KvBudgetInput in = H200(2400 * kMiB);
  in.memory_fraction = 0.9;
  in.free_before = 50000 * kMiB;  // other processes hold most of the GPU
  in.free_after = in.free_before - 2400 * kMiB;
  auto kv = KvCacheBytes(in);
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.status().message().find("other processes hold the rest"), std::string::npos) << kv.status().message();
}

}  // namespace
}  // namespace twinscope::demo
