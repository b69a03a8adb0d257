// Writes every view of a join from one read of each trace (views/join_writer.h).
#include "views/join_writer.h"

#include <filesystem>
#include <fstream>
#include <memory>

#include "join/join_views.h"
#include "join/model_file.h"
#include "views/export/join/block_detail.h"
#include "views/export/join/join_export.h"
#include "views/join_doc.h"
#include "views/report/report.h"

namespace twinscope::views {
namespace {

// What the report's copy of the model holds: the slowest launches, drifting
// ranges first, steps; the report bounds it again on its own.
join::JsonBounds ReportJsonBounds() {
  join::JsonBounds b;
  b.max_launches = 2000;
  b.max_drift_rows = 1000;
  b.max_step_rows = 0;
  b.max_instance_rows = 1000;
  b.requests.max_rows = 1000;
  b.requests.max_steps = 2000;
  return b;
}

// Where the report went (on `out`) or why it did not (on stderr); false if it did not.
bool SayReport(const Status& written, const std::string& path, const ReportInfo& info, FILE* out, const char* command) {
  if (!written.ok()) {
    std::fprintf(stderr, "%s: report: %s\n", command, written.message().c_str());
    return false;
  }
  std::fprintf(out, "report (one self-contained file, open it in a browser): %s (%.1f MB%s)\n", path.c_str(),
               static_cast<double>(info.bytes) / 1e6, info.charts ? "" : "; step chart drawn without Chart.js");
  return true;
}

// join.json as JoinJson(m, {}, detail).dump() writes it, byte for byte, without holding it whole: the
// document with its launches left out, cut where they go, and every launch (slowest first, as JoinJson orders
// them) made, written and dropped one at a time. A join of millions of launches stays in the model's memory
// (docs/join.md, "Reads").
bool WriteJoinJson(const join::JoinedModel& m, const std::vector<join::LaunchBlocks>& detail, const std::string& path,
                   std::string* error) {
  join::JsonBounds few;
  few.max_launches = 1;  // the launches why_slow names are kept too: made, then replaced below
  nlohmann::json doc = ToJson(MakeJoinDoc(m, few, detail));
  static const char* kCut = "twinscope: the launches go here";
  doc["launches"] = kCut;
  const std::string text = doc.dump();
  doc = nlohmann::json();
  const std::string quoted = std::string("\"") + kCut + "\"";
  const size_t at = text.find(quoted);
  if (at == std::string::npos) {
    *error = "join.json: the document has no launches to write";  // cannot happen: MakeJoinDoc always fills them
    return false;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(text.data(), static_cast<std::streamsize>(at));
  f << '[';
  bool first = true;
  for (size_t id : join::SlowestFirst(m)) {
    if (!first) f << ',';
    first = false;
    f << ToJson(MakeLaunchDoc(m, id)).dump();
  }
  f << ']';
  f.write(text.data() + at + quoted.size(), static_cast<std::streamsize>(text.size() - at - quoted.size()));
  f.close();
  if (!f) {
    *error = "cannot write " + path;
    return false;
  }
  return true;
}

}  // namespace

bool WriteJoinViews(join::JoinedRun* run, const std::string& dir, FILE* out, const char* command,
                    DeferredReport* defer) {
  const join::JoinedModel& m = run->model;
  // The one detail pass: the launches join.json and the report picture, those
  // the timeline draws, and (streamed) every block for SQLite.
  const std::vector<uint64_t> json_seqs = join::DetailSeqs(m, kDetailLaunches);
  std::vector<uint64_t> seqs = json_seqs;
  if (exporters::PerfettoAvailable())
    seqs = join::UnionSeqs(seqs, exporters::PlanBlocks(m, exporters::kPerfettoBlockBounds).drawn_seqs);
  bool ok = true;
  std::unique_ptr<exporters::JoinSqlite> sqlite;
  const std::string sqlite_path = dir + "/join.sqlite";
  if (exporters::SqliteAvailable()) {
    auto s = exporters::JoinSqlite::Start(*run, sqlite_path);
    if (s.ok()) {
      sqlite = std::move(*s);
    } else {
      std::fprintf(stderr, "%s: sqlite: %s\n", command, s.status().message().c_str());
      ok = false;
    }
  }
  const join::ShadowDetail shadow_read = join::ReadDetail(run, seqs, sqlite ? &sqlite->ShadowSink() : nullptr);
  if (!run->detail_error.empty())
    std::fprintf(stderr, "%s: warning: block detail not read: %s\n", command, run->detail_error.c_str());
  const std::vector<join::LaunchBlocks> json_detail = join::DetailOf(run->detail, json_seqs);

  std::string error;
  const std::string json_path = dir + "/join.json";
  if (!WriteJoinJson(m, json_detail, json_path, &error)) {
    std::fprintf(stderr, "%s: %s\n", command, error.c_str());
    return false;
  }
  std::fprintf(out, "joined model: %s\n", json_path.c_str());
  // The typed model beside it, for `twinscope stats DIR` and `export DIR` (join/model_file.h).
  if (Status saved = join::SaveModel(m, dir + "/" + join::kModelFile); !saved.ok()) {
    std::fprintf(stderr, "%s: %s\n", command, saved.message().c_str());
    ok = false;
  }

  if (exporters::PerfettoAvailable()) {
    const std::string path = dir + "/join.perfetto-trace";
    auto r = exporters::ExportJoinPerfetto(*run, path);
    if (r.ok()) {
      for (const auto& w : r->warnings) std::fprintf(stderr, "%s: perfetto: %s\n", command, w.c_str());
      std::error_code ec;
      const auto bytes = std::filesystem::file_size(path, ec);
      const auto& b = r->blocks;
      std::fprintf(
          out,
          "timeline (open in https://ui.perfetto.dev): %s (%.1f MB; blocks of %llu launches drawn, %llu "
          "more as spans only past its bound of %zu launches / %llu blocks)\n",
          path.c_str(), ec ? 0.0 : static_cast<double>(bytes) / 1e6, static_cast<unsigned long long>(b.launches_drawn),
          static_cast<unsigned long long>(b.launches_over_bounds), exporters::kPerfettoBlockBounds.max_launches,
          static_cast<unsigned long long>(exporters::kPerfettoBlockBounds.max_blocks));
    } else {
      std::fprintf(stderr, "%s: perfetto: %s\n", command, r.status().message().c_str());
      ok = false;
    }
  } else {
    std::fprintf(out,
                 "timeline: not written (built without the Perfetto exporter); twinscope export %s --format chrome\n",
                 dir.c_str());
  }
  if (sqlite) {
    auto r = run->detail_error.empty()
                 ? sqlite->Finish(shadow_read)
                 : StatusOr<exporters::ExportResult>(Status::Error("shadow: " + run->detail_error));
    if (r.ok()) {
      std::fprintf(out, "database (docs/sqlite-schema.md): %s\n", sqlite_path.c_str());
      // What its bounded blocks table left out (docs/sqlite-schema.md, "Bounds").
      for (const auto& w : r->warnings)
        if (w.find("--sqlite-blocks all") != std::string::npos) std::fprintf(stderr, "%s: %s\n", command, w.c_str());
    } else {
      std::fprintf(stderr, "%s: sqlite: %s\n", command, r.status().message().c_str());
      ok = false;
    }
    sqlite.reset();
  }
  // The report embeds a bounded copy of the model (its own bounds: docs/report.md).
  const std::string report_path = dir + "/report.html";
  if (defer) {  // written later, with the run's processes (WriteDeferredReport)
    defer->path = report_path;
    defer->join_cbor = nlohmann::json::to_cbor(views::JoinJson(m, ReportJsonBounds(), json_detail));
    std::fflush(out);
    return ok;
  }
  ReportInfo info;
  if (!SayReport(WriteReport(MakeJoinDoc(m, ReportJsonBounds(), json_detail), report_path, {}, &info), report_path,
                 info, out, command))
    ok = false;
  std::fflush(out);
  return ok;
}

bool WriteDeferredReport(const DeferredReport& report, const ReportOptions& options, FILE* out, const char* command) {
  if (report.path.empty()) return false;
  ReportInfo info;
  const nlohmann::json j = nlohmann::json::from_cbor(report.join_cbor, true, false);
  const bool ok = SayReport(j.is_discarded() ? Status::Error("the kept copy of the join cannot be read back")
                                             : WriteReport(j, report.path, options, &info),
                            report.path, info, out, command);
  std::fflush(out);
  return ok;
}

}  // namespace twinscope::views
