// Text helpers shared by the CLI's commands: number formatting and the short
// trace summary printed after `record` and `blocks`. Main thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/run_child.h"
#include "format/run_dir.h"
#include "stats/program_cupti.h"
#include "stats/trace_stats.h"

namespace twinscope::cli {

std::string FormatCount(uint64_t n);  // 1234567 -> "1,234,567"
std::string FormatNs(double ns);      // "850 ns", "12.3 us", "4.56 ms", "1.23 s"
std::string SignalName(int sig);      // "SIGKILL"
std::string AbsolutePath(const std::string& path);

// Three lines that sum a trace up (counts, loss or probe counters, top kernel
// or block coverage).
std::vector<std::string> SummaryLines(const stats::TraceStats& s);
// Shadow traces: "sampling: 1 in 10 of 4,000 matching launches traced (every 10; patch toggle: ...)",
// or "" for a trace without the probe's sampling header.
std::string SamplingLine(const stats::TraceStats& s);

// After `record`/`blocks`: says how the program ended, where the traces are
// (`output`: the trace file with its .d/ folder, or a folder ending in '/'),
// and their summary (one trace: its summary lines; several: a line per
// process); warns when there is none or one has no summary. `tool` is the
// collector library's file name (named in the warnings).
void ReportRun(const ChildResult& result, const std::string& output, const std::string& tool);

// "pid 123 (top, rank 0 of 2) python train.py" and, with ProcessLine, what it
// launched and lost, from the run lister's counters (no records read).
std::string ProcessLabel(const RunTrace& t);
std::string ProcessLine(const RunTrace& t);

}  // namespace twinscope::cli
