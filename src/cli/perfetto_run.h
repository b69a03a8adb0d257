// Every process of a run in ONE Perfetto protobuf trace (docs/processes.md, "Every process in one
// view"): each process's own Perfetto export, merged packet by packet into one file.
#pragma once

#include <string>
#include <vector>

#include "views/export/export.h"
#include "views/export/join/join_export.h"

namespace twinscope::cli {

// One process group per traced process (its GPU tracks moved under it), each on its own packet
// sequence, track uuids and flow ids made unique per process, every timestamp moved onto
// CLOCK_REALTIME through its trace's clock pair (relative to the run's earliest time). Fails in a
// build without the Perfetto exporter.
StatusOr<exporters::TimelineExportResult> ExportPerfettoRun(const std::vector<exporters::RunProcess>& processes,
                                                            const std::string& out,
                                                            const exporters::BlockBounds& bounds);

}  // namespace twinscope::cli
