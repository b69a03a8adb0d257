#include "blocks/blocks_config.h"

#include <unistd.h>

#include "base/env_names.h"
#include "base/log.h"

namespace twinscope::blocks {
namespace {

StatusOr<uint64_t> Positive(const char* name, long long fallback, bool allow_zero) {
  long long v = EnvInt(name, fallback);
  if (v < 0 || (!allow_zero && v == 0))
    return Status::Error(std::string(name) + "=" + std::to_string(v) + " must be " + (allow_zero ? ">= 0" : "> 0"));
  return static_cast<uint64_t>(v);
}

}  // namespace

StatusOr<BlocksConfig> ConfigFromEnv() {
  BlocksConfig c;
  c.output = EnvString(twinscope::env::kOutput, "twinscope-blocks-" + std::to_string(getpid()) + ".tsc");
  c.patterns_spec = EnvString(twinscope::env::kKernelPatterns);
  auto patterns = ParsePatterns(c.patterns_spec);
  if (!patterns.ok())
    return Status::Error(std::string(twinscope::env::kKernelPatterns) + ": " + patterns.status().message());
  c.patterns = std::move(*patterns);

  auto every = Positive(twinscope::env::kEvery, 1, false);
  if (!every.ok()) return every.status();
  auto max_launches = Positive(twinscope::env::kMaxLaunches, 0, true);
  if (!max_launches.ok()) return max_launches.status();
  auto ring = Positive(env::kRing, c.ring, false);
  if (!ring.ok()) return ring.status();
  auto slots = Positive(env::kMaxSlots, c.max_slots, false);
  if (!slots.ok()) return slots.status();
  auto device_mb = Positive(env::kDeviceMb, static_cast<long long>(c.max_device_bytes >> 20), false);
  if (!device_mb.ok()) return device_mb.status();
  auto decode_mb = Positive(env::kDecodeMb, static_cast<long long>(c.max_pending_decode_bytes >> 20), false);
  if (!decode_mb.ok()) return decode_mb.status();
  auto buffered_mb =
      Positive(twinscope::env::kMaxBufferedMb, static_cast<long long>(c.max_buffered_bytes >> 20), false);
  if (!buffered_mb.ok()) return buffered_mb.status();

  c.sampling.every = *every;
  c.sampling.max_launches = *max_launches;
  c.ring = static_cast<uint32_t>(std::min<uint64_t>(*ring, 1u << 16));
  c.max_slots = static_cast<uint32_t>(std::min<uint64_t>(*slots, 0xffffffffu));
  c.max_device_bytes = *device_mb << 20;
  c.max_buffered_bytes = *buffered_mb << 20;
  c.max_pending_decode_bytes = *decode_mb << 20;
  c.naive = EnvInt(env::kNaive, 0) != 0;
  return c;
}

}  // namespace twinscope::blocks
