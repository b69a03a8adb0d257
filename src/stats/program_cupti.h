// What a primary trace says about the watched program's own CUPTI client
// (torch.profiler and the like): the guard's report, which the collector keeps
// in tool_state.program_cupti (docs/design.md, "The program's own CUPTI
// client"). Plain JSON in, text out; no CUDA.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace twinscope::stats {

// One line for `stats`: how the program's CUPTI calls were handled, or "" if
// the program made none (or the trace predates the guard).
std::string ProgramCuptiSummary(const nlohmann::json& status);

// `stats` problems: calls refused (the floor) and calls that failed, each with
// what to do.
std::vector<std::string> ProgramCuptiProblems(const nlohmann::json& status);

}  // namespace twinscope::stats
