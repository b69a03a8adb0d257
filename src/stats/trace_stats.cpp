#include "stats/trace_stats.h"

#include <algorithm>
#include <cmath>

#include "base/count_text.h"
#include "stats/program_cupti.h"
#include "twinscope/counters.h"

namespace twinscope::stats {

namespace {

bool Valid(uint64_t start, uint64_t end, uint32_t flags) {
  return !(flags & kFlagInvalidTimestamp) && start != 0 && end != 0 && end >= start;
}

std::string Lookup(const std::unordered_map<StringId, std::string>& strings, StringId id) {
  if (id == 0) return "";
  auto it = strings.find(id);
  return it == strings.end() ? "<string " + std::to_string(id) + ">" : it->second;
}

uint64_t CounterValue(const nlohmann::json& status, const char* name) {
  if (!status.is_object()) return 0;
  auto c = status.find("counters");
  if (c == status.end() || !c->is_object()) return 0;
  auto v = c->find(name);
  if (v == c->end() || !v->is_number_integer()) return 0;
  return v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(std::max<int64_t>(0, v->get<int64_t>()));
}

// A non-negative integer field of a JSON object, or -1.
int64_t NonNegative(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return -1;
  auto v = j.find(key);
  if (v == j.end() || !v->is_number_integer()) return -1;
  return v->is_number_unsigned() ? static_cast<int64_t>(v->get<uint64_t>()) : std::max<int64_t>(-1, v->get<int64_t>());
}

std::string Count(uint64_t n) { return CountText(n); }

// Takes the loss verdict (`missing`, `blocks_missing`) from the final
// counters, or, without a summary, from what the records in the file prove,
// and says why.
void ChooseLossBasis(TraceStats& s) {
  LossAccounting& l = s.loss;
  const FileCounts& f = l.file;
  // Kernel records are written unless the header's config left them out; launch records always are.
  bool kernels_written = true;
  if (s.header.is_object() && s.header.contains("config") && s.header["config"].is_object() &&
      s.header["config"].contains("written_kinds") && s.header["config"]["written_kinds"].is_array()) {
    const auto& kinds = s.header["config"]["written_kinds"];
    kernels_written = std::find(kinds.begin(), kinds.end(), "kernel") != kinds.end();
  }
  const bool file_can_prove = f.launch_records > 0 && (s.shadow || kernels_written);
  const uint64_t after = f.launch_records_after_status + f.kernel_records_after_status + f.block_records_after_status;
  const std::string records = Count(f.launch_records_after_status) + " launch and " +
                              (s.shadow ? Count(f.block_records_after_status) + " block records"
                                        : Count(f.kernel_records_after_status) + " kernel records");
  std::string when;
  if (l.status_after_start_ns >= 0) {
    char buf[48];
    std::snprintf(buf, sizeof buf, " (taken %.2f s after the start)",
                  static_cast<double>(l.status_after_start_ns) / 1e9);
    when = buf;
  }
  if (l.counters_final) {
    l.basis = LossBasis::kCounters;
    l.basis_reason = "the trace has a summary: its counters are final and also count what never reached the file";
  } else if (file_can_prove) {
    l.basis = LossBasis::kFile;
    if (!l.have_counters) {
      l.basis_reason = "the trace has no summary and no status block: only the records in the file can tell";
    } else {
      l.basis_reason =
          "the trace has no summary (the process did not end cleanly), so its counters are the last "
          "status block's" +
          when + (after ? ", older than " + records + " in the file" : "") + ": the records in the file are the proof";
      if (s.shadow && l.launches_traced > f.launch_records)
        l.basis_reason += "; the counters also count at least " + Count(l.launches_traced - f.launch_records) +
                          " traced launches that have no record in the file (in flight at the end: their blocks "
                          "are lost)";
      else if (!s.shadow && l.missing_file > 0)
        l.basis_reason +=
            "; launches without a kernel record are mostly the last ones, whose records were still "
            "in CUPTI's buffers at the end";
    }
  } else if (l.have_counters) {
    l.basis = LossBasis::kCounters;
    l.basis_reason = std::string("the trace has no summary, and its records cannot prove it (") +
                     (f.launch_records == 0 ? "no launch records" : "kernel records were not written") +
                     "): the last counters" + when + " are used, at most one flush period older than the end";
  } else {
    l.basis = LossBasis::kNone;
    l.basis_reason = "the trace holds neither counters nor launch records: loss cannot be told";
  }
  // A shadow (block probe) trace has no kernel records by design: its losses are blocks.
  if (s.shadow) {
    l.missing = 0;
    l.blocks_missing = l.basis == LossBasis::kFile       ? l.blocks_missing_file
                       : l.basis == LossBasis::kCounters ? l.blocks_missing_counters
                                                         : 0;
  } else {
    l.missing = l.basis == LossBasis::kFile ? l.missing_file : l.basis == LossBasis::kCounters ? l.missing_counters : 0;
  }
}

}  // namespace

const char* LossBasisName(LossBasis b) {
  switch (b) {
    case LossBasis::kCounters:
      return "counters";
    case LossBasis::kFile:
      return "file";
    case LossBasis::kNone:
      return "none";
  }
  return "?";
}

StatsBuilder::DeviceAcc& StatsBuilder::Device(uint32_t device) {
  DeviceAcc& d = devices_[device];
  d.s.device = device;
  return d;
}

void StatsBuilder::Activity(DeviceAcc& d, uint32_t stream, uint64_t start, uint64_t end, bool valid) {
  if (std::find(d.streams.begin(), d.streams.end(), stream) == d.streams.end()) d.streams.push_back(stream);
  if (!valid) return;
  if (!d.have_time || start < d.s.first_ns) d.s.first_ns = start;
  if (!d.have_time || end > d.s.last_ns) d.s.last_ns = end;
  d.have_time = true;
}

void StatsBuilder::OnKernel(const KernelRecord& r) {
  ++counts_["kernel"];
  const bool valid = Valid(r.start_ns, r.end_ns, r.flags);
  KernelAcc& k = kernels_[r.demangled ? r.demangled : r.name];
  ++k.count;
  DeviceAcc& d = Device(r.device);
  ++d.s.kernels;
  Activity(d, r.stream, r.start_ns, r.end_ns, valid);
  if (valid) {
    const uint64_t dur = r.end_ns - r.start_ns;
    if (kernel_percentiles_) {
      k.durations.push_back(dur);
    } else {
      ++k.valid, k.total_ns += dur, k.min_ns = std::min(k.min_ns, dur), k.max_ns = std::max(k.max_ns, dur);
    }
    d.s.kernel_ns += r.end_ns - r.start_ns;
  } else {
    ++k.invalid;
    ++invalid_in_file_;
  }
  if (r.flags & kFlagKeyFallback) ++key_fallback_in_file_;
  if (r.flags & kFlagNoLaunchKey) ++no_key_in_file_;
}

void StatsBuilder::OnMemcpy(const MemcpyRecord& r) {
  ++counts_["memcpy"];
  const bool valid = Valid(r.start_ns, r.end_ns, r.flags);
  if (!valid) ++invalid_in_file_;
  DeviceAcc& d = Device(r.device);
  ++d.s.memcpys;
  d.s.memcpy_bytes += r.bytes;
  Activity(d, r.stream, r.start_ns, r.end_ns, valid);
}

void StatsBuilder::OnMemset(const MemsetRecord& r) {
  ++counts_["memset"];
  const bool valid = Valid(r.start_ns, r.end_ns, r.flags);
  if (!valid) ++invalid_in_file_;
  DeviceAcc& d = Device(r.device);
  ++d.s.memsets;
  d.s.memset_bytes += r.bytes;
  Activity(d, r.stream, r.start_ns, r.end_ns, valid);
}

void StatsBuilder::OnApi(const ApiRecord&) { ++counts_["api"]; }

void StatsBuilder::OnNvtx(const NvtxRecord& r) {
  ++counts_["nvtx"];
  NvtxAcc& n = nvtx_[{r.domain, r.name, r.kind}];
  ++n.count;
  if (r.kind == static_cast<uint32_t>(NvtxKind::kMark)) return;
  if (r.end_ns == 0 || r.end_ns < r.start_ns) {
    ++n.unclosed;
    return;
  }
  const uint64_t dur = r.end_ns - r.start_ns;
  n.total_ns += dur;
  n.max_ns = std::max(n.max_ns, dur);
}

void StatsBuilder::OnLaunch(const LaunchRecord& r) {
  ++counts_["launch"];
  launch_blocks_expected_ += uint64_t{r.grid.x} * r.grid.y * r.grid.z;
  launch_blocks_claimed_ += r.blocks_recorded;
  if (keep_launches_) launches_[r.seq] = r;
  // A launch record read after its blocks (their run over): they may be whole now.
  if (keep_launches_ && r.seq != last_block_seq_ && blocks_.count(r.seq)) CompleteIfWhole(r.seq);
}

void StatsBuilder::CompleteIfWhole(uint64_t seq) {
  const auto bi = blocks_.find(seq);
  const auto li = launches_.find(seq);
  if (bi == blocks_.end() || li == launches_.end()) return;
  const Dim3 grid = li->second.grid;
  const uint64_t expected = uint64_t{grid.x} * grid.y * grid.z;
  if (expected == 0 || bi->second.size() != expected) return;
  LaunchBlockStats st = ComputeLaunchBlockStats(seq, grid, bi->second);
  if (st.blocks_unique != expected || st.duplicates || st.out_of_grid) return;  // kept: more may come
  complete_.emplace(seq, st);
  blocks_held_ -= bi->second.size();
  blocks_.erase(bi);
}

namespace {

// A block record of a launch whose blocks were all in (so it is a duplicate, or out of the grid): counted into
// the statistics computed without it.
void AddLateBlock(LaunchBlockStats& s, const BlockRecord& b) {
  ++s.blocks_seen;
  if (s.blocks_expected && b.block_linear >= s.blocks_expected) {
    ++s.out_of_grid;
    ++s.blocks_unique;
  } else {
    ++s.duplicates;
  }
  if (b.enter_ns == 0 || b.exit_ns == 0 || b.exit_ns < b.enter_ns) {
    ++s.invalid_times;
    return;
  }
  if (b.exit_ns > s.straggler.exit_ns) {
    s.straggler = BlockRef{b.block_linear, b.sm, b.order, b.enter_ns, b.exit_ns};
    s.last_exit_ns = b.exit_ns;
  }
  if (b.enter_ns < s.first_enter_ns) s.first_enter_ns = b.enter_ns;
  s.span_ns = s.last_exit_ns - s.first_enter_ns;
  s.tail_ns = s.last_exit_ns - s.median_exit_ns;
  s.block_duration_max_ns = std::max(s.block_duration_max_ns, b.exit_ns - b.enter_ns);
}

}  // namespace

void StatsBuilder::OnBlock(const BlockRecord& r) {
  if (!block_count_) block_count_ = &counts_["block"];
  ++*block_count_;
  keep_launches_ = true;
  // Blocks of one launch come together: look the launch up once per run of them. When a run ends, that
  // launch's statistics are computed if its blocks are all in, and its records dropped.
  if (!last_blocks_ || r.launch_seq != last_block_seq_) {
    if (last_blocks_) {
      last_blocks_ = nullptr;
      CompleteIfWhole(last_block_seq_);
    }
    last_block_seq_ = r.launch_seq;
    if (const auto c = complete_.find(r.launch_seq); c != complete_.end()) {
      ++blocks_after_complete_;
      AddLateBlock(c->second, r);
      return;
    }
    last_blocks_ = &blocks_[r.launch_seq];
  }
  last_blocks_->push_back(r);
  ++blocks_held_;
}

void StatsBuilder::OnStatus(const nlohmann::json& status, bool is_summary) {
  status_ = status;
  counts_at_status_ = counts_;
  if (is_summary) have_summary_ = true;
}

TraceStats StatsBuilder::Finish(const std::unordered_map<StringId, std::string>& strings, const nlohmann::json& header,
                                const ReadReport& report) {
  TraceStats s;
  s.header = header;
  s.report = report;
  s.status = status_;
  s.have_summary = have_summary_;
  s.role = header.is_object() ? header.value("role", "") : "";
  s.counts = counts_;
  for (const char* kind : {"kernel", "memcpy", "memset", "api", "nvtx", "launch", "block"}) s.counts.emplace(kind, 0);

  // Loss accounting (the verdict is taken once the shadow launches are known, below).
  LossAccounting& l = s.loss;
  l.have_counters = status_.is_object() && status_.contains("counters");
  l.counters_final = l.have_counters && have_summary_;
  l.launches_seen = CounterValue(status_, counters::kLaunchesSeen);
  l.kernel_records = CounterValue(status_, counters::kKernelRecords);
  l.kernel_records_in_file = s.counts.at("kernel");
  l.missing_counters = static_cast<int64_t>(l.launches_seen) - static_cast<int64_t>(l.kernel_records);
  l.launches_traced = CounterValue(status_, counters::kLaunchesTraced);
  l.blocks_expected = CounterValue(status_, counters::kBlocksExpected);
  l.blocks_recorded = CounterValue(status_, counters::kBlocksRecorded);
  l.blocks_missing_counters = static_cast<int64_t>(l.blocks_expected) - static_cast<int64_t>(l.blocks_recorded);
  const int64_t taken = NonNegative(status_, "monotonic_ns"), start = NonNegative(header, "start_monotonic_ns");
  if (taken >= 0 && start >= 0 && taken >= start) l.status_after_start_ns = taken - start;
  FileCounts& f = l.file;
  f.launch_records = s.counts.at("launch");
  f.kernel_records = s.counts.at("kernel");
  f.block_records = s.counts.at("block");
  f.blocks_expected = launch_blocks_expected_;
  f.blocks_claimed = launch_blocks_claimed_;
  auto at_status = [&](const char* kind) { return counts_at_status_.count(kind) ? counts_at_status_.at(kind) : 0; };
  f.launch_records_after_status = f.launch_records - at_status("launch");
  f.kernel_records_after_status = f.kernel_records - at_status("kernel");
  f.block_records_after_status = f.block_records - at_status("block");
  l.missing_file = static_cast<int64_t>(f.launch_records) - static_cast<int64_t>(f.kernel_records);
  l.invalid_timestamps = CounterValue(status_, counters::kKernelInvalidTs);
  l.copy_invalid_timestamps = CounterValue(status_, counters::kCopyInvalidTs);
  l.invalid_timestamps_in_file = invalid_in_file_;
  l.cupti_dropped = CounterValue(status_, counters::kCuptiDropped);
  l.writer_dropped = CounterValue(status_, counters::kWriterDropped);
  l.key_fallbacks = std::max(CounterValue(status_, counters::kKernelKeyFallback), key_fallback_in_file_);
  l.no_launch_key = no_key_in_file_;

  // Kernels. Records under different ids with the same name are merged.
  std::map<std::string, std::vector<uint64_t>> durations;
  std::map<std::string, KernelSummary> by_name;
  std::map<std::string, uint64_t> valid_without_percentiles;
  for (auto& [id, acc] : kernels_) {
    std::string name = Lookup(strings, static_cast<StringId>(id));
    if (name.empty()) name = "<unnamed>";
    KernelSummary& k = by_name[name];
    k.name = name;
    k.count += acc.count;
    k.invalid += acc.invalid;
    auto& d = durations[name];
    d.insert(d.end(), acc.durations.begin(), acc.durations.end());
    if (acc.valid) {  // set_kernel_percentiles(false): totals only
      uint64_t& n = valid_without_percentiles[name];
      k.min_ns = n ? std::min(k.min_ns, acc.min_ns) : acc.min_ns;
      k.max_ns = std::max(k.max_ns, acc.max_ns);
      k.total_ns += acc.total_ns;
      n += acc.valid;
    }
  }
  for (auto& [name, k] : by_name) {
    if (auto n = valid_without_percentiles.find(name); n != valid_without_percentiles.end()) {
      k.mean_ns = static_cast<double>(k.total_ns) / static_cast<double>(n->second);
      s.kernels.push_back(std::move(k));
      continue;
    }
    auto& d = durations[name];
    std::sort(d.begin(), d.end());
    for (uint64_t v : d) k.total_ns += v;
    if (!d.empty()) {
      k.min_ns = d.front();
      k.max_ns = d.back();
      k.p50_ns = PercentileSorted(d, 50);
      k.p99_ns = PercentileSorted(d, 99);
      k.mean_ns = static_cast<double>(k.total_ns) / static_cast<double>(d.size());
    }
    s.kernels.push_back(std::move(k));
  }
  std::stable_sort(s.kernels.begin(), s.kernels.end(), [](const KernelSummary& a, const KernelSummary& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.count > b.count;
  });

  for (auto& [dev, acc] : devices_) {
    acc.s.streams = static_cast<uint32_t>(acc.streams.size());
    s.devices.push_back(acc.s);
  }

  for (auto& [key, acc] : nvtx_) {
    auto [domain, name, kind] = key;
    NvtxSummary n;
    std::string dn = Lookup(strings, domain);
    n.name = (dn.empty() ? "" : dn + "::") + Lookup(strings, name);
    n.kind = kind;
    n.count = acc.count;
    n.unclosed = acc.unclosed;
    n.total_ns = acc.total_ns;
    n.max_ns = acc.max_ns;
    s.nvtx.push_back(std::move(n));
  }
  std::stable_sort(s.nvtx.begin(), s.nvtx.end(), [](const NvtxSummary& a, const NvtxSummary& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.count > b.count;
  });

  // Shadow: per launch, then per kernel.
  s.shadow = s.role == "shadow" || !blocks_.empty() || !complete_.empty();
  s.blocks_after_complete = blocks_after_complete_;
  if (s.shadow) {
    for (const counters::CounterInfo& c : counters::kTable)
      if (c.collector != counters::Collector::kCupti) s.probe_counters[std::string(c.name)] = 0;
    if (const auto it = status_.find("counters"); status_.is_object() && it != status_.end() && it->is_object())
      for (const auto& [name, v] : it->items())
        if (const auto* c = counters::Find(name); !c || c->collector != counters::Collector::kCupti)
          s.probe_counters[name] = CounterValue(status_, name.c_str());
    std::vector<uint64_t> seqs;
    for (auto& [seq, l] : launches_) seqs.push_back(seq);
    for (auto& [seq, b] : blocks_) {
      if (!launches_.count(seq)) {
        seqs.push_back(seq);
        s.blocks_without_launch += b.size();
      }
    }
    std::sort(seqs.begin(), seqs.end());
    s.shadow_launches.reserve(seqs.size());
    static const std::vector<BlockRecord> kNone;
    for (uint64_t seq : seqs) {
      ShadowLaunch sl;
      auto li = launches_.find(seq);
      if (li != launches_.end()) {
        const LaunchRecord& lr = li->second;
        sl.have_launch_record = true;
        sl.grid = lr.grid;
        sl.kernel = Lookup(strings, lr.kernel);
        sl.key_path = Lookup(strings, lr.key.path);
        sl.key_ordinal = lr.key.ordinal;
        sl.key_hash = lr.key.hash;
        sl.flags = lr.flags;
        sl.sample_index = lr.sample_index;
      } else {
        sl.kernel = "<launch record missing>";
      }
      if (auto ci = complete_.find(seq); ci != complete_.end()) {
        sl.blocks = ci->second;
        complete_.erase(ci);  // let go as the launches are made
      } else {
        auto bi = blocks_.find(seq);
        sl.blocks = ComputeLaunchBlockStats(seq, sl.grid, bi == blocks_.end() ? kNone : bi->second);
      }
      s.shadow_launches.push_back(std::move(sl));
    }
    blocks_.clear();
    complete_.clear();
    blocks_held_ = 0;
    last_blocks_ = nullptr;

    std::map<std::string, std::vector<const ShadowLaunch*>> per_kernel;
    for (const auto& sl : s.shadow_launches) per_kernel[sl.kernel].push_back(&sl);
    for (auto& [name, list] : per_kernel) {
      ShadowKernelSummary k;
      k.name = name;
      std::vector<uint64_t> tails, spans;
      double tau_sum = 0;
      uint64_t tau_n = 0;
      bool have_sms = false;
      for (const ShadowLaunch* sl : list) {
        const LaunchBlockStats& b = sl->blocks;
        ++k.launches;
        if (b.blocks_unique != b.blocks_expected || b.duplicates || b.out_of_grid) ++k.launches_incomplete;
        k.blocks_expected += b.blocks_expected;
        k.blocks_seen += b.blocks_seen;
        k.blocks_unique += b.blocks_unique;
        if (b.blocks_seen) {
          tails.push_back(b.tail_ns);
          spans.push_back(b.span_ns);
          k.sms_used_min = !have_sms || b.sms_used < k.sms_used_min ? b.sms_used : k.sms_used_min;
          have_sms = true;
          k.sms_used_max = std::max(k.sms_used_max, b.sms_used);
        }
        if (!std::isnan(b.kendall_tau)) {
          tau_sum += b.kendall_tau;
          ++tau_n;
        }
      }
      std::sort(tails.begin(), tails.end());
      std::sort(spans.begin(), spans.end());
      k.tail_p50_ns = PercentileSorted(tails, 50);
      k.tail_max_ns = tails.empty() ? 0 : tails.back();
      k.span_p50_ns = PercentileSorted(spans, 50);
      k.span_max_ns = spans.empty() ? 0 : spans.back();
      k.kendall_tau_mean = tau_n ? tau_sum / static_cast<double>(tau_n) : std::nan("");
      s.shadow_kernels.push_back(std::move(k));
    }
    std::stable_sort(
        s.shadow_kernels.begin(), s.shadow_kernels.end(),
        [](const ShadowKernelSummary& a, const ShadowKernelSummary& b) { return a.launches > b.launches; });
    for (const auto& sl : s.shadow_launches)
      if (sl.have_launch_record)
        l.file.blocks_matched += std::min(sl.blocks.blocks_unique - sl.blocks.out_of_grid, sl.blocks.blocks_expected);
  }
  l.blocks_missing_file = static_cast<int64_t>(l.file.blocks_expected) - static_cast<int64_t>(l.file.blocks_matched);
  ChooseLossBasis(s);
  return s;
}

StatusOr<TraceStats> ComputeTraceStats(const std::string& path) {
  std::string error;
  auto reader = TraceReader::Open(path, &error);
  if (!reader) return Status::Error(error);
  StatsBuilder builder;
  builder.set_keep_launches(reader->header().is_object() && reader->header().value("role", "") == "shadow");
  ReadReport report = reader->Read(builder);
  TraceStats s = builder.Finish(reader->strings(), reader->header(), report);
  s.path = path;
  return s;
}

std::vector<LossFinding> LossFindings(const TraceStats& s) {
  using counters::Severity;
  std::vector<LossFinding> out;
  auto add = [&](std::string name, uint64_t value, Severity severity, std::string text) {
    if (value) out.push_back({std::move(name), value, severity, std::move(text)});
  };
  const LossAccounting& l = s.loss;
  for (const counters::CounterInfo& c : counters::kTable) {
    if (!counters::IsLoss(c.severity)) continue;
    const uint64_t v = CounterValue(s.status, std::string(c.name).c_str());
    add(std::string(c.name), v, c.severity,
        std::to_string(v) + " " + std::string(c.help) + " (" + std::string(c.name) + ")");
  }
  // What the file shows beyond the counters.
  if (!s.shadow && l.missing > 0)
    add("launches_without_kernel_record", static_cast<uint64_t>(l.missing), Severity::kDataLoss,
        std::to_string(l.missing) + (l.basis == LossBasis::kFile
                                         ? " launch records in the file without a kernel record in the file"
                                         : " kernel launches seen without a kernel record"));
  if (!l.invalid_timestamps && !l.copy_invalid_timestamps)
    add("records_invalid_timestamp_in_file", l.invalid_timestamps_in_file, Severity::kDataLoss,
        std::to_string(l.invalid_timestamps_in_file) + " records in the file flagged with invalid timestamps");
  if (s.shadow) {
    if (l.blocks_missing > 0)
      add("blocks_not_recorded", static_cast<uint64_t>(l.blocks_missing), Severity::kDataLoss,
          std::to_string(l.blocks_missing) + " blocks of the traced launches without a block record (" +
              LossBasisName(l.basis) + ")");
    uint64_t incomplete = 0, duplicates = 0, invalid = 0;
    for (const auto& sl : s.shadow_launches) {
      const auto& b = sl.blocks;
      if (b.blocks_unique != b.blocks_expected || b.out_of_grid) ++incomplete;
      duplicates += b.duplicates;
      invalid += b.invalid_times;
    }
    add("launches_incomplete", incomplete, Severity::kDataLoss,
        std::to_string(incomplete) + " traced launches without exactly one record per block");
    add("block_records_duplicate", duplicates, Severity::kDataLoss,
        std::to_string(duplicates) + " duplicate block records");
    add("block_records_invalid_times", invalid, Severity::kDataLoss,
        std::to_string(invalid) + " block records with invalid times");
    add("block_records_without_launch", s.blocks_without_launch, Severity::kDataLoss,
        std::to_string(s.blocks_without_launch) + " block records without their launch record");
  }
  if (const auto it = s.status.find("counters"); s.status.is_object() && it != s.status.end() && it->is_object())
    for (const auto& [name, v] : it->items())
      if (!counters::Find(name))
        add(name, CounterValue(s.status, name.c_str()), Severity::kInfo,
            "counter " + name + " = " + std::to_string(CounterValue(s.status, name.c_str())) +
                ": not known to this twinscope (a newer writer's), shown, not counted as a loss");
  return out;
}

std::vector<std::string> StrictProblems(const TraceStats& s) {
  std::vector<std::string> p;
  if (s.report.end != ReadEnd::kComplete) {
    p.push_back(std::string("read not complete (") + ReadEndName(s.report.end) + ")" +
                (s.report.message.empty() ? "" : ": " + s.report.message));
  }
  if (!s.loss.have_counters) p.push_back("the trace holds no counters: loss cannot be checked");
  for (LossFinding& f : LossFindings(s))
    if (counters::IsLoss(f.severity)) p.push_back(std::move(f.text));
  for (std::string& q : ProgramCuptiProblems(s.status)) p.push_back(std::move(q));
  return p;
}

namespace {

nlohmann::json Num(double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); }

nlohmann::json BlockRefJson(const BlockRef& b) {
  return {
      {"block", b.block_linear}, {"sm", b.sm}, {"order", b.order}, {"enter_ns", b.enter_ns}, {"exit_ns", b.exit_ns}};
}

}  // namespace

nlohmann::json StatsToJson(const TraceStats& s, size_t top) {
  using nlohmann::json;
  json j;
  j["path"] = s.path;
  j["header"] = s.header;
  j["role"] = s.role;
  j["read"] = {{"end", ReadEndName(s.report.end)}, {"ok", s.report.ok()},         {"message", s.report.message},
               {"chunks", s.report.chunks},        {"records", s.report.records}, {"bytes", s.report.bytes}};
  j["have_summary"] = s.have_summary;
  j["status"] = s.status;
  j["counts"] = s.counts;
  const LossAccounting& l = s.loss;
  j["loss"] = {{"have_counters", l.have_counters},
               {"launches_seen", l.launches_seen},
               {"kernel_records", l.kernel_records},
               {"kernel_records_in_file", l.kernel_records_in_file},
               {"missing", l.missing},
               {"invalid_timestamps", l.invalid_timestamps},
               {"copy_invalid_timestamps", l.copy_invalid_timestamps},
               {"invalid_timestamps_in_file", l.invalid_timestamps_in_file},
               {"cupti_dropped", l.cupti_dropped},
               {"writer_dropped", l.writer_dropped},
               {"key_fallbacks", l.key_fallbacks},
               {"no_launch_key", l.no_launch_key},
               {"basis", LossBasisName(l.basis)},
               {"basis_reason", l.basis_reason}};
  // Both views side by side: the last counters and what the records in the file prove.
  const FileCounts& f = l.file;
  json counters = {{"present", l.have_counters},
                   {"final", l.counters_final},
                   {"taken_after_start_ns", l.status_after_start_ns >= 0 ? json(l.status_after_start_ns) : json()}};
  json file = {{"launch_records", f.launch_records}};
  if (s.shadow) {
    j["loss"]["blocks_missing"] = l.blocks_missing;
    counters.update({{"launches_traced", l.launches_traced},
                     {"blocks_expected", l.blocks_expected},
                     {"blocks_recorded", l.blocks_recorded},
                     {"blocks_missing", l.blocks_missing_counters}});
    file.update(
        {{"block_records", f.block_records},
         {"blocks_expected", f.blocks_expected},
         {"blocks_claimed_by_launch_records", f.blocks_claimed},
         {"blocks_matched", f.blocks_matched},
         {"blocks_missing", l.blocks_missing_file},
         {"blocks_without_launch_record", s.blocks_without_launch},
         {"after_last_status",
          {{"launch_records", f.launch_records_after_status}, {"block_records", f.block_records_after_status}}}});
  } else {
    counters.update(
        {{"launches_seen", l.launches_seen}, {"kernel_records", l.kernel_records}, {"missing", l.missing_counters}});
    file.update(
        {{"kernel_records", f.kernel_records},
         {"missing", l.missing_file},
         {"after_last_status",
          {{"launch_records", f.launch_records_after_status}, {"kernel_records", f.kernel_records_after_status}}}});
  }
  j["loss"]["counters"] = counters;
  j["loss"]["file"] = file;
  json findings = json::array();
  for (const LossFinding& x : LossFindings(s))
    findings.push_back({{"name", x.name},
                        {"value", x.value},
                        {"severity", twinscope::counters::SeverityName(x.severity)},
                        {"text", x.text}});
  j["loss"]["findings"] = std::move(findings);
  json kernels = json::array();
  for (size_t i = 0; i < s.kernels.size() && (top == 0 || i < top); ++i) {
    const auto& k = s.kernels[i];
    kernels.push_back({{"name", k.name},
                       {"count", k.count},
                       {"invalid", k.invalid},
                       {"total_ns", k.total_ns},
                       {"mean_ns", k.mean_ns},
                       {"min_ns", k.min_ns},
                       {"p50_ns", k.p50_ns},
                       {"p99_ns", k.p99_ns},
                       {"max_ns", k.max_ns}});
  }
  j["kernels"] = kernels;
  j["kernel_names"] = s.kernels.size();
  json devices = json::array();
  for (const auto& d : s.devices) {
    devices.push_back({{"device", d.device},
                       {"kernels", d.kernels},
                       {"memcpys", d.memcpys},
                       {"memsets", d.memsets},
                       {"kernel_ns", d.kernel_ns},
                       {"memcpy_bytes", d.memcpy_bytes},
                       {"memset_bytes", d.memset_bytes},
                       {"first_ns", d.first_ns},
                       {"last_ns", d.last_ns},
                       {"streams", d.streams}});
  }
  j["devices"] = devices;
  json nvtx = json::array();
  for (size_t i = 0; i < s.nvtx.size() && (top == 0 || i < top); ++i) {
    const auto& n = s.nvtx[i];
    nvtx.push_back({{"name", n.name},
                    {"kind", n.kind},
                    {"count", n.count},
                    {"unclosed", n.unclosed},
                    {"total_ns", n.total_ns},
                    {"max_ns", n.max_ns}});
  }
  j["nvtx"] = nvtx;
  j["shadow"] = s.shadow;
  if (s.shadow) {
    json sk = json::array();
    for (const auto& k : s.shadow_kernels) {
      sk.push_back({{"name", k.name},
                    {"launches", k.launches},
                    {"launches_incomplete", k.launches_incomplete},
                    {"blocks_expected", k.blocks_expected},
                    {"blocks_seen", k.blocks_seen},
                    {"blocks_unique", k.blocks_unique},
                    {"tail_p50_ns", k.tail_p50_ns},
                    {"tail_max_ns", k.tail_max_ns},
                    {"span_p50_ns", k.span_p50_ns},
                    {"span_max_ns", k.span_max_ns},
                    {"sms_used_min", k.sms_used_min},
                    {"sms_used_max", k.sms_used_max},
                    {"kendall_tau_mean", Num(k.kendall_tau_mean)}});
    }
    j["shadow_kernels"] = sk;
    json launches = json::array();
    for (const auto& sl : s.shadow_launches) {
      const auto& b = sl.blocks;
      launches.push_back(
          {{"seq", b.seq},
           {"kernel", sl.kernel},
           {"have_launch_record", sl.have_launch_record},
           {"key_path", sl.key_path},
           {"key_ordinal", sl.key_ordinal},
           {"key_hash", sl.key_hash},
           {"grid", {sl.grid.x, sl.grid.y, sl.grid.z}},
           {"graph_node", (sl.flags & kFlagGraph) != 0},
           {"sample_index", sl.sample_index},
           {"blocks_expected", b.blocks_expected},
           {"blocks_seen", b.blocks_seen},
           {"blocks_unique", b.blocks_unique},
           {"duplicates", b.duplicates},
           {"out_of_grid", b.out_of_grid},
           {"invalid_times", b.invalid_times},
           {"sms_used", b.sms_used},
           {"blocks_per_sm",
            {{"min", b.blocks_per_sm_min}, {"median", b.blocks_per_sm_median}, {"max", b.blocks_per_sm_max}}},
           {"inversions", b.inversions},
           {"kendall_tau", Num(b.kendall_tau)},
           {"first", BlockRefJson(b.first)},
           {"last", BlockRefJson(b.last)},
           {"straggler", BlockRefJson(b.straggler)},
           {"span_ns", b.span_ns},
           {"tail_ns", b.tail_ns},
           {"median_exit_ns", b.median_exit_ns},
           {"block_duration_p50_ns", b.block_duration_p50_ns},
           {"block_duration_max_ns", b.block_duration_max_ns}});
    }
    j["shadow_launches"] = launches;
    j["blocks_without_launch"] = s.blocks_without_launch;
    if (s.blocks_after_complete) j["blocks_after_complete"] = s.blocks_after_complete;
    j["probe_counters"] = s.probe_counters;
  }
  auto problems = StrictProblems(s);
  j["problems"] = problems;
  return j;
}

}  // namespace twinscope::stats
