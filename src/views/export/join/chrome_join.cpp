// Chrome trace-event JSON of a joined run: the primary's Chrome export
// (chrome_export.cpp) plus, per GPU, a "thread blocks by SM" process: the
// matched launches as spans equal to their primary kernels on lanes of a
// "shadow launches" thread (tid 0..), linked to the kernel by a flow, and the
// blocks of the launches drawn in full on lanes per SM (tid = 1000 * (sm + 1)
// + lane), their times scaled onto the kernel's interval. Bounded by
// BlockBounds (kChromeBlockBounds: ~415 bytes per block event in JSON).
#include <map>

#include "join/record_log.h"
#include "views/export/chrome_json.h"
#include "views/export/join/block_detail.h"
#include "views/export/join/join_export.h"
#include "views/export/join/lanes.h"
#include "views/export/join/logged_records.h"
#include "views/export/timeline_scan.h"

namespace twinscope::exporters {
namespace {

// Above every API flow id ((correlation << 16) | i < 2^48) and below 2^53,
// where JSON numbers stop being exact in a viewer.
constexpr uint64_t kJoinFlowBase = 1ull << 52;
constexpr int64_t kSmTidBase = 1000;

int64_t SmTid(uint32_t sm, size_t lane) { return kSmTidBase * (int64_t{sm} + 1) + static_cast<int64_t>(lane); }

class JoinChromeExtra : public ChromeExtra {
 public:
  JoinChromeExtra(const join::JoinedModel& m, const BlockPlan& plan, const std::vector<join::LaunchBlocks>& blocks,
                  const BlockBounds& bounds)
      : counts(plan.counts), m_(m), plan_(plan), bounds_(bounds) {
    for (const auto& lb : blocks) blocks_[lb.seq] = &lb;
  }

  uint64_t WriteEvents(JsonOut& out, const TimelineScan& scan) override {
    const uint64_t base = scan.Base();
    uint64_t written = 0;
    std::map<uint32_t, Device> devices;
    for (size_t id : plan_.timed) {
      const join::Match& mt = m_.matches[id];
      const join::PrimaryLaunch& p = m_.primary[mt.primary];
      const join::ShadowLaunch& s = m_.shadow[mt.shadow];
      Device& dev = devices[p.device];
      const int64_t pid = kBlocksPidBase + p.device;
      const TimeMap map = MapOntoKernel(s, p);
      auto drawn = plan_.drawn.count(s.seq) ? blocks_.find(s.seq) : blocks_.end();
      const int64_t lane = static_cast<int64_t>(dev.launches.Place(p.start_ns, p.end_ns));
      const uint64_t mid = p.start_ns + (p.end_ns - p.start_ns) / 2;
      // The flow from the kernel on its stream to the launch's span.
      out.BeginEvent('s', "flow", "shadow launch", kGpuPidBase + p.device, p.stream, Rel(mid, base));
      out.Raw(",\"id\":").Uint(kJoinFlowBase + id);
      out.EndEvent();
      out.BeginEvent('X', "shadow_launch", LaunchName(m_, id), pid, lane, Rel(p.start_ns, base));
      out.Dur(p.end_ns - p.start_ns).Raw(",\"args\":{");
      bool first = true;
      for (const LaunchArg& a : LaunchArgs(m_, id, map, drawn != blocks_.end())) {
        out.Raw(first ? "\"" : ",\"").Raw(a.name).Raw("\":");
        first = false;
        if (auto* u = std::get_if<uint64_t>(&a.value)) out.Uint(*u);
        if (auto* d = std::get_if<double>(&a.value)) out.Raw(nlohmann::json(*d).dump());
        if (auto* f = std::get_if<bool>(&a.value)) out.Raw(*f ? "true" : "false");
        if (auto* t = std::get_if<std::string>(&a.value)) out.Str(*t);
      }
      out.Raw("}");
      out.EndEvent();
      out.BeginEvent('f', "flow", "shadow launch", pid, lane, Rel(mid, base));
      out.Raw(",\"bp\":\"e\",\"id\":").Uint(kJoinFlowBase + id);
      out.EndEvent();
      written += 3;
      if (drawn == blocks_.end()) continue;
      const auto& b = s.blocks;
      for (const BlockRecord& r : drawn->second->blocks) {
        if (!ValidSpan(r.enter_ns, r.exit_ns)) {
          ++counts.blocks_invalid;
          continue;
        }
        const uint64_t start = map(r.enter_ns), end = map(r.exit_ns);
        const int64_t tid = SmTid(r.sm, dev.sms[r.sm].Place(start, end));
        out.BeginEvent('X', "block", "block " + std::to_string(r.block_linear), pid, tid, Rel(start, base));
        out.Dur(end - start).Raw(",\"args\":{\"order\":").Uint(r.order);
        if (r.block_linear == b.straggler.block_linear && r.sm == b.straggler.sm && r.exit_ns == b.straggler.exit_ns)
          out.Raw(",\"straggler\":true");
        out.Raw("}");
        out.EndEvent();
        ++written;
        ++counts.blocks_drawn;
      }
    }
    for (const auto& [device, dev] : devices) {
      const int64_t pid = kBlocksPidBase + device;
      out.Meta("process_name", pid, 0, "name", BlockGroupName(device, scan.DeviceName(device), counts));
      out.Meta("process_sort_index", pid, 0, "sort_index", 20 + device);
      for (size_t lane = 0; lane < dev.launches.size(); ++lane) {
        out.Meta(
            "thread_name", pid, static_cast<int64_t>(lane), "name",
            std::string("shadow launches (on their primary kernel)") + (lane ? " lane " + std::to_string(lane) : ""));
        out.Meta("thread_sort_index", pid, static_cast<int64_t>(lane), "sort_index", -1);
      }
      for (const auto& [sm, lanes] : dev.sms) {
        for (size_t lane = 0; lane < lanes.size(); ++lane) {
          out.Meta("thread_name", pid, SmTid(sm, lane), "name",
                   "SM " + std::to_string(sm) + (lane ? " lane " + std::to_string(lane) : ""));
          out.Meta("thread_sort_index", pid, SmTid(sm, lane), "sort_index", SmTid(sm, lane));
        }
        written += 2 * lanes.size();
      }
      written += 2 + 2 * dev.launches.size();
    }
    return written;
  }

  void Finish(nlohmann::json* other, std::vector<std::string>* warnings) override {
    (*other)["join"] = {{"primary", m_.primary_path},
                        {"shadow", m_.shadow_path},
                        {"block_times", kScaledNote},
                        {"launches_matched", counts.launches_matched},
                        {"launches_untimed", counts.launches_untimed},
                        {"launches_drawn_with_blocks", counts.launches_drawn},
                        {"launches_over_bounds", counts.launches_over_bounds},
                        {"blocks_drawn", counts.blocks_drawn},
                        {"blocks_invalid", counts.blocks_invalid},
                        {"max_block_launches", bounds_.max_launches},
                        {"max_blocks", bounds_.max_blocks},
                        {"warnings", m_.warnings}};
    for (const auto& w : m_.warnings) warnings->push_back("join: " + w);
    if (counts.launches_over_bounds) {
      warnings->push_back("blocks drawn for " + CountText(counts.launches_drawn) + " of " +
                          CountText(counts.launches_drawn + counts.launches_over_bounds) + " launches (at most " +
                          CountText(bounds_.max_launches) + " launches and " + CountText(bounds_.max_blocks) +
                          " blocks); the others are spans with their block statistics");
    }
  }

  BlockDetailCounts counts;

 private:
  struct Device {
    LaneSet launches;
    std::map<uint32_t, LaneSet> sms;
  };
  static int64_t Rel(uint64_t t, uint64_t base) { return t > base ? static_cast<int64_t>(t - base) : 0; }

  const join::JoinedModel& m_;
  const BlockPlan& plan_;
  const BlockBounds& bounds_;
  std::unordered_map<uint64_t, const join::LaunchBlocks*> blocks_;
};

}  // namespace

StatusOr<TimelineExportResult> ExportJoinChrome(const join::JoinedRun& run, const std::string& out,
                                                const BlockBounds& bounds) {
  const join::JoinedModel& m = run.model;
  std::vector<std::string> warnings;
  BlockPlan plan = PlanWithDetail(run, bounds, &warnings);
  const std::vector<join::LaunchBlocks>& blocks = run.detail;
  JoinChromeExtra extra(m, plan, blocks, bounds);
  LoggedRecords records(run.primary);
  auto r = ExportChromeWith(m.primary_path, out, &extra, &records);
  if (!r.ok()) return r.status();
  TimelineExportResult result;
  static_cast<ExportResult&>(result) = std::move(*r);
  result.warnings.insert(result.warnings.begin(), warnings.begin(), warnings.end());
  result.blocks = extra.counts;
  return result;
}

}  // namespace twinscope::exporters
