// The primary's timeline records kept from the join's one pass over the
// primary trace, in file order and bounded, so that the views which draw the
// whole timeline (Perfetto, SQLite's kernels) take them from memory instead of
// reading the trace again (docs/join.md, "Reads"). A primary over the bound is
// not cut: the log lets its records go and each replay reads the trace again,
// so the views stay whole. CUDA-free; plain data once filled; single-threaded.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "twinscope/trace_reader.h"

namespace twinscope::join {

// Records a join keeps for its views by default: about 130 MB at most
// (kernel records are 128 bytes; copies, API calls and NVTX fewer).
inline constexpr uint64_t kTimelineRecords = 1'000'000;

class RecordLog : public RecordSink {
 public:
  explicit RecordLog(uint64_t max_records = kTimelineRecords) : max_(max_records) {}

  void OnKernel(const KernelRecord& r) override { Keep(kernels_, r, Kind::kKernel); }
  void OnMemcpy(const MemcpyRecord& r) override { Keep(memcpys_, r, Kind::kMemcpy); }
  void OnMemset(const MemsetRecord& r) override { Keep(memsets_, r, Kind::kMemset); }
  void OnApi(const ApiRecord& r) override { Keep(apis_, r, Kind::kApi); }
  void OnNvtx(const NvtxRecord& r) override { Keep(nvtx_, r, Kind::kNvtx); }
  void OnLaunch(const LaunchRecord& r) override { Keep(launches_, r, Kind::kLaunch); }
  void OnBlock(const BlockRecord& r) override { Keep(blocks_, r, Kind::kBlock); }
  void OnStatus(const nlohmann::json& s, bool summary) override;  // always kept (a few per trace)

  // Hands the records to `sink` in file order, as a read of the trace would: from memory, or, for a primary
  // over the bound, by reading `path` again (its report in *reread_report when given). Fails only if that
  // read cannot open the trace.
  Status Replay(RecordSink& sink, ReadReport* reread_report = nullptr) const;

  uint64_t kept() const { return order_.size() - statuses_.size(); }
  // Over the bound: nothing is kept (the records seen were let go) and every replay reads the trace again.
  bool streamed() const { return streamed_; }
  uint64_t max_records() const { return max_; }
  // One line for a view's notes when it read the primary again, "" if it did not.
  std::string StreamedText(const char* view) const;

  // Of the read that filled the log: the trace's header, its full string table and how the read ended.
  nlohmann::json header = nlohmann::json::object();
  std::unordered_map<StringId, std::string> strings;
  ReadReport report;
  std::string path;

 private:
  enum class Kind : uint8_t { kKernel, kMemcpy, kMemset, kApi, kNvtx, kLaunch, kBlock, kStatus };
  template <typename R>
  void Keep(std::vector<R>& v, const R& r, Kind k) {
    if (streamed_) return;
    if (kept() >= max_) {
      LetGo();
      return;
    }
    v.push_back(r);
    order_.push_back(k);
  }
  void LetGo();  // over the bound: free what was kept; replays read the trace again

  uint64_t max_;
  bool streamed_ = false;
  std::vector<Kind> order_;  // what came next, one per kept record or status
  std::vector<KernelRecord> kernels_;
  std::vector<MemcpyRecord> memcpys_;
  std::vector<MemsetRecord> memsets_;
  std::vector<ApiRecord> apis_;
  std::vector<NvtxRecord> nvtx_;
  std::vector<LaunchRecord> launches_;
  std::vector<BlockRecord> blocks_;
  std::vector<std::pair<nlohmann::json, bool>> statuses_;
};

// Fills `log` from a read of its own over `path` (tests, benches: a join keeps its log in its one pass).
Status ReadRecordLog(const std::string& path, RecordLog* log);

}  // namespace twinscope::join
