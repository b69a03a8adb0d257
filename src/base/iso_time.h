// Wall-clock times as ISO 8601 UTC text with microseconds ("2026-12-01T12:00:00.000123Z"),
// for request logs and trace headers.
#pragma once

#include <chrono>
#include <string>

namespace twinscope {

std::string IsoTimeUtc(std::chrono::system_clock::time_point t);
inline std::string IsoTimeUtcNow() { return IsoTimeUtc(std::chrono::system_clock::now()); }

}  // namespace twinscope
