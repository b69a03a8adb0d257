// CUPTI version facts shared by the parts that pick, load and describe a
// libcupti (cuptilib, the collector, the guard, the probe). No CUDA.
#pragma once

#include <cstdint>
#include <string>

namespace twinscope {

// cuptiGetVersion() from which multi-subscriber mode (cuptiSubscribe_v2 with
// allowMultipleSubscribers, per-subscriber `_v2` calls) is used: CUPTI 13.5.
inline constexpr uint32_t kCuptiMultiSubscriberVersion = 130500;

// "13.5" for 130500 (CUPTI's API version: major*10000 + minor*100 + patch).
inline std::string CuptiVersionText(uint32_t v) {
  return v ? std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) : std::string("?");
}

}  // namespace twinscope
