// Exporters of twinscope traces: Chrome trace-event JSON (opens in Perfetto UI
// and chrome://tracing) and SQLite (docs/sqlite-schema.md). Both stream the
// trace with a TraceReader and never hold all records in memory. Each export
// call is self-contained and single-threaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "twinscope/trace_reader.h"

namespace twinscope::exporters {

struct ExportResult {
  ReadReport report;     // how the read of the trace ended (damage included)
  uint64_t records = 0;  // records read
  uint64_t written = 0;  // chrome: trace events written; sqlite: rows inserted
  // Records that could not be placed on a timeline (invalid timestamps,
  // unclosed NVTX ranges exported as instants are not counted here).
  uint64_t skipped_invalid = 0;
  std::vector<std::string> warnings;  // one line each, for the user
};

// Writes `trace` as Chrome trace-event JSON to `out`. Reads the trace twice:
// once for the time base, tracks and flow counts, once to write events.
// Fails only if the trace cannot be opened or `out` cannot be written; a
// damaged trace exports what was readable and says so in the result.
StatusOr<ExportResult> ExportChrome(const std::string& trace, const std::string& out);

// Writes `trace` into a new SQLite database `out` (replaced if it exists).
// Fails with "built without SQLite" when TWINSCOPE_WITH_SQLITE was off.
StatusOr<ExportResult> ExportSqlite(const std::string& trace, const std::string& out);
bool SqliteAvailable();
// The error of a SQLite export in a build without SQLite: rebuild with it, or
// `instead` ("" or advice ending in ", or ").
Status SqliteMissing(const std::string& instead);

}  // namespace twinscope::exporters
