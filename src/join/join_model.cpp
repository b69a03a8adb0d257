// Builds the joined model: reads the shadow (targets, blocks), then the
// primary (the targets' launches and kernel records), matches them by launch
// key, then by time, and derives drift, steps and the why-slow groups.
#include "join/join_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "format/tee_sink.h"
#include "join/divergence.h"
#include "join/match.h"
#include "join/record_log.h"
#include "join/why_slow.h"
#include "launchkey/launch_key.h"
#include "twinscope/trace_reader.h"

namespace twinscope::join {

const char* MatchKindName(MatchKind k) {
  switch (k) {
    case MatchKind::kExact:
      return "exact";
    case MatchKind::kDiverged:
      return "diverged";
    case MatchKind::kTime:
      break;
  }
  return "time";
}

namespace {

// The shadow's launch records and each launch's valid block durations as a bounded sample: its order
// statistics, all of them up to kDurationSample blocks, else kDurationSample evenly ranked ones (docs/join.md,
// "Why slow"). Blocks of one launch come together: each run of them is sorted and sampled when it ends, so the
// sink holds one launch's durations at a time, not every block's.
class ShadowSink : public RecordSink {
 public:
  static constexpr size_t kDurationSample = 64;

  void OnLaunch(const LaunchRecord& r) override { launches[r.seq] = r; }
  void OnBlock(const BlockRecord& r) override {
    if (!(r.enter_ns && r.exit_ns && r.exit_ns >= r.enter_ns)) return;
    if (run_.empty() || r.launch_seq != run_seq_) {
      Flush();
      run_seq_ = r.launch_seq;
    }
    run_.push_back(r.exit_ns - r.enter_ns);
  }
  // Ends the last run: call once the read is over.
  void Finish() { Flush(); }

  std::unordered_map<uint64_t, LaunchRecord> launches;
  std::unordered_map<uint64_t, std::vector<uint64_t>> durations;  // sorted sample per launch seq
  std::unordered_map<uint64_t, uint64_t> sampled_from;            // valid blocks each sample stands for

 private:
  void Flush() {
    if (run_.empty()) return;
    auto& sample = durations[run_seq_];
    uint64_t& n = sampled_from[run_seq_];
    if (!sample.empty()) {  // a launch's blocks came in two runs: the earlier sample, each point at its weight
      for (size_t i = 0; i < sample.size(); ++i) {
        const uint64_t from = i * n / sample.size(), to = (i + 1) * n / sample.size();
        run_.insert(run_.end(), to - from, sample[i]);
      }
    }
    std::sort(run_.begin(), run_.end());
    n = run_.size();
    if (run_.size() <= kDurationSample) {
      sample.assign(run_.begin(), run_.end());
    } else {
      sample.resize(kDurationSample);
      for (size_t i = 0; i < kDurationSample; ++i) sample[i] = run_[i * run_.size() / kDurationSample];
    }
    sample.shrink_to_fit();
    run_.clear();
  }
  std::vector<uint64_t> run_;  // durations of the current run of one launch's blocks
  uint64_t run_seq_ = 0;
};

bool ValidTimes(uint64_t start, uint64_t end, uint32_t flags) {
  return !(flags & kFlagInvalidTimestamp) && start && end && end >= start;
}

// The primary's target launches: launch records of target kernels tied to
// their kernel records (by correlation id and key hash), plus kernel records
// whose launch record is missing; and per-top-level-range kernel time.
class PrimarySink : public RecordSink {
 public:
  PrimarySink(const TraceReader& reader, const std::unordered_set<std::string>& targets)
      : reader_(reader), targets_(targets) {}

  void OnLaunch(const LaunchRecord& r) override {
    if (!IsTarget(r.kernel)) return;
    PrimaryLaunch p;
    p.kernel = Name(reader_.String(r.kernel));
    p.path = Name(reader_.String(r.key.path));
    p.ordinal = r.key.ordinal;
    p.hash = r.key.hash;
    p.grid = r.grid;
    p.block = r.block;
    p.cpu_ns = r.cpu_ns;
    p.stream = r.stream;
    p.device = r.device;
    p.graph = (r.flags & kFlagGraph) != 0;
    const uint64_t tie = Tie(r.correlation_id, r.key.hash);
    auto k = orphan_kernels_.find(tie);
    if (k != orphan_kernels_.end() && !k->second.empty()) {
      Attach(p, k->second.back());
      k->second.pop_back();
    } else {
      waiting_[tie].push_back(launches.size());
    }
    launches.push_back(std::move(p));
  }

  void OnKernel(const KernelRecord& r) override {
    const bool valid = ValidTimes(r.start_ns, r.end_ns, r.flags);
    if (valid && (!t0 || r.start_ns < t0)) t0 = r.start_ns;
    const bool target = IsTarget(r.name);
    if (valid) {
      StepRow& s = Step(r.key.path);
      ++s.kernels;
      s.kernel_ns += r.end_ns - r.start_ns;
      if (!s.first_start_ns || r.start_ns < s.first_start_ns) s.first_start_ns = r.start_ns;
      s.last_end_ns = std::max(s.last_end_ns, r.end_ns);
      if (target) s.target_ns += r.end_ns - r.start_ns, ++s.targets;
    }
    if (!target) return;
    if (r.demangled && !demangled_.count(r.name)) demangled_[r.name] = std::string(reader_.String(r.demangled));
    const uint64_t tie = Tie(r.correlation_id, r.key.hash);
    auto w = waiting_.find(tie);
    if (w != waiting_.end() && !w->second.empty()) {
      Attach(launches[w->second.front()], r);
      w->second.erase(w->second.begin());
      if (w->second.empty()) waiting_.erase(w);
    } else {
      orphan_kernels_[tie].push_back(r);
    }
  }

  // Kernel records never tied to a launch record become launches of their own.
  void Finish() {
    for (auto& [tie, list] : orphan_kernels_) {
      for (const KernelRecord& r : list) {
        PrimaryLaunch p;
        p.kernel = Name(reader_.String(r.name));
        p.path = Name(reader_.String(r.key.path));
        p.ordinal = r.key.ordinal;
        p.hash = r.key.hash;
        p.grid = r.grid;
        p.block = r.block;
        p.cpu_ns = r.start_ns;  // the CUPTI clock: best estimate of the launch time
        p.graph = (r.flags & kFlagGraph) != 0;
        Attach(p, r);
        launches.push_back(std::move(p));
      }
    }
    orphan_kernels_.clear();
    std::stable_sort(launches.begin(), launches.end(),
                     [](const PrimaryLaunch& a, const PrimaryLaunch& b) { return a.cpu_ns < b.cpu_ns; });
    for (auto& [id, d] : demangled_) demangled_by_name_.emplace(std::string(reader_.String(id)), d);
    for (auto& p : launches) {
      auto it = demangled_by_name_.find(p.kernel);
      if (it != demangled_by_name_.end()) p.demangled = it->second;
    }
  }

  std::vector<PrimaryLaunch> launches;
  std::vector<StepRow> steps;
  uint64_t t0 = 0;

 private:
  static uint64_t Tie(uint32_t correlation, uint64_t hash) { return hash * 1000003u ^ correlation; }
  void Attach(PrimaryLaunch& p, const KernelRecord& r) {
    p.device = r.device;
    p.stream = r.stream;
    p.graph = p.graph || (r.flags & kFlagGraph);
    if (ValidTimes(r.start_ns, r.end_ns, r.flags)) {
      p.have_kernel = true;
      p.start_ns = r.start_ns;
      p.end_ns = r.end_ns;
    }
  }
  bool IsTarget(StringId id) {
    auto it = target_ids_.find(id);
    if (it != target_ids_.end()) return it->second;
    const bool t = targets_.count(std::string(reader_.String(id))) > 0;
    target_ids_.emplace(id, t);
    return t;
  }
  StepRow& Step(StringId path) {
    auto it = step_index_.find(path);
    if (it == step_index_.end()) {
      std::string top(TopLevelRange(reader_.String(path)));
      auto named = step_by_name_.find(top);
      size_t idx;
      if (named == step_by_name_.end()) {
        idx = steps.size();
        steps.push_back(StepRow{top});
        step_by_name_.emplace(top, idx);
      } else {
        idx = named->second;
      }
      it = step_index_.emplace(path, idx).first;
    }
    return steps[it->second];
  }

  const TraceReader& reader_;
  const std::unordered_set<std::string>& targets_;
  std::unordered_map<StringId, bool> target_ids_;
  std::unordered_map<uint64_t, std::vector<size_t>> waiting_;               // launches without kernel yet
  std::unordered_map<uint64_t, std::vector<KernelRecord>> orphan_kernels_;  // kernels without launch yet
  std::unordered_map<StringId, std::string> demangled_;
  std::unordered_map<std::string, std::string> demangled_by_name_;
  std::unordered_map<StringId, size_t> step_index_;
  std::unordered_map<std::string, size_t> step_by_name_;
};

std::string RoleOf(const TraceReader& r) { return r.header().is_object() ? r.header().value("role", "") : ""; }

void Warn(JoinedModel& m, const std::string& side, const ReadReport& rep) {
  if (rep.end == ReadEnd::kComplete) return;
  if (rep.end == ReadEnd::kNoSummary) {
    m.warnings.push_back(side + " trace has no summary (the process did not shut down cleanly): joined what it holds");
  } else {
    m.warnings.push_back(side + " trace is damaged: " + rep.message + "; joined what could be read");
  }
}

// CUPTI clock -> CLOCK_REALTIME, from the primary header's clock pair; 0 offset
// if the header has none (older traces), which assumes CUPTI's clock is realtime.
int64_t PrimaryToRealtime(const nlohmann::json& h) {
  if (h.is_object() && h.contains("clock") && h["clock"].is_object()) {
    const auto& c = h["clock"];
    if (c.contains("cupti_ns") && c.contains("realtime_ns"))
      return c["realtime_ns"].get<int64_t>() - c["cupti_ns"].get<int64_t>();
  }
  return 0;
}

int64_t ShadowMonotonicToRealtime(const nlohmann::json& h) {
  if (!h.is_object()) return 0;
  return h.value("start_realtime_ns", int64_t{0}) - h.value("start_monotonic_ns", int64_t{0});
}

}  // namespace

StatusOr<JoinedModel> JoinTraces(const std::string& primary_path, const std::string& shadow_path,
                                 const JoinOptions& options, RecordLog* primary_log) {
  JoinedModel m;
  m.primary_path = primary_path;
  m.shadow_path = shadow_path;
  m.options = options;
  m.warnings = options.warnings;

  // Shadow first: it names the target kernels.
  std::string error;
  auto sreader = TraceReader::Open(shadow_path, &error);
  if (!sreader) return Status::Error("shadow: " + error);
  if (RoleOf(*sreader) != "shadow")
    return Status::Error(shadow_path + " is not a shadow trace (role '" + RoleOf(*sreader) +
                         "'): give the primary (twinscope record) first, then the shadow (twinscope blocks)");
  auto preader = TraceReader::Open(primary_path, &error);
  if (!preader) return Status::Error("primary: " + error);
  if (RoleOf(*preader) != "primary")
    return Status::Error(primary_path + " is not a primary trace (role '" + RoleOf(*preader) +
                         "'): give the primary (twinscope record) first, then the shadow (twinscope blocks)");

  {
    stats::StatsBuilder sb;
    sb.set_keep_launches(true);
    ShadowSink ss;
    TeeSink tee(sb, ss);
    ReadReport rep = sreader->Read(tee);
    ss.Finish();
    m.shadow_side.stats = sb.Finish(sreader->strings(), sreader->header(), rep);
    m.shadow_side.stats.path = shadow_path;
    m.shadow_side.launches = ss.launches.size();
    Warn(m, "shadow", rep);
    m.shadow.reserve(m.shadow_side.stats.shadow_launches.size());
    for (auto& sl : m.shadow_side.stats.shadow_launches) {
      auto li = ss.launches.find(sl.blocks.seq);
      if (li == ss.launches.end()) continue;  // blocks without a launch record: counted by stats
      const LaunchRecord& lr = li->second;
      ShadowLaunch s;
      s.seq = lr.seq;
      s.kernel = sl.kernel;
      s.path = sl.key_path;
      std::string().swap(sl.kernel), std::string().swap(sl.key_path);  // interned now: let the copies go
      s.ordinal = sl.key_ordinal;
      s.hash = sl.key_hash;
      s.grid = lr.grid;
      s.block = lr.block;
      s.cpu_ns = lr.cpu_ns;
      s.stream = lr.stream;
      s.blocks = sl.blocks;
      auto d = ss.durations.find(lr.seq);
      if (d != ss.durations.end()) {
        s.block_durations = std::move(d->second);
        s.block_durations_of = ss.sampled_from[lr.seq];
      }
      m.shadow.push_back(std::move(s));
    }
    // The per-launch detail now lives in m.shadow; the side keeps the totals.
    std::vector<stats::ShadowLaunch>().swap(m.shadow_side.stats.shadow_launches);  // and its memory
  }

  std::unordered_set<std::string> targets;
  for (const auto& s : m.shadow) targets.insert(s.kernel);
  m.summary.target_kernels.assign(targets.begin(), targets.end());
  std::sort(m.summary.target_kernels.begin(), m.summary.target_kernels.end());

  {
    stats::StatsBuilder sb;
    sb.set_kernel_percentiles(false);  // memory O(target launches), not O(records): no view of a join shows them
    PrimarySink ps(*preader, targets);
    TeeSink tee(sb, ps);
    RecordSink null_sink;
    TeeSink with_log(tee, primary_log ? static_cast<RecordSink&>(*primary_log) : null_sink);
    ReadReport rep = preader->Read(with_log);
    ps.Finish();
    if (primary_log) {
      primary_log->header = preader->header();
      primary_log->strings = preader->strings();
      primary_log->report = rep;
      primary_log->path = primary_path;
    }
    m.primary_side.stats = sb.Finish(preader->strings(), preader->header(), rep);
    m.primary_side.stats.path = primary_path;
    m.primary_side.launches =
        m.primary_side.stats.counts.count("launch") ? m.primary_side.stats.counts.at("launch") : 0;
    Warn(m, "primary", rep);
    m.primary = std::move(ps.launches);
    m.steps = std::move(ps.steps);
    m.primary_t0_ns = ps.t0;
  }
  if (m.shadow.empty())
    m.warnings.push_back("the shadow traced no launch: nothing to join (did the kernel pattern match a kernel?)");

  MatchLaunches(m);
  m.primary_to_realtime_ns = PrimaryToRealtime(preader->header());

  if (options.concurrent) {
    auto& o = m.summary.overlap;
    o.computed = true;
    const int64_t p2r = m.primary_to_realtime_ns;
    o.primary_to_realtime = p2r;
    o.clock = p2r != 0 ? "the primary's header clock pair (CUPTI, CLOCK_REALTIME)" : "none in the primary's header";
    const int64_t s2r = ShadowMonotonicToRealtime(sreader->header());
    uint64_t ws = options.shadow_window_start_realtime_ns, we = options.shadow_window_end_realtime_ns;
    if (!ws && !we) {
      ws = sreader->header().value("start_realtime_ns", uint64_t{0});
      uint64_t last = 0, span = 0;
      for (const auto& s : m.shadow) last = std::max(last, s.cpu_ns), span = std::max(span, s.blocks.span_ns);
      we = last ? static_cast<uint64_t>(static_cast<int64_t>(last) + s2r) + span : ws;
    }
    o.window_start = static_cast<int64_t>(ws), o.window_end = static_cast<int64_t>(we);
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (const auto& p : m.primary)
      if (p.have_kernel) {
        first = std::min(first, static_cast<int64_t>(p.start_ns) + p2r);
        last = std::max(last, static_cast<int64_t>(p.end_ns) + p2r);
      }
    if (first != INT64_MAX) o.primary_first_kernel = first, o.primary_last_kernel = last;
    // The primary's kernels must lie inside its own lifetime: if not, the
    // clock pair is wrong and no kernel can be flagged honestly.
    const int64_t ps = static_cast<int64_t>(options.primary_start_realtime_ns),
                  pe = static_cast<int64_t>(options.primary_end_realtime_ns);
    constexpr int64_t kSlack = 2'000'000'000;
    const bool clock_ok = first == INT64_MAX || ps == 0 || pe == 0 || (first >= ps - kSlack && last <= pe + kSlack);
    if (!clock_ok) {
      m.warnings.push_back(
          "concurrent twins: the primary's kernels, converted with its header's clock pair, fall outside the "
          "primary process's lifetime (" +
          std::to_string((first - ps) / 1000000) + " ms after its start): the overlap flag is not computed");
    } else {
      for (auto& p : m.primary) {
        if (!p.have_kernel) continue;
        const int64_t s = static_cast<int64_t>(p.start_ns) + p2r, e = static_cast<int64_t>(p.end_ns) + p2r;
        p.overlapped = e >= static_cast<int64_t>(ws) && s <= static_cast<int64_t>(we);
        if (p.overlapped) ++m.summary.overlapped_primary_kernels;
      }
    }
  }

  ComputeWhySlow(m);
  BuildRequestTable(&m, options.requests);
  ExplainDivergence(m);
  return m;
}

StatusOr<ShadowDetail> ReadShadowDetail(const std::string& shadow_path, const std::vector<uint64_t>& seqs,
                                        RecordSink* also) {
  std::string error;
  auto reader = TraceReader::Open(shadow_path, &error);
  if (!reader) return Status::Error(error);
  struct Sink : RecordSink {
    std::unordered_map<uint64_t, size_t> index;
    std::vector<LaunchBlocks> out;
    RecordSink* also = nullptr;
    void OnKernel(const KernelRecord& r) override { also->OnKernel(r); }
    void OnMemcpy(const MemcpyRecord& r) override { also->OnMemcpy(r); }
    void OnMemset(const MemsetRecord& r) override { also->OnMemset(r); }
    void OnApi(const ApiRecord& r) override { also->OnApi(r); }
    void OnNvtx(const NvtxRecord& r) override { also->OnNvtx(r); }
    void OnLaunch(const LaunchRecord& r) override { also->OnLaunch(r); }
    void OnStatus(const nlohmann::json& s, bool summary) override { also->OnStatus(s, summary); }
    void OnBlock(const BlockRecord& r) override {
      also->OnBlock(r);
      auto it = index.find(r.launch_seq);
      if (it != index.end()) out[it->second].blocks.push_back(r);
    }
  } sink;
  RecordSink none;
  sink.also = also ? also : &none;
  for (uint64_t s : seqs) {
    if (sink.index.emplace(s, sink.out.size()).second) sink.out.push_back(LaunchBlocks{s, {}});
  }
  ShadowDetail d;
  d.report = reader->Read(sink);
  d.header = reader->header();
  for (auto& l : sink.out) {
    std::sort(l.blocks.begin(), l.blocks.end(),
              [](const BlockRecord& a, const BlockRecord& b) { return a.order < b.order; });
  }
  d.launches = std::move(sink.out);
  return d;
}

StatusOr<std::vector<LaunchBlocks>> ReadShadowBlocks(const std::string& shadow_path,
                                                     const std::vector<uint64_t>& seqs) {
  auto d = ReadShadowDetail(shadow_path, seqs);
  if (!d.ok()) return d.status();
  return std::move(d->launches);
}

std::vector<LaunchBlocks> DetailOf(const std::vector<LaunchBlocks>& detail, const std::vector<uint64_t>& seqs) {
  std::unordered_map<uint64_t, const LaunchBlocks*> by_seq;
  for (const auto& l : detail) by_seq.emplace(l.seq, &l);
  std::vector<LaunchBlocks> out;
  std::unordered_set<uint64_t> seen;
  for (uint64_t s : seqs) {
    auto it = by_seq.find(s);
    if (it != by_seq.end() && seen.insert(s).second) out.push_back(*it->second);
  }
  return out;
}

}  // namespace twinscope::join
