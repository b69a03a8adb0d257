// The Perfetto exporter of a build without protobuf (TWINSCOPE_WITH_PERFETTO off).
#include "views/export/join/join_export.h"

namespace twinscope::exporters {
namespace {

Status Unavailable() {
  return Status::Error(
      "this twinscope was built without the Perfetto exporter (TWINSCOPE_WITH_PERFETTO=OFF: protoc or libprotobuf "
      "was not found); export to chrome, or rebuild with protobuf-compiler and libprotobuf-dev installed");
}

}  // namespace

bool PerfettoAvailable() { return false; }

StatusOr<TimelineExportResult> ExportPerfetto(const std::string&, const std::string&, const BlockBounds&) {
  return Unavailable();
}

StatusOr<TimelineExportResult> ExportJoinPerfetto(const join::JoinedRun&, const std::string&, const BlockBounds&,
                                                  const RequestTrackBounds&) {
  return Unavailable();
}

}  // namespace twinscope::exporters
