// The two passes of a timeline export over kept records or a trace file (timeline_passes.h).
#include "views/export/timeline_passes.h"

#include <utility>

namespace twinscope::exporters {

StatusOr<std::unique_ptr<TimelinePasses>> TimelinePasses::Open(const std::string& trace, const KeptRecords* kept) {
  std::unique_ptr<TimelinePasses> p(new TimelinePasses(trace, kept));
  if (kept) {
    p->header_ = kept->Header();
    return p;
  }
  std::string error;
  p->reader_ = TraceReader::Open(trace, &error);
  if (!p->reader_) return Status::Error(error);
  p->header_ = p->reader_->header();
  return p;
}

Status TimelinePasses::Scan(RecordSink& scan) {
  if (kept_) {
    ReadReport ignored;  // pass 2 reports how the read ended
    const Status replayed = kept_->Replay(scan, &ignored);
    return replayed.ok() ? replayed : Status::Error(trace_ + ": " + replayed.message());
  }
  if (!reader_) return Status::Error(trace_ + ": the scan was made already");
  reader_->Read(scan);
  strings_ = reader_->strings();
  reader_.reset();
  return Status::Ok();
}

Status TimelinePasses::Events(RecordSink& sink, ReadReport* report, const std::string& out) {
  // Read once a moment ago, gone now: the output is left half written, and said.
  if (kept_) {
    const Status replayed = kept_->Replay(sink, report);
    return replayed.ok() ? replayed : Status::Error(trace_ + ": " + replayed.message() + "; " + out + " is incomplete");
  }
  std::string error;
  std::unique_ptr<TraceReader> reader = TraceReader::Open(trace_, &error);
  if (!reader) return Status::Error(error + "; " + out + " is incomplete");
  *report = reader->Read(sink);
  return Status::Ok();
}

}  // namespace twinscope::exporters
