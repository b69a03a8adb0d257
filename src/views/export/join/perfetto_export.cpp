// Perfetto protobuf export of one trace or of a joined run.
//
// Tracks: the traced process with one thread track per CPU thread (API calls
// and push/pop NVTX ranges nest there; marks are instants) and its start/end
// NVTX ranges on lanes of their own; one root track per GPU with one track per
// stream (kernels, copies, memsets); flows from each API call to the GPU work
// of its correlation id. A joined run adds, per GPU, a root track of the
// shadow's thread blocks: one "shadow launches" track (each matched launch as
// a span equal to its primary kernel, linked to that kernel by a flow, with
// the launch's block statistics) and one track per SM with the blocks of the
// launches drawn in full (BlockBounds), their times scaled onto the primary
// kernel's interval. A serving run with a request trace adds a "Requests"
// group (perfetto_requests.h): one track per request, its served steps linked
// by flows to their target launches' kernels, which then carry their launch
// id. A shadow trace exported alone draws its blocks the same way in its own
// clock. A global "twinscope" track holds one instant at time 0 whose args say
// what was drawn and what was left out.
//
// Blocks resident on one SM at once, kernels of parallel graph branches on one
// stream and overlapping start/end ranges go on lanes (perfetto_writer.h) so
// that no slice is mis-nested. Timestamps are ns relative to the trace's
// earliest timestamp (the summary's base_ns), which keeps varints short.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_set>

#include "views/export/join/block_detail.h"
#include "views/export/join/join_export.h"
#include "views/export/join/logged_records.h"
#include "views/export/join/perfetto_requests.h"
#include "views/export/join/perfetto_writer.h"
#include "views/export/timeline_scan.h"

namespace twinscope::exporters {
namespace {

using pftrace::TrackDescriptor;
using pftrace::TrackEvent;

constexpr uint64_t kJoinFlowBit = 1ull << 62;  // kernel -> shadow launch; API flows use (corr << 16 | i)

uint64_t ApiFlowId(uint32_t corr, uint32_t i) { return (uint64_t{corr} << 16) | i; }

std::string DimsText(Dim3 d) { return nlohmann::json::array({d.x, d.y, d.z}).dump(); }

// The shadow's block tracks of one GPU: a root, a launches track, one track per SM.
struct BlockTracks {
  uint64_t root = 0;
  Lanes launches;
  std::map<uint32_t, Lanes> sms;
};

// Writes a trace's records as track events (pass 2; the scan is pass 1) and,
// for a joined run, the shadow's launches and blocks.
class Timeline : public RecordSink {
 public:
  Timeline(PerfettoWriter& w, const TimelineScan& scan, const std::unordered_map<StringId, std::string>& strings,
           const nlohmann::json& header)
      : w_(w), scan_(scan), strings_(strings), header_(header), base_(scan.Base()) {
    pid_ = header.contains("pid") && header["pid"].is_number_integer() ? header["pid"].get<int64_t>() : 1;
  }

  // A joined run: kernels of matched launches start a flow to their shadow launch.
  void SetJoin(const join::JoinedModel* m, const std::vector<size_t>& timed) {
    join_ = m;
    for (size_t id : timed) {
      const join::PrimaryLaunch& p = m->primary[m->matches[id].primary];
      kernel_match_.emplace(SpotOf(p), id);
    }
  }
  // A serving run: the request tracks, written now, before the stream (perfetto_requests.h).
  void WriteRequests(const RequestTrackBounds& bounds) {
    requests_.emplace(w_, *join_, base_);
    requests_->Write(bounds);
  }
  RequestTracks* requests() { return requests_ ? &*requests_ : nullptr; }

  // A shadow trace alone: the launches whose blocks are drawn (by seq).
  void SetShadowDrawn(std::unordered_set<uint64_t> seqs) { shadow_drawn_ = std::move(seqs); }

  void WriteTracks() {
    TrackDescriptor p;
    p.mutable_process()->set_pid(static_cast<int32_t>(pid_));
    p.mutable_process()->set_process_name(ProcessLabel(header_));
    if (header_.contains("command_line") && header_["command_line"].is_array()) {
      for (const auto& a : header_["command_line"])
        if (a.is_string()) p.mutable_process()->add_cmdline(a.get<std::string>());
    }
    process_ = w_.AddTrack(std::move(p));
    nvtx_ranges_ = Lanes(process_, "NVTX start/end ranges", 0);
    for (uint64_t t : scan_.threads) Thread(t);
    for (const auto& [device, stream] : scan_.streams) Stream(device, stream);
  }

  void OnKernel(const KernelRecord& r) override {
    if (!ValidSpan(r.start_ns, r.end_ns, r.flags)) return Skip();
    const uint64_t track = Stream(r.device, r.stream).Place(w_, r.start_ns, r.end_ns);
    Begin(r.start_ns, track);
    w_.SetName(Cached(kernel_names_, r.demangled ? r.demangled : r.name, "<kernel>"));
    w_.SetCategory(Category(cat_kernel_, "kernel"));
    w_.Arg("correlation", r.correlation_id);
    w_.ArgString("grid", DimsText(r.grid));
    w_.ArgString("block", DimsText(r.block));
    w_.Arg("registers", r.registers_per_thread);
    w_.Arg("static_shared", r.static_shared_bytes);
    w_.Arg("dynamic_shared", r.dynamic_shared_bytes);
    if (r.flags & kFlagGraph) {
      w_.Arg("graph_id", r.graph_id);
      w_.Arg("graph_node_id", r.graph_node_id);
    }
    Key(r.key);
    if (r.demangled && r.name) w_.ArgString("mangled", String(r.name, ""));
    if (join_) {
      auto it = kernel_match_.find(SpotOf(r));
      if (it != kernel_match_.end()) {
        const join::Match& mt = join_->matches[it->second];
        w_.Arg("join_launch", it->second);
        w_.ArgString("shadow_match", join::MatchKindName(mt.kind));
        w_.AddFlow(kJoinFlowBit | it->second);
        flows_to_shadow_.insert(it->second);
        kernel_match_.erase(it);  // one flow per match
      }
    }
    if (requests_) {
      if (auto links = requests_->Take(SpotOf(r))) {
        w_.Arg("launch_id", links->launch);
        for (uint64_t id : links->flows) w_.AddTerminatingFlow(id);
      }
    }
    FlowEnds(r.correlation_id);
    End(r.end_ns, track);
  }

  void OnMemcpy(const MemcpyRecord& r) override {
    if (!ValidSpan(r.start_ns, r.end_ns, r.flags)) return Skip();
    const uint64_t track = Stream(r.device, r.stream).Place(w_, r.start_ns, r.end_ns);
    Begin(r.start_ns, track);
    w_.SetName(w_.NameIid(std::string("Memcpy ") + CopyKindName(r.copy_kind)));
    w_.SetCategory(Category(cat_memcpy_, "memcpy"));
    w_.Arg("correlation", r.correlation_id);
    w_.Arg("bytes", r.bytes);
    Graph(r.flags, r.graph_id, r.graph_node_id);
    FlowEnds(r.correlation_id);
    End(r.end_ns, track);
  }

  void OnMemset(const MemsetRecord& r) override {
    if (!ValidSpan(r.start_ns, r.end_ns, r.flags)) return Skip();
    const uint64_t track = Stream(r.device, r.stream).Place(w_, r.start_ns, r.end_ns);
    Begin(r.start_ns, track);
    w_.SetName(w_.NameIid("Memset"));
    w_.SetCategory(Category(cat_memset_, "memset"));
    w_.Arg("correlation", r.correlation_id);
    w_.Arg("bytes", r.bytes);
    w_.Arg("value", r.value);
    Graph(r.flags, r.graph_id, r.graph_node_id);
    FlowEnds(r.correlation_id);
    End(r.end_ns, track);
  }

  void OnApi(const ApiRecord& r) override {
    if (!ValidSpan(r.start_ns, r.end_ns)) return Skip();
    const bool driver = r.domain == static_cast<uint32_t>(ApiDomain::kDriver);
    const uint64_t track = Thread(r.thread_id);
    Begin(r.start_ns, track);
    w_.SetName(Cached(api_names_, r.name, "<api>"));
    w_.SetCategory(driver ? Category(cat_driver_, "cuda_driver") : Category(cat_runtime_, "cuda_runtime"));
    w_.Arg("correlation", r.correlation_id);
    w_.Arg("cbid", r.cbid);
    // One flow per GPU activity of this correlation id (a graph launch has many).
    const uint32_t n = scan_.api_correlations.Get(r.correlation_id) ? scan_.FlowsOf(r.correlation_id) : 0;
    if (n && flows_started_.Get(r.correlation_id) == 0) {
      flows_started_.Increment(r.correlation_id);
      for (uint32_t i = 0; i < n; ++i) w_.AddFlow(ApiFlowId(r.correlation_id, i));
    }
    End(r.end_ns, track);
  }

  void OnNvtx(const NvtxRecord& r) override {
    std::string name = String(r.name, "<nvtx>");
    if (r.domain) name = String(r.domain, "") + "::" + name;
    const bool closed = r.end_ns != 0 && r.end_ns >= r.start_ns;
    const bool mark = r.kind == static_cast<uint32_t>(NvtxKind::kMark);
    if (mark || !closed) {
      const uint64_t track = Thread(r.thread_id);
      w_.Event(Ts(r.start_ns), TrackEvent::TYPE_INSTANT, track);
      w_.SetName(w_.NameIid(name));
      w_.SetCategory(Category(cat_nvtx_, "nvtx"));
      if (!mark) w_.ArgBool("unclosed", true);
      w_.Emit();
      return;
    }
    const uint64_t track = r.kind == static_cast<uint32_t>(NvtxKind::kStartEnd)
                               ? nvtx_ranges_.Place(w_, r.start_ns, r.end_ns)
                               : Thread(r.thread_id);
    Begin(r.start_ns, track);
    w_.SetName(w_.NameIid(name));
    w_.SetCategory(Category(cat_nvtx_, "nvtx"));
    if (r.kind == static_cast<uint32_t>(NvtxKind::kStartEnd)) {
      w_.Arg("range_id", r.range_id);
      w_.Arg("thread", r.thread_id);
    } else {
      w_.Arg("depth", r.depth);
    }
    End(r.end_ns, track);
  }

  // A shadow trace alone: the launch's span on its GPU's launches track.
  void OnLaunch(const LaunchRecord& r) override {
    if (join_ || header_.value("role", std::string()) != "shadow") return;
    auto it = scan_.launches.find(r.seq);
    if (it == scan_.launches.end() || !it->second.blocks) return;
    const LaunchInfo& l = it->second;
    BlockTracks& bt = Blocks(r.device, false);
    const uint64_t track = bt.launches.Place(w_, l.first_enter, l.last_exit);
    Begin(l.first_enter, track);
    w_.SetName(Cached(kernel_names_, r.kernel, "<kernel>"));
    w_.SetCategory(Category(cat_launch_, "shadow_launch"));
    w_.Arg("seq", r.seq);
    w_.Arg("blocks", l.blocks);
    w_.Arg("blocks_expected", uint64_t{r.grid.x} * r.grid.y * r.grid.z);
    w_.ArgBool("blocks_drawn", shadow_drawn_.count(r.seq) > 0);
    Key(r.key);
    End(l.last_exit, track);
  }

  // A shadow trace alone: blocks of the drawn launches, in the shadow's clock.
  void OnBlock(const BlockRecord& r) override {
    if (join_ || !shadow_drawn_.count(r.launch_seq)) return;
    if (!ValidSpan(r.enter_ns, r.exit_ns)) {
      ++counts.blocks_invalid;
      return;
    }
    auto it = scan_.launches.find(r.launch_seq);
    DrawBlock(Blocks(it == scan_.launches.end() ? 0 : it->second.device, false), r, r.enter_ns, r.exit_ns, false);
  }

  // A joined run: every timed match as a span on its GPU's launches track,
  // with its blocks where `blocks` has them (times scaled onto the kernel).
  void WriteJoinedLaunches(const BlockPlan& plan, const std::vector<join::LaunchBlocks>& blocks) {
    std::unordered_map<uint64_t, const join::LaunchBlocks*> by_seq;
    for (const auto& lb : blocks) by_seq[lb.seq] = &lb;
    for (size_t id : plan.timed) {
      const join::Match& mt = join_->matches[id];
      const join::PrimaryLaunch& p = join_->primary[mt.primary];
      const join::ShadowLaunch& s = join_->shadow[mt.shadow];
      const auto& b = s.blocks;
      BlockTracks& bt = Blocks(p.device, true);
      const uint64_t track = bt.launches.Place(w_, p.start_ns, p.end_ns);
      const TimeMap map = MapOntoKernel(s, p);
      auto drawn = plan.drawn.count(s.seq) ? by_seq.find(s.seq) : by_seq.end();
      Begin(p.start_ns, track);
      w_.SetName(w_.NameIid(LaunchName(*join_, id)));
      w_.SetCategory(Category(cat_launch_, "shadow_launch"));
      for (const LaunchArg& a : LaunchArgs(*join_, id, map, drawn != by_seq.end())) {
        if (auto* u = std::get_if<uint64_t>(&a.value)) w_.Arg(a.name, *u);
        if (auto* d = std::get_if<double>(&a.value)) w_.ArgDouble(a.name, *d);
        if (auto* f = std::get_if<bool>(&a.value)) w_.ArgBool(a.name, *f);
        if (auto* t = std::get_if<std::string>(&a.value)) w_.ArgString(a.name, *t);
      }
      w_.ArgString("times", kScaledNote);
      if (flows_to_shadow_.count(id)) w_.AddTerminatingFlow(kJoinFlowBit | id);
      End(p.end_ns, track);
      if (drawn == by_seq.end()) continue;
      for (const BlockRecord& r : drawn->second->blocks) {
        if (!ValidSpan(r.enter_ns, r.exit_ns)) {
          ++counts.blocks_invalid;
          continue;
        }
        const bool straggler =
            r.block_linear == b.straggler.block_linear && r.sm == b.straggler.sm && r.exit_ns == b.straggler.exit_ns;
        DrawBlock(bt, r, map(r.enter_ns), map(r.exit_ns), straggler);
      }
    }
  }

  // The instant on the "twinscope" track that says what was drawn.
  void WriteSummary(const BlockBounds& bounds, const RequestTrackBounds& request_bounds,
                    const std::vector<std::string>& warnings) {
    TrackDescriptor d;
    d.set_name("twinscope");
    d.set_description("What this export drew and what it left out (args of the instant at time 0).");
    const uint64_t track = w_.AddTrack(std::move(d));
    w_.Event(0, TrackEvent::TYPE_INSTANT, track);
    w_.SetName(w_.NameIid(join_ ? "twinscope join export" : "twinscope export"));
    w_.Arg("base_ns", base_);
    w_.Arg("skipped_invalid_timestamps", skipped_invalid);
    if (join_) {
      w_.ArgUniqueString("primary", join_->primary_path);
      w_.ArgUniqueString("shadow", join_->shadow_path);
      w_.Arg("launches_matched", counts.launches_matched);
      w_.Arg("launches_untimed", counts.launches_untimed);
      w_.ArgUniqueString("block_times", kScaledNote);
    }
    w_.Arg("launches_drawn_with_blocks", counts.launches_drawn);
    w_.Arg("launches_over_bounds", counts.launches_over_bounds);
    w_.Arg("blocks_drawn", counts.blocks_drawn);
    w_.Arg("blocks_invalid", counts.blocks_invalid);
    w_.Arg("max_block_launches", bounds.max_launches);
    w_.Arg("max_blocks", bounds.max_blocks);
    if (requests_) requests_->SummaryArgs(request_bounds);
    for (const auto& warning : warnings) w_.ArgUniqueString("warning", warning);
    w_.Emit();
  }

  std::string BlockRootName(uint32_t device, bool joined) const {
    if (joined) return BlockGroupName(device, scan_.DeviceName(device), counts);
    return "GPU " + std::to_string(device) + scan_.DeviceName(device) + " thread blocks by SM (shadow clock)";
  }

  BlockDetailCounts counts;
  uint64_t skipped_invalid = 0;
  std::unordered_set<size_t> flows_to_shadow_;  // matches whose kernel started a flow

 private:
  void Skip() { ++skipped_invalid; }
  uint64_t Ts(uint64_t t) const { return t > base_ ? t - base_ : 0; }

  // Starts a slice; set its name and category after this (interning writes
  // into the packet this starts).
  void Begin(uint64_t t, uint64_t track) { w_.Event(Ts(t), TrackEvent::TYPE_SLICE_BEGIN, track); }
  void End(uint64_t t, uint64_t track) {
    w_.Emit();
    w_.Event(Ts(t), TrackEvent::TYPE_SLICE_END, track);
    w_.Emit();
  }
  uint64_t Category(uint64_t& slot, const char* name) {
    if (!slot) slot = w_.CategoryIid(name);
    return slot;
  }
  const std::string& String(StringId id, const char* fallback) {
    auto s = strings_.find(id);
    if (id == 0 || s == strings_.end()) {
      fallback_ = fallback;
      return fallback_;
    }
    return s->second;
  }
  uint64_t Cached(std::unordered_map<StringId, uint64_t>& cache, StringId id, const char* fallback) {
    auto it = cache.find(id);
    if (it != cache.end()) return it->second;
    return cache[id] = w_.NameIid(String(id, fallback));
  }
  void Key(const LaunchKey& k) {
    if (!k.hash && !k.path) return;
    w_.ArgString("key_path", String(k.path, ""));
    w_.Arg("key_ordinal", k.ordinal);
    w_.ArgUniqueString("key_hash", KeyHashHex(k.hash));
  }
  void Graph(uint32_t flags, uint32_t graph_id, uint64_t node) {
    if (!(flags & kFlagGraph)) return;
    w_.Arg("graph_id", graph_id);
    w_.Arg("graph_node_id", node);
  }
  // The GPU activity ends the next flow its API call started.
  void FlowEnds(uint32_t corr) {
    if (!corr || scan_.api_correlations.Get(corr) == 0) return;
    const uint32_t i = flows_done_.Increment(corr) - 1;
    if (i < scan_.FlowsOf(corr)) w_.AddTerminatingFlow(ApiFlowId(corr, i));
  }

  // Tracks are made from the scan (pass 1) and, should pass 2 meet more, on first use.
  Lanes& Stream(uint32_t device, uint32_t stream) {
    auto it = streams_.find({device, stream});
    if (it != streams_.end()) return it->second;
    if (!devices_.count(device)) {
      TrackDescriptor d;
      d.set_name("GPU " + std::to_string(device) + scan_.DeviceName(device));
      d.set_child_ordering(TrackDescriptor::EXPLICIT);
      d.set_sibling_order_rank(static_cast<int32_t>(device));
      devices_[device] = w_.AddTrack(std::move(d));
    }
    Lanes lanes(devices_[device], "stream " + std::to_string(stream), static_cast<int32_t>(stream));
    return streams_.emplace(std::make_pair(device, stream), std::move(lanes)).first->second;
  }
  uint64_t Thread(uint64_t tid) {
    auto it = threads_.find(tid);
    if (it != threads_.end()) return it->second;
    TrackDescriptor d;
    d.mutable_thread()->set_pid(static_cast<int32_t>(pid_));
    d.mutable_thread()->set_tid(static_cast<int64_t>(tid));
    d.mutable_thread()->set_thread_name(static_cast<int64_t>(tid) == pid_ ? "main thread " + std::to_string(tid)
                                                                          : "thread " + std::to_string(tid));
    return threads_[tid] = w_.AddTrack(std::move(d));
  }

  BlockTracks& Blocks(uint32_t device, bool joined) {
    auto it = blocks_.find(device);
    if (it != blocks_.end()) return it->second;
    TrackDescriptor d;
    d.set_name(BlockRootName(device, joined));
    d.set_description(joined ? std::string(kScaledNote) +
                                   ". Each launch's blocks span exactly its primary kernel; the launches track links "
                                   "each one to its kernel (flow) and holds its block statistics."
                             : "The shadow's thread blocks in its own GPU clock (%globaltimer).");
    d.set_child_ordering(TrackDescriptor::EXPLICIT);
    d.set_sibling_order_rank(1000 + static_cast<int32_t>(device));
    BlockTracks& bt = blocks_[device];
    bt.root = w_.AddTrack(std::move(d));
    bt.launches = Lanes(bt.root, joined ? "shadow launches (on their primary kernel)" : "traced launches", -1);
    return bt;
  }

  void DrawBlock(BlockTracks& bt, const BlockRecord& r, uint64_t start, uint64_t end, bool straggler) {
    const uint64_t before = w_.bytes();
    auto sm = bt.sms.find(r.sm);
    if (sm == bt.sms.end())
      sm = bt.sms.emplace(r.sm, Lanes(bt.root, "SM " + std::to_string(r.sm), static_cast<int32_t>(r.sm))).first;
    const uint64_t track = sm->second.Place(w_, start, end);
    if (r.block_linear >= block_names_.size()) block_names_.resize(r.block_linear + 1, 0);
    uint64_t& name = block_names_[r.block_linear];
    w_.Event(Ts(start), TrackEvent::TYPE_SLICE_BEGIN, track);
    if (!name) name = w_.NameIid("block " + std::to_string(r.block_linear));
    w_.SetName(name);
    w_.SetCategory(Category(cat_block_, "block"));
    w_.Arg("order", r.order);
    if (straggler) w_.ArgBool("straggler", true);
    End(end, track);
    ++counts.blocks_drawn;
    counts.block_bytes += w_.bytes() - before;
  }

  PerfettoWriter& w_;
  const TimelineScan& scan_;
  const std::unordered_map<StringId, std::string>& strings_;
  const nlohmann::json& header_;
  const uint64_t base_;
  int64_t pid_ = 1;
  const join::JoinedModel* join_ = nullptr;
  std::unordered_map<KernelSpot, size_t, KernelSpotHash> kernel_match_;
  std::unordered_set<uint64_t> shadow_drawn_;
  std::optional<RequestTracks> requests_;
  uint64_t process_ = 0;
  std::unordered_map<uint64_t, uint64_t> threads_;
  std::map<uint32_t, uint64_t> devices_;
  std::map<std::pair<uint32_t, uint32_t>, Lanes> streams_;
  Lanes nvtx_ranges_;
  std::map<uint32_t, BlockTracks> blocks_;
  std::unordered_map<StringId, uint64_t> kernel_names_, api_names_;
  std::vector<uint64_t> block_names_;
  std::string fallback_;
  CorrelationCounts flows_started_, flows_done_;
  uint64_t cat_kernel_ = 0, cat_memcpy_ = 0, cat_memset_ = 0, cat_runtime_ = 0, cat_driver_ = 0, cat_nvtx_ = 0,
           cat_launch_ = 0, cat_block_ = 0;
};

// A shadow trace alone: its launches with blocks by seq, taken while the bounds hold.
std::unordered_set<uint64_t> ChooseShadowLaunches(const TimelineScan& scan, const BlockBounds& bounds,
                                                  BlockDetailCounts* counts) {
  std::vector<std::pair<uint64_t, uint64_t>> launches;  // (seq, blocks)
  for (const auto& [seq, l] : scan.launches)
    if (l.blocks) launches.emplace_back(seq, l.blocks);
  std::sort(launches.begin(), launches.end());
  std::unordered_set<uint64_t> drawn;
  uint64_t blocks = 0;
  for (const auto& [seq, n] : launches) {
    if (drawn.size() >= bounds.max_launches || blocks + n > bounds.max_blocks) continue;
    blocks += n;
    drawn.insert(seq);
  }
  counts->launches_drawn = drawn.size();
  counts->launches_over_bounds = launches.size() - drawn.size();
  return drawn;
}

StatusOr<TimelineExportResult> WriteTimeline(const std::string& trace, const std::string& out,
                                             const BlockBounds& bounds, const RequestTrackBounds& request_bounds,
                                             const join::JoinedRun* run) {
  // A joined run's primary comes from the join's one pass (run->primary); a trace alone is read twice: pass 1
  // the scan, pass 2 the records (timeline_passes.h).
  const join::JoinedModel* m = run ? &run->model : nullptr;
  std::unique_ptr<LoggedRecords> kept = run ? std::make_unique<LoggedRecords>(run->primary) : nullptr;
  auto passes = TimelinePasses::Open(trace, kept.get());
  if (!passes.ok()) return passes.status();
  TimelinePasses& p = **passes;
  const nlohmann::json& header = p.Header();
  const bool shadow = header.value("role", std::string()) == "shadow";
  if (m && shadow) return Status::Error(trace + " is a shadow trace: the joined export draws the primary's timeline");
  TimelineScan scan(shadow);
  if (Status s = p.Scan(scan); !s.ok()) return s;

  TimelineExportResult result;
  BlockPlan plan;
  if (run) plan = PlanWithDetail(*run, bounds, &result.warnings);
  const std::vector<join::LaunchBlocks> no_blocks;
  const std::vector<join::LaunchBlocks>& blocks = run ? run->detail : no_blocks;

  FILE* f = std::fopen(out.c_str(), "wb");
  if (!f) return Status::Error("cannot write " + out + ": " + std::strerror(errno));
  PerfettoWriter w(f);
  Timeline t(w, scan, p.Strings(), header);
  if (m) {
    t.SetJoin(m, plan.timed);
    t.counts = plan.counts;
  } else if (shadow) {
    t.SetShadowDrawn(ChooseShadowLaunches(scan, bounds, &t.counts));
  }
  t.WriteTracks();
  if (m && m->requests.present) t.WriteRequests(request_bounds);
  if (Status s = p.Events(t, &result.report, out); !s.ok()) {
    std::fclose(f);
    return s;
  }
  result.records = result.report.records;
  if (m) t.WriteJoinedLaunches(plan, blocks);
  if (RequestTracks* rt = t.requests()) {
    rt->Finish();
    for (auto& warning : rt->Warnings(request_bounds)) result.warnings.push_back(std::move(warning));
    result.requests = rt->counts;
  }
  AddReadWarnings(result.report, &result.warnings);
  if (m) {
    for (const auto& warning : m->warnings) result.warnings.push_back("join: " + warning);
  }
  if (t.skipped_invalid) {
    result.warnings.push_back(std::to_string(t.skipped_invalid) +
                              " records with invalid timestamps were not placed on the timeline (counted in the "
                              "twinscope track's skipped_invalid_timestamps)");
  }
  const BlockDetailCounts& c = t.counts;
  if (c.launches_over_bounds) {
    result.warnings.push_back("blocks drawn for " + CountText(c.launches_drawn) + " of " +
                              CountText(c.launches_drawn + c.launches_over_bounds) + " launches (at most " +
                              CountText(bounds.max_launches) + " launches and " + CountText(bounds.max_blocks) +
                              " blocks); the others are spans with their block statistics");
  }
  t.WriteSummary(bounds, request_bounds, result.warnings);
  bool ok = w.Finish();
  if (std::fclose(f) != 0) ok = false;
  if (!ok) return Status::Error("error writing " + out + ": " + std::strerror(errno) + " (disk full?)");
  result.skipped_invalid = t.skipped_invalid;
  result.written = w.packets();
  result.bytes = w.bytes();
  result.blocks = t.counts;
  return result;
}

}  // namespace

bool PerfettoAvailable() { return true; }

StatusOr<TimelineExportResult> ExportPerfetto(const std::string& trace, const std::string& out,
                                              const BlockBounds& bounds) {
  return WriteTimeline(trace, out, bounds, kPerfettoRequestBounds, nullptr);
}

StatusOr<TimelineExportResult> ExportJoinPerfetto(const join::JoinedRun& run, const std::string& out,
                                                  const BlockBounds& bounds, const RequestTrackBounds& requests) {
  return WriteTimeline(run.model.primary_path, out, bounds, requests, &run);
}

}  // namespace twinscope::exporters
