// twinscope stats: what a trace holds, what it lost, top kernels, and the
// block statistics of a shadow trace. Computations live in src/stats.
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "cli/cli_text.h"
#include "cli/command.h"
#include "cli/join_outputs.h"
#include "cli/run_pairs.h"
#include "stats/program_cupti.h"
#include "stats/trace_stats.h"

namespace twinscope::cli {
namespace {

std::string JsonText(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string Tau(double t) {
  if (std::isnan(t)) return "-";
  char buf[16];
  std::snprintf(buf, sizeof buf, "%+.3f", t);
  return buf;
}

std::string Ns(uint64_t ns) { return FormatNs(static_cast<double>(ns)); }

void PrintHeader(const stats::TraceStats& s) {
  const auto& h = s.header;
  std::printf("trace: %s\n", s.path.c_str());
  std::string command;
  if (h.contains("command_line") && h["command_line"].is_array()) {
    for (const auto& a : h["command_line"]) command += (command.empty() ? "" : " ") + JsonText(a);
  }
  std::printf("  role: %s   host: %s   pid: %s\n", s.role.empty() ? "?" : s.role.c_str(),
              JsonText(h.value("host", nlohmann::json("?"))).c_str(),
              JsonText(h.value("pid", nlohmann::json("?"))).c_str());
  std::printf("  command: %s\n", command.empty() ? "?" : command.c_str());
  std::string versions;
  for (const auto& [key, value] : h.items()) {
    if (key.size() > 8 && key.compare(key.size() - 8, 8, "_version") == 0) {
      versions += (versions.empty() ? "" : ", ") + key + " " + JsonText(value);
    }
  }
  if (!versions.empty()) std::printf("  versions: %s\n", versions.c_str());
  const nlohmann::json* devices = nullptr;
  if (s.status.contains("devices"))
    devices = &s.status["devices"];
  else if (h.contains("devices"))
    devices = &h["devices"];
  if (devices && devices->is_array()) {
    for (const auto& d : *devices) {
      if (!d.is_object()) {
        std::printf("  device: %s\n", JsonText(d).c_str());
        continue;
      }
      std::string line = "  device " + JsonText(d.value("ordinal", nlohmann::json("?"))) + ": " +
                         JsonText(d.value("name", nlohmann::json("?")));
      if (d.contains("sm_count")) line += ", " + JsonText(d["sm_count"]) + " SMs";
      if (d.contains("compute_capability")) line += ", compute " + JsonText(d["compute_capability"]);
      if (d.contains("uuid")) line += ", " + JsonText(d["uuid"]);
      std::printf("%s\n", line.c_str());
    }
  } else if (devices) {
    std::printf("  devices: %s\n", JsonText(*devices).c_str());
  }
  if (h.contains("collector")) std::printf("  collector: %s\n", JsonText(h["collector"]).c_str());
  if (h.contains("config")) std::printf("  config: %s\n", JsonText(h["config"]).c_str());
  if (h.contains("cupti_library"))
    std::printf("  cupti: %s%s\n", JsonText(h["cupti_library"]).c_str(),
                h.value("cupti_multi_subscriber", false) ? " (multi-subscriber mode)" : "");
  if (s.status.contains("tool_state")) {
    nlohmann::json state = s.status["tool_state"];
    if (state.is_object()) state.erase("program_cupti");  // said below, in words
    std::printf("  tool state: %s%s%s\n", JsonText(state).c_str(), s.status.contains("tool_message") ? ": " : "",
                s.status.contains("tool_message") ? JsonText(s.status["tool_message"]).c_str() : "");
  }
  if (std::string line = stats::ProgramCuptiSummary(s.status); !line.empty()) std::printf("  %s\n", line.c_str());
}

void PrintRead(const stats::TraceStats& s) {
  std::printf("read: %s, %s chunks, %s records, %s bytes%s\n", ReadEndName(s.report.end),
              FormatCount(s.report.chunks).c_str(), FormatCount(s.report.records).c_str(),
              FormatCount(s.report.bytes).c_str(), s.have_summary ? "" : " (no summary chunk)");
  if (!s.report.message.empty()) std::printf("  %s\n", s.report.message.c_str());
  std::printf("records:");
  for (const auto& [kind, n] : s.counts) std::printf(" %s %s", kind.c_str(), FormatCount(n).c_str());
  std::printf("\n");
}

// One row of the two views: the last counters beside the records in the file.
void Row(const char* label, const std::string& counters, const std::string& file) {
  std::printf("  %-38s %16s %16s\n", label, counters.c_str(), file.c_str());
}

std::string Signed(int64_t v) { return v < 0 ? "-" + FormatCount(static_cast<uint64_t>(-v)) : FormatCount(v); }

// Printed once per trace. With final counters (a summary) the primary's block
// is the counters; otherwise, and always for a shadow, the last counters and
// what the records in the file prove, side by side, and the verdict's basis.
void PrintLoss(const stats::TraceStats& s) {
  const auto& l = s.loss;
  const auto& f = l.file;
  const bool final_counters = l.basis == stats::LossBasis::kCounters && l.counters_final;
  const std::string na = l.have_counters ? "" : "-";
  auto c = [&](uint64_t v) { return l.have_counters ? FormatCount(v) : na; };
  if (!s.shadow && final_counters) {
    std::printf("loss accounting:\n");
    std::printf("  launches seen             %s\n", FormatCount(l.launches_seen).c_str());
    std::printf("  kernel records delivered  %s (in file: %s)\n", FormatCount(l.kernel_records).c_str(),
                FormatCount(l.kernel_records_in_file).c_str());
    std::printf("  missing (seen-delivered)  %lld\n", static_cast<long long>(l.missing));
  } else {
    std::printf("loss accounting (%s):\n",
                l.counters_final  ? "the final counters beside what the records in the file prove"
                : l.have_counters ? "no summary: the last counters beside what the records in the file prove"
                                  : "NO COUNTERS in the trace: only what the records in the file prove");
    Row("", l.counters_final ? "final counters" : "last counters", "records in file");
    if (s.shadow) {
      Row("launches (traced / launch records)", c(l.launches_traced), FormatCount(f.launch_records));
      Row("blocks expected", c(l.blocks_expected), FormatCount(f.blocks_expected));
      Row("blocks recorded", c(l.blocks_recorded), FormatCount(f.blocks_matched));
      Row("blocks missing (expected - recorded)", l.have_counters ? Signed(l.blocks_missing_counters) : na,
          Signed(l.blocks_missing_file));
      if (f.blocks_claimed != f.blocks_matched)
        std::printf(
            "  (the launch records say %s blocks were written: %s of them are not in the file)\n",
            FormatCount(f.blocks_claimed).c_str(),
            f.blocks_claimed > f.blocks_matched ? FormatCount(f.blocks_claimed - f.blocks_matched).c_str() : "none");
    } else {
      Row("launches", c(l.launches_seen), FormatCount(f.launch_records));
      Row("kernel records", c(l.kernel_records), FormatCount(f.kernel_records));
      Row("missing (launches - kernel records)", l.have_counters ? Signed(l.missing_counters) : na,
          Signed(l.missing_file));
      if (l.missing_file < 0)
        std::printf(
            "  (negative: the launch records of the last moments were still in the writer's memory when the "
            "process ended)\n");
    }
    if (l.have_counters && !l.counters_final) {
      const std::string after = FormatCount(f.launch_records_after_status) + " launch, " +
                                (s.shadow ? FormatCount(f.block_records_after_status) + " block"
                                          : FormatCount(f.kernel_records_after_status) + " kernel");
      std::printf("  records after the last status block: %s\n", after.c_str());
    }
  }
  std::printf("  verdict from %s: %s\n",
              l.basis == stats::LossBasis::kFile       ? "the records in the file"
              : l.basis == stats::LossBasis::kCounters ? (l.counters_final ? "the counters" : "the last counters")
                                                       : "nothing",
              l.basis_reason.c_str());
  if (s.shadow) return;  // the probe's other counters follow in its own block
  std::printf("  invalid timestamps        %s kernel, %s memcpy/memset (flagged in file: %s)\n",
              FormatCount(l.invalid_timestamps).c_str(), FormatCount(l.copy_invalid_timestamps).c_str(),
              FormatCount(l.invalid_timestamps_in_file).c_str());
  std::printf("  CUPTI drops               %s\n", FormatCount(l.cupti_dropped).c_str());
  std::printf("  writer cap drops          %s\n", FormatCount(l.writer_dropped).c_str());
  std::printf("  launch key fallbacks      %s (no key: %s)\n", FormatCount(l.key_fallbacks).c_str(),
              FormatCount(l.no_launch_key).c_str());
}

void PrintKernels(const stats::TraceStats& s, size_t top) {
  if (s.kernels.empty()) return;
  std::printf("top kernels by total time (%zu of %zu; invalid timestamps excluded from times):\n",
              std::min(top ? top : s.kernels.size(), s.kernels.size()), s.kernels.size());
  std::printf("  %10s %10s %8s %10s %10s %10s %10s  %s\n", "total", "count", "invalid", "mean", "p50", "p99", "max",
              "name");
  for (size_t i = 0; i < s.kernels.size() && (top == 0 || i < top); ++i) {
    const auto& k = s.kernels[i];
    std::printf("  %10s %10s %8s %10s %10s %10s %10s  %s\n", Ns(k.total_ns).c_str(), FormatCount(k.count).c_str(),
                FormatCount(k.invalid).c_str(), FormatNs(k.mean_ns).c_str(), Ns(k.p50_ns).c_str(), Ns(k.p99_ns).c_str(),
                Ns(k.max_ns).c_str(), k.name.c_str());
  }
}

void PrintDevices(const stats::TraceStats& s) {
  if (s.devices.empty()) return;
  std::printf("devices:\n");
  for (const auto& d : s.devices) {
    std::printf("  device %u: %s kernels (%s of kernel time), %s memcpys (%s), %s memsets (%s), %u streams, span %s\n",
                d.device, FormatCount(d.kernels).c_str(), Ns(d.kernel_ns).c_str(), FormatCount(d.memcpys).c_str(),
                HumanBytes(static_cast<double>(d.memcpy_bytes)).c_str(), FormatCount(d.memsets).c_str(),
                HumanBytes(static_cast<double>(d.memset_bytes)).c_str(), d.streams, Ns(d.last_ns - d.first_ns).c_str());
  }
}

void PrintNvtx(const stats::TraceStats& s, size_t top) {
  if (s.nvtx.empty()) return;
  static const char* kKinds[] = {"?", "push/pop", "start/end", "mark"};
  std::printf("NVTX ranges by total time (%zu of %zu):\n", std::min(top ? top : s.nvtx.size(), s.nvtx.size()),
              s.nvtx.size());
  std::printf("  %10s %10s %10s %9s %-9s  %s\n", "total", "count", "max", "unclosed", "kind", "name");
  for (size_t i = 0; i < s.nvtx.size() && (top == 0 || i < top); ++i) {
    const auto& n = s.nvtx[i];
    std::printf("  %10s %10s %10s %9s %-9s  %s\n", Ns(n.total_ns).c_str(), FormatCount(n.count).c_str(),
                Ns(n.max_ns).c_str(), FormatCount(n.unclosed).c_str(), kKinds[n.kind <= 3 ? n.kind : 0],
                n.name.c_str());
  }
}

void PrintShadow(const stats::TraceStats& s, size_t top) {
  std::printf("block probe counters:");
  for (const auto& [k, v] : s.probe_counters.items()) std::printf(" %s=%s", k.c_str(), JsonText(v).c_str());
  std::printf("\n");
  if (std::string line = SamplingLine(s); !line.empty()) std::printf("%s\n", line.c_str());
  if (s.blocks_without_launch)
    std::printf("  %s block records have no launch record\n", FormatCount(s.blocks_without_launch).c_str());
  std::printf("traced kernels:\n");
  for (const auto& k : s.shadow_kernels) {
    std::printf("  %s\n", k.name.c_str());
    std::printf("    launches %s (incomplete %s), blocks seen %s / expected %s (unique %s), SMs used %u-%u\n",
                FormatCount(k.launches).c_str(), FormatCount(k.launches_incomplete).c_str(),
                FormatCount(k.blocks_seen).c_str(), FormatCount(k.blocks_expected).c_str(),
                FormatCount(k.blocks_unique).c_str(), k.sms_used_min, k.sms_used_max);
    std::printf("    tail (last exit - median exit) p50 %s max %s; span p50 %s max %s; order tau mean %s\n",
                Ns(k.tail_p50_ns).c_str(), Ns(k.tail_max_ns).c_str(), Ns(k.span_p50_ns).c_str(),
                Ns(k.span_max_ns).c_str(), Tau(k.kendall_tau_mean).c_str());
  }
  std::map<std::string, size_t> shown;
  std::printf("traced launches (first %zu per kernel; --json has all):\n", top);
  std::printf("  %8s %13s %5s %12s %10s %7s %16s %16s %20s %10s  %s\n", "seq", "blocks", "SMs", "blk/SM", "inversions",
              "tau", "first(blk@SM)", "last(blk@SM)", "straggler(blk@SM)", "tail", "kernel [key]");
  for (const auto& l : s.shadow_launches) {
    if (top && shown[l.kernel]++ >= top) continue;
    const auto& b = l.blocks;
    auto at = [](const stats::BlockRef& r) { return std::to_string(r.block_linear) + "@" + std::to_string(r.sm); };
    std::string blocks = FormatCount(b.blocks_seen) + "/" + FormatCount(b.blocks_expected);
    std::string per_sm = std::to_string(b.blocks_per_sm_min) + "/" + std::to_string(b.blocks_per_sm_median) + "/" +
                         std::to_string(b.blocks_per_sm_max);
    std::string key = l.key_path.empty() ? "" : " [" + l.key_path + " #" + std::to_string(l.key_ordinal) + "]";
    std::printf("  %8llu %13s %5u %12s %10s %7s %16s %16s %20s %10s  %s%s\n", static_cast<unsigned long long>(b.seq),
                blocks.c_str(), b.sms_used, per_sm.c_str(), FormatCount(b.inversions).c_str(),
                Tau(b.kendall_tau).c_str(), at(b.first).c_str(), at(b.last).c_str(), at(b.straggler).c_str(),
                Ns(b.tail_ns).c_str(), l.kernel.c_str(), key.c_str());
  }
}

struct StatsFlags {
  std::string path;
  bool strict = false;
  bool json = false;
  size_t top = 20;
  std::string join_shadow;
};

// One trace: everything above, or its JSON. Returns the exit code; `json_out`
// (may be null) takes the JSON instead of printing it.
int StatsOnTrace(const std::string& path, const StatsFlags& f, nlohmann::json* json_out) {
  auto stats = stats::ComputeTraceStats(path);
  if (!stats.ok()) {
    std::fprintf(stderr, "twinscope stats: %s\n", stats.status().message().c_str());
    if (json_out) *json_out = {{"path", path}, {"error", stats.status().message()}};
    return 1;
  }
  const auto& s = *stats;
  const auto problems = stats::StrictProblems(s);
  // The last summary taken at twinscope's stop request (the process was stopped after it).
  const bool at_stop = ScanTrace(path).summary_at_stop_request;
  if (f.json) {
    nlohmann::json j = stats::StatsToJson(s, f.top);
    j["summary_at_stop_request"] = at_stop;
    if (json_out)
      *json_out = std::move(j);
    else
      std::printf("%s\n", j.dump(2).c_str());
  } else {
    PrintHeader(s);
    PrintRead(s);
    if (at_stop)
      std::printf("  the summary was written at twinscope's stop request (the process was stopped after it)\n");
    PrintLoss(s);
    PrintKernels(s, f.top);
    PrintDevices(s);
    PrintNvtx(s, f.top);
    if (s.shadow) PrintShadow(s, f.top);
    if (problems.empty()) {
      std::printf("problems: none\n");
    } else {
      std::printf("problems:\n");
      for (const auto& p : problems) std::printf("  - %s\n", p.c_str());
    }
  }
  std::fflush(stdout);
  if (s.report.end == ReadEnd::kCorrupt || s.report.end == ReadEnd::kTruncated) {
    std::fprintf(stderr, "twinscope stats: warning: %s: %s\n", ReadEndName(s.report.end), s.report.message.c_str());
  }
  if (f.strict && !problems.empty()) return 3;
  return s.report.end == ReadEnd::kCorrupt ? 1 : 0;
}

// A run of several traces: a folder, or a trace file with others in FILE.d/. Null for a lone trace.
std::optional<RunListing> RunOf(const std::string& path) {
  auto l = ListRun(path);
  if (!l.ok() || l->twin) return std::nullopt;
  if (l->single_file && l->sides.front().traces.size() <= 1) return std::nullopt;
  return std::move(*l);
}

// Each process's statistics, then a total line (docs/trace-format.md, "Run folders").
int StatsOnRun(const RunListing& run, const StatsFlags& f) {
  const RunSide& side = run.sides.front();
  if (side.traces.empty()) {
    std::fprintf(stderr, "twinscope stats: %s: no trace in this folder\n", run.path.c_str());
    return 1;
  }
  int code = 0;
  nlohmann::json processes = nlohmann::json::array();
  std::set<std::string> hosts;  // a run written by several hosts (docs/processes.md, "Several hosts")
  for (const auto& t : side.traces) hosts.insert(t.process.host);
  uint64_t launches = 0, kernels = 0, traced = 0, blocks = 0, missing = 0, dropped = 0;
  size_t without_work = 0, unclean = 0, damaged = 0;
  for (size_t i = 0; i < side.traces.size(); ++i) {
    const RunTrace& t = side.traces[i];
    const nlohmann::json empty = nlohmann::json::object();
    const nlohmann::json& c =
        t.last_status.contains("counters") && t.last_status["counters"].is_object() ? t.last_status["counters"] : empty;
    auto n = [&](const char* key) { return c.value(key, uint64_t{0}); };
    launches += t.role == "shadow" ? 0 : n("launches_seen");
    kernels += t.kernel_records;
    traced += t.role == "shadow" ? t.launch_records : 0;
    blocks += t.block_records;
    missing += n("kernel_records_missing");
    dropped += n("cupti_dropped_records") + n("writer_dropped_records");
    without_work += t.gpu_work() ? 0 : 1;
    unclean += t.end == "no-summary" ? 1 : 0;
    damaged += t.end == "truncated" || t.end == "corrupt" || t.end == "unreadable" ? 1 : 0;
    if (!t.gpu_work() && t.error.empty()) {
      // Counted, not shown: a process that initialized CUDA and was killed before it launched anything.
      if (f.json) processes.push_back({{"path", t.path}, {"pid", t.process.pid}, {"gpu_work", false}});
      continue;
    }
    int rc = 0;
    if (f.json) {
      nlohmann::json j;
      rc = StatsOnTrace(t.path, f, &j);
      j["process"] = t.header.value("process", nlohmann::json());
      j["gpu_work"] = t.gpu_work();
      processes.push_back(std::move(j));
    } else {
      std::printf("== process %zu of %zu: %s%s\n", i + 1, side.traces.size(), ProcessLabel(t).c_str(),
                  hosts.size() > 1 ? (" on host " + t.process.host).c_str() : "");
      rc = StatsOnTrace(t.path, f, nullptr);
      std::printf("\n");
    }
    code = std::max(code, rc);
  }
  const std::string total =
      "total: " + std::to_string(side.traces.size()) + " processes (" +
      std::to_string(side.traces.size() - without_work) + " with GPU work, " + std::to_string(without_work) +
      " without), " + FormatCount(launches) + " launches, " + FormatCount(kernels) + " kernel records, " +
      FormatCount(traced) + " traced launches, " + FormatCount(blocks) + " blocks; losses: " + FormatCount(missing) +
      " missing, " + FormatCount(dropped) + " dropped; " + std::to_string(unclean) + " without a summary, " +
      std::to_string(damaged) + " damaged" + (hosts.size() > 1 ? "; " + std::to_string(hosts.size()) + " hosts" : "");
  if (f.json) {
    nlohmann::json j = {{"run", run.path},
                        {"processes", processes},
                        {"total",
                         {{"processes", side.traces.size()},
                          {"without_gpu_work", without_work},
                          {"launches", launches},
                          {"kernel_records", kernels},
                          {"traced_launches", traced},
                          {"blocks", blocks},
                          {"missing", missing},
                          {"dropped", dropped},
                          {"without_summary", unclean},
                          {"damaged", damaged},
                          {"hosts", hosts}}}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("run: %s\n%s\n", run.path.c_str(), total.c_str());
  }
  if (f.strict && (missing || dropped || unclean || damaged)) code = std::max(code, 3);
  return code;
}

CommandRegistration kStats(
    "stats", "Summarise a trace: counts, loss accounting, top kernels, devices, NVTX, block statistics",
    [](CLI::App* sub) -> CommandRun {
      auto f = std::make_shared<StatsFlags>();
      sub->add_option("file", f->path,
                      "Trace file (.tsc), a run folder (a trace per process: each, then a total), or a twin folder "
                      "(primary/ and shadow/: the join)")
          ->required();
      sub->add_option("--join", f->join_shadow, "Shadow trace to join with FILE (the primary): show the joined model");
      sub->add_flag("--strict", f->strict,
                    "Exit with code 3 if anything was missing, invalid or dropped, or the read was not complete");
      sub->add_flag("--json", f->json, "Print the statistics as JSON");
      sub->add_option("--top", f->top, "Rows per table (0 = all)")->capture_default_str();
      return [f]() {
        if (!f->join_shadow.empty() || IsJoinFolder(f->path))
          return StatsOnJoin(f->path, f->join_shadow, f->json, f->top);
        if (auto run = RunOf(f->path)) {
          const int code = StatsOnRun(*run, *f);
          // Launcher ranks (torchrun, srun, mpirun): each rank's time per step (docs/processes.md).
          if (!f->json && !run->sides.empty()) PrintRankComparisonOfTraces(run->sides.front());
          return code;
        }
        return StatsOnTrace(f->path, *f, nullptr);
      };
    });

}  // namespace
}  // namespace twinscope::cli
