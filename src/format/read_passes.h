// How many times each trace file was read start to end in this process (one
// TraceReader::Read is one pass): lets tests check that a join reads each
// trace at most twice (docs/join.md, "Reads"). Thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace twinscope {

// Passes over `path` (as given to TraceReader::Open) since the last reset.
uint64_t TraceReadPasses(const std::string& path);
void ResetTraceReadPasses();

}  // namespace twinscope
