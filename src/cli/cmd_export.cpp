// twinscope export: write a trace, or a twin/join folder's joined run, as
// Chrome trace-event JSON, a Perfetto protobuf trace or SQLite.
#include <sys/stat.h>

#include <cstdio>

#include "cli/cli_text.h"
#include "cli/command.h"
#include "cli/join_outputs.h"
#include "cli/perfetto_run.h"
#include "cli/run_pairs.h"
#include "views/export/export.h"
#include "views/export/join/block_detail.h"
#include "views/export/join/join_export.h"

namespace twinscope::cli {
namespace {

struct ExportFlags {
  std::string path;
  std::string format;
  std::string output;
  size_t max_block_launches = 0;  // 0 = the format's default
  uint64_t max_blocks = 0;
  bool trace_only = false;  // FILE alone, not the traces in FILE.d/
};

// A twin/join folder (primary.tsc + shadow.tsc): joins, then writes the view.
StatusOr<exporters::ExportResult> ExportJoin(const ExportFlags& f, exporters::BlockBounds bounds,
                                             exporters::BlockDetailCounts* counts) {
  auto primary = MainTraceOf(f.path, "primary", "twinscope export");
  if (!primary.ok()) return primary.status();
  auto shadow = MainTraceOf(f.path, "shadow", "twinscope export");
  if (!shadow.ok()) return shadow.status();
  // The saved model where it is there and fresh (else a join: one pass over each trace), the primary's records
  // in one pass, the view's blocks in one over the shadow (docs/join.md, "Reads").
  join::JoinedRun joined;
  bool have_records = false;
  auto model = SavedOrJoined(f.path, *primary, *shadow, "twinscope export", &joined.primary, &have_records);
  if (!model.ok()) return model.status();
  joined.model = std::move(*model);
  if (!have_records) {
    if (Status s = join::ReadRecordLog(*primary, &joined.primary); !s.ok()) return s;
  }
  auto* run = &joined;
  if (f.format == "sqlite") {
    // The main pair's join, with the run's rank comparison where it has one (processes.json), as join.sqlite.
    auto r = exporters::ExportJoinSqlite(run, f.output);
    if (!r.ok()) return r;
    if (Status ranks = AddRunRanksToDatabase(f.path, f.output); !ranks.ok()) r->warnings.push_back(ranks.message());
    return r;
  }
  join::ReadDetail(run, exporters::PlanBlocks(run->model, bounds).drawn_seqs);
  auto r = f.format == "perfetto" ? exporters::ExportJoinPerfetto(*run, f.output, bounds)
                                  : exporters::ExportJoinChrome(*run, f.output, bounds);
  if (!r.ok()) return r.status();
  *counts = r->blocks;
  return static_cast<exporters::ExportResult>(*r);
}

// A run of several processes that is not a twin folder: a folder of traces (one side of a twin
// folder included) or a trace file with others' traces in FILE.d/. With one trace with GPU work, that
// trace becomes f->path (exported as a lone trace); with several, *merged gets them all
// (docs/processes.md, "Every process in one view").
Status PickTracesOfRun(ExportFlags* f, std::vector<exporters::RunProcess>* merged) {
  struct stat st {};
  const bool folder = stat(f->path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (!folder && (f->trace_only || stat((f->path + ".d").c_str(), &st) != 0)) return Status::Ok();  // a lone trace
  auto l = ListRun(f->path);
  if (!l.ok()) return l.status();
  size_t without_work = 0;
  std::vector<std::string> unreadable;
  auto processes = exporters::RunProcesses(l->sides.front(), &without_work, &unreadable);
  for (const auto& e : unreadable)
    std::fprintf(stderr, "twinscope export: warning: left out, its header cannot be read: %s\n", e.c_str());
  if (processes.empty()) {
    if (!folder) return Status::Ok();  // the trace file exports as it is, and says what it holds
    return Status::Error(l->path + ": no trace with GPU work in this folder");
  }
  if (processes.size() == 1) {
    if (processes.front().trace != f->path)
      std::fprintf(stderr, "twinscope export: %s: its one trace with GPU work, %s\n", l->path.c_str(),
                   processes.front().trace.c_str());
    f->path = processes.front().trace;
    return Status::Ok();
  }
  std::fprintf(stderr, "twinscope export: %s: %zu processes with GPU work in one file%s; clocks: %s\n", l->path.c_str(),
               processes.size(),
               without_work ? (" (" + std::to_string(without_work) + " without GPU work left out)").c_str() : "",
               exporters::AlignmentText(processes).c_str());
  *merged = std::move(processes);
  return Status::Ok();
}

CommandRegistration kExport(
    "export",
    "Export a trace or a twin folder as Chrome trace-event JSON, a Perfetto trace (ui.perfetto.dev) or SQLite",
    [](CLI::App* sub) -> CommandRun {
      auto f = std::make_shared<ExportFlags>();
      sub->add_option("file", f->path,
                      "Trace file (.tsc; with FILE.d/, every process), a run folder (every process with GPU work in "
                      "one file), or a twin folder (primary/ and shadow/): the joined run")
          ->required();
      sub->add_option("--format", f->format,
                      "chrome (JSON for chrome://tracing / ui.perfetto.dev), perfetto (protobuf with interned names: "
                      "much smaller) or sqlite")
          ->required()
          ->check(CLI::IsMember({"chrome", "perfetto", "sqlite"}));
      sub->add_option("-o,--output", f->output, "File to write (replaced if it exists)")->required();
      sub->add_option("--max-block-launches", f->max_block_launches,
                      "Most launches drawn with every block (perfetto: 1000, chrome: 200)");
      sub->add_option("--max-blocks", f->max_blocks, "Most blocks drawn (perfetto: 1000000, chrome: 100000)");
      sub->add_flag("--trace-only", f->trace_only,
                    "Export FILE alone, not the other processes' traces beside it in FILE.d/");
      return [f]() {
        exporters::BlockBounds bounds =
            f->format == "chrome" ? exporters::kChromeBlockBounds : exporters::kPerfettoBlockBounds;
        if (f->max_block_launches) bounds.max_launches = f->max_block_launches;
        if (f->max_blocks) bounds.max_blocks = f->max_blocks;
        const bool joined = IsJoinFolder(f->path);
        std::vector<exporters::RunProcess> merged;  // several processes: every one in one file
        if (!joined) {
          if (Status st = PickTracesOfRun(f.get(), &merged); !st.ok()) {
            std::fprintf(stderr, "twinscope export: %s\n", st.message().c_str());
            return 1;
          }
        }
        exporters::BlockDetailCounts counts;
        StatusOr<exporters::ExportResult> result = Status::Error("");
        if (!merged.empty()) {
          if (f->format == "perfetto") {
            auto r = ExportPerfettoRun(merged, f->output, bounds);
            if (r.ok()) counts = r->blocks;
            result = r.ok() ? StatusOr<exporters::ExportResult>(static_cast<exporters::ExportResult>(*r)) : r.status();
          } else {
            result = f->format == "chrome" ? exporters::ExportChromeRun(merged, f->output)
                                           : exporters::ExportSqliteRun(merged, f->output);
          }
        } else if (joined) {
          result = ExportJoin(*f, bounds, &counts);
        } else if (f->format == "perfetto") {
          auto r = exporters::ExportPerfetto(f->path, f->output, bounds);
          if (r.ok()) counts = r->blocks;
          result = r.ok() ? StatusOr<exporters::ExportResult>(static_cast<exporters::ExportResult>(*r)) : r.status();
        } else {
          result = f->format == "chrome" ? exporters::ExportChrome(f->path, f->output)
                                         : exporters::ExportSqlite(f->path, f->output);
        }
        if (!result.ok()) {
          std::fprintf(stderr, "twinscope export: %s\n", result.status().message().c_str());
          return 1;
        }
        for (const auto& w : result->warnings) std::fprintf(stderr, "twinscope export: warning: %s\n", w.c_str());
        std::fprintf(stderr, "twinscope export: %s%s records -> %s %s (%s %s)\n",
                     joined           ? "joined run, "
                     : merged.empty() ? ""
                                      : (std::to_string(merged.size()) + " processes, ").c_str(),
                     FormatCount(result->records).c_str(), f->output.c_str(), f->format.c_str(),
                     FormatCount(result->written).c_str(),
                     f->format == "chrome"     ? "events"
                     : f->format == "perfetto" ? "packets"
                                               : "rows");
        if (counts.launches_drawn || counts.launches_over_bounds) {
          std::fprintf(stderr, "twinscope export: blocks of %s launches drawn (%s blocks), %s launches as spans only\n",
                       FormatCount(counts.launches_drawn).c_str(), FormatCount(counts.blocks_drawn).c_str(),
                       FormatCount(counts.launches_over_bounds).c_str());
        }
        if (result->report.end == ReadEnd::kCorrupt) {
          std::fprintf(stderr,
                       "twinscope export: the input is corrupt: only the part before the damage was exported\n");
          return 1;
        }
        return 0;
      };
    });

}  // namespace
}  // namespace twinscope::cli
