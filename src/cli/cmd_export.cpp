// twinscope export: write a trace as Chrome trace-event JSON or SQLite.
#include <cstdio>

#include "cli/cli_text.h"
#include "cli/command.h"
#include "export/export.h"

namespace twinscope::cli {
namespace {

struct ExportFlags {
  std::string path;
  std::string format;
  std::string output;
};

CommandRegistration kExport(
    "export", "Export a trace as Chrome trace-event JSON (Perfetto UI) or an SQLite database",
    [](CLI::App* sub) -> CommandRun {
      auto f = std::make_shared<ExportFlags>();
      sub->add_option("file", f->path, "Trace file (.tsc)")->required();
      sub->add_option("--format", f->format, "chrome (JSON for ui.perfetto.dev / chrome://tracing) or sqlite")
          ->required()
          ->check(CLI::IsMember({"chrome", "sqlite"}));
      sub->add_option("-o,--output", f->output, "File to write (replaced if it exists)")->required();
      return [f]() {
        auto result = f->format == "chrome" ? exporters::ExportChrome(f->path, f->output)
                                            : exporters::ExportSqlite(f->path, f->output);
        if (!result.ok()) {
          std::fprintf(stderr, "twinscope export: %s\n", result.status().message().c_str());
          return 1;
        }
        for (const auto& w : result->warnings) std::fprintf(stderr, "twinscope export: warning: %s\n", w.c_str());
        std::fprintf(stderr, "twinscope export: %s records -> %s %s (%s %s)\n", FormatCount(result->records).c_str(),
                     f->output.c_str(), f->format.c_str(), FormatCount(result->written).c_str(),
                     f->format == "chrome" ? "events" : "rows");
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
