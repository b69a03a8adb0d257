// Keeps and replays a trace's records in file order (join/record_log.h).
#include "join/record_log.h"

namespace twinscope::join {

void RecordLog::OnStatus(const nlohmann::json& s, bool summary) {
  statuses_.emplace_back(s, summary);
  order_.push_back(Kind::kStatus);
}

void RecordLog::LetGo() {
  streamed_ = true;
  order_ = {};
  kernels_ = {};
  memcpys_ = {};
  memsets_ = {};
  apis_ = {};
  nvtx_ = {};
  launches_ = {};
  blocks_ = {};
  statuses_ = {};
}

Status RecordLog::Replay(RecordSink& sink, ReadReport* reread_report) const {
  if (streamed_) {
    std::string error;
    auto reader = TraceReader::Open(path, &error);
    if (!reader) return Status::Error("the primary could not be read again (" + error + ")");
    const ReadReport rep = reader->Read(sink);
    if (reread_report) *reread_report = rep;
    return Status::Ok();
  }
  size_t k = 0, c = 0, s = 0, a = 0, n = 0, l = 0, b = 0, st = 0;
  for (Kind kind : order_) {
    switch (kind) {
      case Kind::kKernel:
        sink.OnKernel(kernels_[k++]);
        break;
      case Kind::kMemcpy:
        sink.OnMemcpy(memcpys_[c++]);
        break;
      case Kind::kMemset:
        sink.OnMemset(memsets_[s++]);
        break;
      case Kind::kApi:
        sink.OnApi(apis_[a++]);
        break;
      case Kind::kNvtx:
        sink.OnNvtx(nvtx_[n++]);
        break;
      case Kind::kLaunch:
        sink.OnLaunch(launches_[l++]);
        break;
      case Kind::kBlock:
        sink.OnBlock(blocks_[b++]);
        break;
      case Kind::kStatus:
        sink.OnStatus(statuses_[st].first, statuses_[st].second);
        ++st;
        break;
    }
  }
  if (reread_report) *reread_report = report;
  return Status::Ok();
}

std::string RecordLog::StreamedText(const char* view) const {
  if (!streamed_) return "";
  return std::string(view) + " read the primary again: its " + std::to_string(report.records) +
         " records are over the " + std::to_string(max_) + " a join keeps in memory for its views";
}

Status ReadRecordLog(const std::string& path, RecordLog* log) {
  std::string error;
  auto reader = TraceReader::Open(path, &error);
  if (!reader) return Status::Error(error);
  log->report = reader->Read(*log);
  log->header = reader->header();
  log->strings = reader->strings();
  log->path = path;
  return Status::Ok();
}

}  // namespace twinscope::join
