// What the guard (src/guard, preloaded by `twinscope record`) says about the
// program's own CUPTI client: which CUPTI calls the program made, how each was
// served and what it got back. The collector copies it into the trace's
// tool_state ("program_cupti") at every flush, so `stats` can show it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

namespace twinscope::cupti {

// The guard's report, or nothing if the guard is not loaded in this process
// or the program has not called CUPTI (yet).
std::optional<nlohmann::json> GuardReport();

}  // namespace twinscope::cupti
