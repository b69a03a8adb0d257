// The common part of a trace file's header object: who wrote it, where, when,
// and the clocks needed to place its timestamps. Collectors add their own
// fields (versions, configuration) before TraceWriter::Open.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace twinscope {

// {"role", "format_version", "twinscope_version", "host", "pid", "command_line"
//  (array), "start_realtime_ns", "start_monotonic_ns", "process"} ("process":
//  format/process_info.h).
nlohmann::json BaseHeader(const std::string& role);

// CLOCK_REALTIME / CLOCK_MONOTONIC in ns.
uint64_t RealtimeNs();
uint64_t MonotonicNs();

}  // namespace twinscope
