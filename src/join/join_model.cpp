// Builds the joined model: reads the shadow (targets, blocks), then the
// primary (the targets' launches and kernel records), matches them by launch
// key, then by time, and derives drift, steps and the why-slow groups.
#include "join/join_model.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <memory>
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

  // What the model takes from a launch record that the trace statistics do not keep, and the launch's
  // sample: one map entry a launch (docs/join.md, "Reads").
  struct Launch {
    bool have_record = false;  // a launch record was read (else only blocks)
    uint32_t stream = 0;
    Dim3 block{0, 0, 0};
    uint64_t cpu_ns = 0;
    uint32_t points = 0;  // the sorted sample: pool[at, at + points)
    uint64_t at = 0;
    uint64_t sampled_from = 0;  // valid blocks the sample stands for
  };

  void OnLaunch(const LaunchRecord& r) override {
    Launch& l = launches[r.seq];
    if (!l.have_record) ++launch_records;
    l.have_record = true;
    l.stream = r.stream;
    l.block = r.block;
    l.cpu_ns = r.cpu_ns;
  }
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

  // A launch's sample as the model keeps it: allocated only once the read's maps are gone, so that the
  // samples of two million launches are not each left between them (pages the system cannot take back).
  std::vector<uint64_t> Sample(const Launch& l) const {
    return std::vector<uint64_t>(pool_.begin() + static_cast<ptrdiff_t>(l.at),
                                 pool_.begin() + static_cast<ptrdiff_t>(l.at + l.points));
  }

  std::unordered_map<uint64_t, Launch> launches;  // by seq
  uint64_t launch_records = 0;                    // seqs with a launch record

 private:
  void Flush() {
    if (run_.empty()) return;
    Launch& l = launches[run_seq_];
    if (l.points) {  // a launch's blocks came in two runs: the earlier sample, each point at its weight
      const uint64_t n = l.sampled_from;
      for (size_t i = 0; i < l.points; ++i) {
        const uint64_t from = i * n / l.points, to = (i + 1) * n / l.points;
        run_.insert(run_.end(), to - from, pool_[l.at + i]);
      }
    }
    std::sort(run_.begin(), run_.end());
    l.sampled_from = run_.size();
    l.at = pool_.size();  // an earlier sample stays in the pool, unused (rare: blocks come together)
    if (run_.size() <= kDurationSample) {
      pool_.insert(pool_.end(), run_.begin(), run_.end());
    } else {
      for (size_t i = 0; i < kDurationSample; ++i) pool_.push_back(run_[i * run_.size() / kDurationSample]);
    }
    l.points = static_cast<uint32_t>(pool_.size() - l.at);
    run_.clear();
  }
  std::vector<uint64_t> run_;  // durations of the current run of one launch's blocks
  uint64_t run_seq_ = 0;
  std::vector<uint64_t> pool_;  // every launch's sample, one after the other
};

bool ValidTimes(uint64_t start, uint64_t end, uint32_t flags) {
  return !(flags & kFlagInvalidTimestamp) && start && end && end >= start;
}

// Gives the allocator's free pages back to the system. A join's reads leave many small blocks freed between
// ones it keeps (hash-map nodes between the shadow launches' duration samples); glibc keeps such pages
// resident until trimmed, and a later large array is mapped anew rather than put in them (docs/join.md,
// "Reads").
void ReleaseFreeMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

// The primary's launches while the read is under way, in fixed chunks: growing never copies what is there
// (a vector's last doubling at ten million launches held 1.5 times its final size), and the model's vector
// is then made once at its final size, each chunk let go as it is moved (docs/join.md, "Reads"). A chunk
// (48 MiB) is above glibc's largest mmap threshold (32 MiB), so a chunk let go is given back at once.
class ChunkedLaunches {
 public:
  static constexpr size_t kChunk = size_t{1} << 19;

  size_t size() const { return size_; }
  PrimaryLaunch& operator[](size_t i) { return chunks_[i / kChunk][i % kChunk]; }
  void push_back(PrimaryLaunch&& p) {
    if (size_ % kChunk == 0) {
      chunks_.emplace_back();
      chunks_.back().reserve(size_ ? kChunk : 1024);
    }
    chunks_.back().push_back(std::move(p));
    ++size_;
  }

  // Moves every launch into one vector of exactly size() and empties this.
  std::vector<PrimaryLaunch> Take() {
    std::vector<PrimaryLaunch> out;
    out.reserve(size_);
    for (auto& c : chunks_) {
      std::move(c.begin(), c.end(), std::back_inserter(out));
      std::vector<PrimaryLaunch>().swap(c);
    }
    chunks_.clear();
    size_ = 0;
    return out;
  }

 private:
  std::vector<std::vector<PrimaryLaunch>> chunks_;
  size_t size_ = 0;
};

// Sorts `v` by cpu_ns, equal times in their order (what std::stable_sort gives), without its buffer of half
// the launches: launch records come in launch order, so it is usually sorted already; else the order is
// found on indices and applied in place.
void SortByLaunchTime(std::vector<PrimaryLaunch>& v) {
  auto by_time = [](const PrimaryLaunch& a, const PrimaryLaunch& b) { return a.cpu_ns < b.cpu_ns; };
  if (std::is_sorted(v.begin(), v.end(), by_time)) return;
  std::vector<size_t> from(v.size());  // from[i]: the index in v of the launch that goes to i
  for (size_t i = 0; i < from.size(); ++i) from[i] = i;
  std::sort(from.begin(), from.end(),
            [&](size_t a, size_t b) { return v[a].cpu_ns != v[b].cpu_ns ? v[a].cpu_ns < v[b].cpu_ns : a < b; });
  for (size_t i = 0; i < from.size(); ++i) {  // each cycle of the permutation once
    if (from[i] == i) continue;
    PrimaryLaunch held = std::move(v[i]);
    size_t j = i;
    while (from[j] != i) {
      const size_t k = from[j];
      v[j] = std::move(v[k]);
      from[j] = j;
      j = k;
    }
    v[j] = std::move(held);
    from[j] = j;
  }
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
      waiting_[tie].push_back(staged_.size());
    }
    staged_.push_back(std::move(p));
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
      Attach(staged_[w->second.front()], r);
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
        staged_.push_back(std::move(p));
      }
    }
    orphan_kernels_.clear();
    ordered = staged_.Take();
    SortByLaunchTime(ordered);
    for (auto& [id, d] : demangled_) demangled_by_name_.emplace(std::string(reader_.String(id)), d);
    for (auto& p : ordered) {
      auto it = demangled_by_name_.find(p.kernel);
      if (it != demangled_by_name_.end()) p.demangled = it->second;
    }
  }

  std::vector<PrimaryLaunch> ordered;  // the launches by launch time, after Finish
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
  ChunkedLaunches staged_;                                                  // the launches as read
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
    auto sb = std::make_unique<stats::StatsBuilder>();
    sb->set_keep_launches(true);
    ShadowSink ss;
    TeeSink tee(*sb, ss);
    ReadReport rep = sreader->Read(tee);
    ss.Finish();
    m.shadow_side.stats = sb->Finish(sreader->strings(), sreader->header(), rep);
    sb.reset();  // its launch records: the statistics hold what the model takes
    ReleaseFreeMemory();
    m.shadow_side.stats.path = shadow_path;
    m.shadow_side.launches = ss.launch_records;
    Warn(m, "shadow", rep);
    m.shadow.reserve(m.shadow_side.stats.shadow_launches.size());
    for (auto& sl : m.shadow_side.stats.shadow_launches) {
      auto li = ss.launches.find(sl.blocks.seq);
      if (li == ss.launches.end() || !li->second.have_record)
        continue;  // blocks without a launch record: counted by stats
      ShadowSink::Launch& lr = li->second;
      ShadowLaunch s;
      s.seq = sl.blocks.seq;
      s.kernel = sl.kernel;
      s.path = sl.key_path;
      std::string().swap(sl.kernel), std::string().swap(sl.key_path);  // interned now: let the copies go
      s.ordinal = sl.key_ordinal;
      s.hash = sl.key_hash;
      s.grid = sl.grid;
      s.block = lr.block;
      s.cpu_ns = lr.cpu_ns;
      s.stream = lr.stream;
      s.blocks = sl.blocks;
      if (lr.points) s.block_durations = ss.Sample(lr);
      s.block_durations_of = lr.sampled_from;
      ss.launches.erase(li);
      m.shadow.push_back(std::move(s));
    }
    std::vector<stats::ShadowLaunch>().swap(m.shadow_side.stats.shadow_launches);  // and its memory
  }

  ReleaseFreeMemory();  // the shadow read's maps, freed between the samples the model keeps
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
    m.primary = std::move(ps.ordered);
    m.steps = std::move(ps.steps);
    m.primary_t0_ns = ps.t0;
  }
  if (m.shadow.empty())
    m.warnings.push_back("the shadow traced no launch: nothing to join (did the kernel pattern match a kernel?)");

  ReleaseFreeMemory();  // the primary read's maps and chunks
  MatchLaunches(m);
  ReleaseFreeMemory();  // the alignment's working arrays
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
  ReleaseFreeMemory();  // what the views see: the model, not the passes' leftovers
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
