// The two passes a timeline export (Chrome JSON, Perfetto) makes over one trace's records: pass 1 scans
// (tracks, flows, the time base, the whole string table), pass 2 writes the events. From records read already
// (a join's primary, kept from the join's one pass: join/record_log.h) both passes replay memory; from a
// trace file alone, the file is read twice. One place for both exporters, with one set of messages.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "twinscope/trace_reader.h"

namespace twinscope::exporters {

// Records read already, to replay in file order.
class KeptRecords {
 public:
  virtual ~KeptRecords() = default;
  virtual const nlohmann::json& Header() const = 0;
  virtual const std::unordered_map<StringId, std::string>& Strings() const = 0;
  // Every record to `sink`; how the read that brought them ended in *report. Fails only where the records
  // must be read again and cannot be.
  virtual Status Replay(RecordSink& sink, ReadReport* report) const = 0;
};

class TimelinePasses {
 public:
  // The passes over `kept` where given (`trace` then only names it in messages), else over the file `trace`.
  static StatusOr<std::unique_ptr<TimelinePasses>> Open(const std::string& trace, const KeptRecords* kept);

  const nlohmann::json& Header() const { return header_; }
  // Pass 1 into `scan`. After it, Strings() is the whole string table (records of pass 2 may come before the
  // string chunk that names them).
  Status Scan(RecordSink& scan);
  const std::unordered_map<StringId, std::string>& Strings() const { return kept_ ? kept_->Strings() : strings_; }
  // Pass 2 into `sink`; how the read ended in *report. An error says that `out` is left incomplete.
  Status Events(RecordSink& sink, ReadReport* report, const std::string& out);

 private:
  TimelinePasses(std::string trace, const KeptRecords* kept) : trace_(std::move(trace)), kept_(kept) {}

  std::string trace_;
  const KeptRecords* kept_;
  std::unique_ptr<TraceReader> reader_;  // the file's pass 1 (opened by Open, for its header)
  nlohmann::json header_;
  std::unordered_map<StringId, std::string> strings_;  // the file's, after pass 1
};

}  // namespace twinscope::exporters
