// A joined run's primary as the join's one pass kept it (join/record_log.h; over its bound, read again by the
// log), for the timeline exports' two passes (views/export/timeline_passes.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "join/record_log.h"
#include "views/export/timeline_passes.h"

namespace twinscope::exporters {

class LoggedRecords final : public KeptRecords {
 public:
  explicit LoggedRecords(const join::RecordLog& log) : log_(log) {}
  const nlohmann::json& Header() const override { return log_.header; }
  const std::unordered_map<StringId, std::string>& Strings() const override { return log_.strings; }
  Status Replay(RecordSink& sink, ReadReport* report) const override { return log_.Replay(sink, report); }

 private:
  const join::RecordLog& log_;
};

}  // namespace twinscope::exporters
