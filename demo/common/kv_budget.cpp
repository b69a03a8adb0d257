// The demo server's KV-cache sizing (kv_budget.h).
#include "common/kv_budget.h"

#include <algorithm>
#include <cstdio>

namespace twinscope::demo {
namespace {
double MiB(double bytes) { return bytes / double(1 << 20); }
}  // namespace

size_t ServerUsedBytes(const KvBudgetInput& in) {
  const size_t delta = in.free_before > in.free_after ? in.free_before - in.free_after : 0;
  return std::min(delta, in.own_bytes + kRuntimeSlack);
}

StatusOr<size_t> KvCacheBytes(const KvBudgetInput& in) {
  if (in.block_bytes == 0) return Status::Error("KV-cache block of 0 bytes");
  const size_t used = ServerUsedBytes(in);
  const double budget = in.memory_fraction * static_cast<double>(in.total);
  const double left = budget - static_cast<double>(used) - static_cast<double>(kGraphReserve);
  char buf[1024];
  if (left < static_cast<double>(in.block_bytes) * static_cast<double>(in.min_blocks)) {
    std::snprintf(buf, sizeof buf,
                  "--gpu-memory-fraction %.2f gives this server %.0f MiB of %s's %.0f MiB; weights and buffers take "
                  "%.0f MiB and %.0f MiB is kept for graphs, leaving too little for a KV cache of one %d-token "
                  "sequence (%.0f MiB): raise the fraction, or use a smaller --model or --max-model-len",
                  in.memory_fraction, MiB(budget), in.gpu_name.c_str(), MiB(double(in.total)), MiB(double(used)),
                  MiB(double(kGraphReserve)), in.max_model_len, MiB(double(in.block_bytes) * double(in.min_blocks)));
    return Status::Error(buf);
  }
  const size_t kv_bytes = static_cast<size_t>(left) / in.block_bytes * in.block_bytes;
  if (kv_bytes + kGraphReserve > in.free_after) {
    std::snprintf(buf, sizeof buf,
                  "the KV cache would take %.0f MiB but only %.0f MiB of %s are free (other processes hold the rest?): "
                  "lower --gpu-memory-fraction",
                  MiB(double(kv_bytes)), MiB(double(in.free_after)), in.gpu_name.c_str());
    return Status::Error(buf);
  }
  return kv_bytes;
}

}  // namespace twinscope::demo
