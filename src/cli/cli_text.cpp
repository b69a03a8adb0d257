#include "cli/cli_text.h"

#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "base/count_text.h"
#include "twinscope/counters.h"

namespace twinscope::cli {

std::string FormatCount(uint64_t n) { return CountText(n); }

std::string FormatNs(double ns) {
  char buf[32];
  if (std::isnan(ns)) return "-";
  if (ns < 1e3) {
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  } else if (ns < 1e6) {
    std::snprintf(buf, sizeof buf, "%.3g us", ns / 1e3);
  } else if (ns < 1e9) {
    std::snprintf(buf, sizeof buf, "%.3g ms", ns / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f s", ns / 1e9);
  }
  return buf;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string AbsolutePath(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return path;
  return std::string(cwd) + "/" + path;
}

std::string SamplingLine(const stats::TraceStats& s) {
  const auto h = s.header.find("sampling");
  if (h == s.header.end() || !h->is_object()) return "";
  auto c = [&](const char* name) { return s.probe_counters.value(name, uint64_t{0}); };
  const uint64_t matching = c(counters::kLaunchesMatching), traced = c(counters::kLaunchesTraced);
  std::string line = "sampling: ";
  if (traced == 0) {
    line += "none";
  } else {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.3g", double(matching) / double(traced));
    line += "1 in " + std::string(ratio);
  }
  line += " of " + FormatCount(matching) + " matching launches traced (";
  std::vector<std::string> how;
  if (h->value("every", uint64_t{1}) > 1) how.push_back("every " + std::to_string(h->value("every", uint64_t{1})));
  if (h->value("max_launches", uint64_t{0}) > 0)
    how.push_back("max " + std::to_string(h->value("max_launches", uint64_t{0})));
  char buf[64];
  if (h->value("per_second", 0.0) > 0) {
    std::snprintf(buf, sizeof buf, "at most %g/s", h->value("per_second", 0.0));
    how.push_back(buf);
  }
  if (h->value("budget_pct", 0.0) > 0) {
    std::snprintf(buf, sizeof buf, "budget %g%%", h->value("budget_pct", 0.0));
    std::string b = buf;
    if (const uint64_t program = c(counters::kSamplingProgramNs)) {
      std::snprintf(buf, sizeof buf, ", used %.2f%%", 100.0 * double(c(counters::kSamplingCostNs)) / double(program));
      b += buf;
    }
    how.push_back(b);
  }
  const std::string patch = h->value("patch", std::string("always"));
  std::string p = "patch " + patch;
  if (patch == "toggle")
    p += ": re-patched " + FormatCount(c(counters::kModulesRepatched)) + ", unpatched " +
         FormatCount(c(counters::kModulesUnpatched)) + ", " + FormatNs(double(c(counters::kToggleNs))) +
         " toggling; due while unpatched " + FormatCount(c(counters::kLaunchesSampledUnpatched));
  if (const uint64_t pinned = c(counters::kModulesPinnedByGraph))
    p += "; " + FormatCount(pinned) +
         " module(s) patched for good by CUDA graphs (every launch of their kernels "
         "pays the patch" +
         (h->value("budget_pct", 0.0) > 0 ? ", beyond the budget's reach)" : ")");
  if (const uint64_t unpatched = c(counters::kModulesPinnedUnpatched))
    p += "; " + FormatCount(unpatched) + " module(s) left unpatched for good by CUDA graphs (not traced)";
  how.push_back(p);
  for (size_t i = 0; i < how.size(); ++i) line += (i ? "; " : "") + how[i];
  return line + ")";
}

std::vector<std::string> SummaryLines(const stats::TraceStats& s) {
  std::vector<std::string> lines;
  auto count = [&](const char* kind) { return FormatCount(s.counts.count(kind) ? s.counts.at(kind) : 0); };
  const std::string read = std::string("read: ") + ReadEndName(s.report.end);
  if (s.shadow) {
    lines.push_back("records: " + count("launch") + " traced launches, " + count("block") + " blocks (" + read + ")");
    auto c = [&](const char* name) { return FormatCount(s.probe_counters.value(name, uint64_t{0})); };
    lines.push_back("probe: launches traced " + c("launches_traced") + ", skipped by sampling " +
                    c("launches_skipped_by_sampling") + "; blocks expected " + c("blocks_expected") + ", recorded " +
                    c("blocks_recorded") + ", overflow " + c("blocks_overflow"));
    if (std::string line = SamplingLine(s); !line.empty()) lines.push_back(line);
    uint64_t complete = 0, incomplete = 0;
    for (const auto& l : s.shadow_launches) {
      (l.blocks.blocks_unique == l.blocks.blocks_expected && !l.blocks.duplicates ? complete : incomplete)++;
    }
    std::string line =
        "launches with every block recorded: " + FormatCount(complete) + ", incomplete: " + FormatCount(incomplete);
    if (!s.shadow_kernels.empty()) {
      const auto& k = s.shadow_kernels.front();
      line += "; " + k.name + ": tail p50 " + FormatNs(static_cast<double>(k.tail_p50_ns)) + ", max " +
              FormatNs(static_cast<double>(k.tail_max_ns));
    }
    lines.push_back(line);
    return lines;
  }
  lines.push_back("records: " + count("kernel") + " kernels, " + count("memcpy") + " memcpys, " + count("memset") +
                  " memsets, " + count("api") + " API calls, " + count("nvtx") + " NVTX (" + read + ")");
  const auto& l = s.loss;
  if (l.basis == stats::LossBasis::kFile) {
    // No summary: the records prove more than the last counters (see `twinscope stats`).
    lines.push_back("loss (no summary; from the records in the file): launch records " +
                    FormatCount(l.file.launch_records) + ", kernel records " + FormatCount(l.file.kernel_records) +
                    ", missing " + std::to_string(l.missing) + "; last counters: launches seen " +
                    FormatCount(l.launches_seen) + ", kernel records " + FormatCount(l.kernel_records) + ", dropped " +
                    FormatCount(l.cupti_dropped) + " (CUPTI) + " + FormatCount(l.writer_dropped) + " (writer)");
  } else if (l.have_counters) {
    lines.push_back("loss: launches seen " + FormatCount(l.launches_seen) + ", kernel records " +
                    FormatCount(l.kernel_records) + ", missing " + std::to_string(l.missing) + ", invalid timestamps " +
                    FormatCount(l.invalid_timestamps + l.copy_invalid_timestamps) + ", dropped " +
                    FormatCount(l.cupti_dropped) + " (CUPTI) + " + FormatCount(l.writer_dropped) + " (writer)");
  } else {
    lines.push_back("loss: unknown (the trace holds no counters)");
  }
  if (!s.kernels.empty()) {
    const auto& k = s.kernels.front();
    lines.push_back("top kernel: " + k.name + ": " + FormatCount(k.count) + " launches, total " +
                    FormatNs(static_cast<double>(k.total_ns)) + ", p50 " + FormatNs(static_cast<double>(k.p50_ns)) +
                    ", p99 " + FormatNs(static_cast<double>(k.p99_ns)));
  } else {
    lines.push_back("top kernel: none recorded");
  }
  if (std::string own = stats::ProgramCuptiSummary(s.status); !own.empty()) lines.push_back(own);
  return lines;
}

std::string ProcessLabel(const RunTrace& t) {
  const ProcessInfo& p = t.process;
  std::string who = "pid " + std::to_string(p.pid);
  std::vector<std::string> tags;
  if (p.top) tags.push_back("top");
  if (p.rank) {
    std::string r = "rank " + std::to_string(*p.rank);
    if (p.world_size) r += " of " + std::to_string(*p.world_size);
    tags.push_back(r);
  }
  for (size_t i = 0; i < tags.size(); ++i) who += (i ? ", " : " (") + tags[i] + (i + 1 == tags.size() ? ")" : "");
  std::string command = p.Command();
  if (command.size() > 60) command = command.substr(0, 57) + "...";
  return who + " " + (command.empty() ? "?" : command);
}

std::string ProcessLine(const RunTrace& t) {
  if (!t.error.empty() && t.end == "unreadable") return ProcessLabel(t) + ": unreadable: " + t.error;
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& c =
      t.last_status.contains("counters") && t.last_status["counters"].is_object() ? t.last_status["counters"] : empty;
  auto n = [&](const char* key) { return c.value(key, uint64_t{0}); };
  std::string line = ProcessLabel(t) + ": ";
  if (t.role == "shadow") {
    line += FormatCount(t.launch_records) + " traced launches, " + FormatCount(t.block_records) +
            " blocks; losses: " + FormatCount(n(counters::kBlocksOverflow)) + " blocks overflow, " +
            FormatCount(n(counters::kBlocksLost)) + " lost, " + FormatCount(n(counters::kWriterDropped)) +
            " records dropped";
  } else {
    line += FormatCount(n(counters::kLaunchesSeen)) + " launches, " + FormatCount(t.kernel_records) +
            " kernel records; losses: " + FormatCount(n(counters::kKernelRecordsMissing)) + " missing, " +
            FormatCount(n(counters::kCuptiDropped) + n(counters::kWriterDropped)) + " dropped";
  }
  if (t.end != "complete") line += "; " + t.end + (t.end == "no-summary" ? " (did not shut down cleanly)" : "");
  if (t.summary_at_stop_request) line += "; summary taken at the stop request";
  if (!t.gpu_work()) line += "; no GPU work";
  return line;
}

void ReportRun(const ChildResult& result, const std::string& output, const std::string& tool) {
  if (result.term_signal) {
    std::fprintf(stderr, "twinscope: the program was killed by %s after %.1fs\n",
                 SignalName(result.term_signal).c_str(), result.elapsed_s);
  } else {
    std::fprintf(stderr, "twinscope: the program exited with code %d after %.1fs\n", result.exit_code,
                 result.elapsed_s);
  }
  auto listing = ListRun(output);
  if (!listing.ok() || listing->sides.empty() || listing->sides[0].traces.empty()) {
    std::fprintf(stderr,
                 "twinscope: warning: no trace was written to %s: no process launched GPU work. Either the program "
                 "made no CUDA calls, or %s could not be loaded (look for 'twinscope:' messages above)\n",
                 output.c_str(), tool.c_str());
    return;
  }
  const RunSide& side = listing->sides[0];
  if (side.traces.size() > 1) {
    std::fprintf(stderr, "twinscope: %zu processes wrote traces (%zu with GPU work), in %s:\n", side.traces.size(),
                 side.WithGpuWork(),
                 listing->single_file ? (output + " and " + output + ".d/").c_str() : output.c_str());
    for (const auto& t : side.traces) std::fprintf(stderr, "  %s\n    %s\n", ProcessLine(t).c_str(), t.path.c_str());
    std::fprintf(stderr, "twinscope: details: twinscope stats %s\n", output.c_str());
    return;
  }
  const std::string trace_path = side.traces[0].path;
  struct stat st {};
  stat(trace_path.c_str(), &st);
  auto stats = stats::ComputeTraceStats(trace_path);
  if (!stats.ok()) {
    std::fprintf(stderr, "twinscope: warning: the trace cannot be read: %s\n", stats.status().message().c_str());
    return;
  }
  std::fprintf(stderr, "twinscope: trace written to %s (%s)\n", trace_path.c_str(),
               HumanBytes(static_cast<double>(st.st_size)).c_str());
  for (const auto& line : SummaryLines(*stats)) std::fprintf(stderr, "  %s\n", line.c_str());
  if (stats->report.end != ReadEnd::kComplete) {
    std::fprintf(stderr,
                 "twinscope: warning: the trace has no summary or is damaged (%s%s%s): the collector did not shut "
                 "down cleanly, so the counts above may be incomplete\n",
                 ReadEndName(stats->report.end), stats->report.message.empty() ? "" : ": ",
                 stats->report.message.c_str());
  }
  std::fprintf(stderr, "twinscope: details: twinscope stats %s\n", trace_path.c_str());
}

}  // namespace twinscope::cli
