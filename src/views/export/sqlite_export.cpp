// SQLite exporter: one table per record type, schema in docs/sqlite-schema.md.
// All rows go in through prepared statements inside one transaction; indexes
// and views are created after the rows.
#include "views/export/export.h"

namespace twinscope::exporters {

Status SqliteMissing(const std::string& instead) {
  return Status::Error(
      "this twinscope was built without SQLite (TWINSCOPE_WITH_SQLITE=OFF: sqlite3.h was not available); " + instead +
      "rebuild with libsqlite3-dev installed");
}

}  // namespace twinscope::exporters

#ifdef TWINSCOPE_HAVE_SQLITE

#include <set>
#include <stdexcept>

#include "format/tee_sink.h"
#include "procs/rank_inputs.h"
#include "views/export/sqlite_db.h"
#include "views/export/sqlite_ranks.h"
#include "views/export/timeline_scan.h"

namespace twinscope::exporters {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE strings (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE kernels ()sql" TWINSCOPE_SQLITE_KERNEL_COLUMNS R"sql();
CREATE TABLE memcpys (
  start_ns INTEGER, end_ns INTEGER, duration_ns INTEGER, invalid_timestamp INTEGER NOT NULL,
  bytes INTEGER, copy_kind TEXT, src_kind INTEGER, dst_kind INTEGER,
  device INTEGER, context INTEGER, stream INTEGER, correlation_id INTEGER,
  graph_id INTEGER, graph_node_id INTEGER, flags INTEGER);
CREATE TABLE memsets (
  start_ns INTEGER, end_ns INTEGER, duration_ns INTEGER, invalid_timestamp INTEGER NOT NULL,
  bytes INTEGER, value INTEGER, device INTEGER, context INTEGER, stream INTEGER, correlation_id INTEGER,
  graph_id INTEGER, graph_node_id INTEGER, flags INTEGER);
CREATE TABLE api_calls (
  start_ns INTEGER, end_ns INTEGER, duration_ns INTEGER, thread_id INTEGER, correlation_id INTEGER,
  domain TEXT, cbid INTEGER, name_id INTEGER);
CREATE TABLE nvtx_ranges (
  start_ns INTEGER, end_ns INTEGER, duration_ns INTEGER, thread_id INTEGER, range_id INTEGER,
  kind TEXT, domain_id INTEGER, name_id INTEGER, depth INTEGER);
CREATE TABLE launches (
  seq INTEGER, cpu_ns INTEGER, thread_id INTEGER, grid_id INTEGER, graph_exec_id INTEGER,
  key_hash INTEGER, key_path_id INTEGER, key_ordinal INTEGER, correlation_id INTEGER,
  device INTEGER, stream INTEGER, kernel_id INTEGER,
  grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, block_x INTEGER, block_y INTEGER, block_z INTEGER,
  cluster_x INTEGER, cluster_y INTEGER, cluster_z INTEGER, flags INTEGER, blocks_recorded INTEGER);
CREATE TABLE blocks (
  launch_seq INTEGER, enter_ns INTEGER, exit_ns INTEGER, duration_ns INTEGER,
  block_linear INTEGER, block_order INTEGER, x INTEGER, y INTEGER, z INTEGER, sm INTEGER);
)sql";

constexpr const char* kIndexesAndViews = R"sql(
CREATE INDEX kernels_start ON kernels(start_ns);
CREATE INDEX kernels_correlation ON kernels(correlation_id);
CREATE INDEX kernels_name ON kernels(name_id);
CREATE INDEX kernels_key ON kernels(key_hash);
CREATE INDEX memcpys_correlation ON memcpys(correlation_id);
CREATE INDEX memsets_correlation ON memsets(correlation_id);
CREATE INDEX api_calls_correlation ON api_calls(correlation_id);
CREATE INDEX api_calls_thread ON api_calls(thread_id, start_ns);
CREATE INDEX nvtx_ranges_thread ON nvtx_ranges(thread_id, start_ns);
CREATE INDEX launches_seq ON launches(seq);
CREATE INDEX launches_key ON launches(key_hash);
CREATE INDEX launches_correlation ON launches(correlation_id);
CREATE INDEX blocks_launch ON blocks(launch_seq);
CREATE INDEX blocks_sm ON blocks(sm);
CREATE VIEW kernels_named AS
  SELECT k.*, COALESCE(d.value, n.value) AS name, n.value AS mangled_name, p.value AS key_path
  FROM kernels k LEFT JOIN strings n ON n.id = k.name_id LEFT JOIN strings d ON d.id = k.demangled_id
  LEFT JOIN strings p ON p.id = k.key_path_id;
CREATE VIEW api_calls_named AS
  SELECT a.*, s.value AS name FROM api_calls a LEFT JOIN strings s ON s.id = a.name_id;
CREATE VIEW nvtx_ranges_named AS
  SELECT r.*, s.value AS name, d.value AS domain
  FROM nvtx_ranges r LEFT JOIN strings s ON s.id = r.name_id LEFT JOIN strings d ON d.id = r.domain_id;
CREATE VIEW launches_named AS
  SELECT l.*, s.value AS kernel, p.value AS key_path
  FROM launches l LEFT JOIN strings s ON s.id = l.kernel_id LEFT JOIN strings p ON p.id = l.key_path_id;
)sql";

// A run database (several processes): the record tables start with
// process_id; strings and counters are per process; `process` lists them.
constexpr const char* kRunTables = R"sql(
CREATE TABLE process (
  id INTEGER PRIMARY KEY, pid INTEGER, ppid INTEGER, host TEXT, command_line TEXT, rank INTEGER,
  local_rank INTEGER, world_size INTEGER, top INTEGER, role TEXT, side TEXT, trace TEXT, label TEXT,
  start_realtime_ns INTEGER, to_realtime_ns INTEGER, clock_pair INTEGER,
  launches INTEGER, kernel_records INTEGER, traced_launches INTEGER, block_records INTEGER,
  kernel_records_missing INTEGER, cupti_dropped INTEGER, writer_dropped INTEGER,
  read_end TEXT, read_message TEXT, records INTEGER, header TEXT, status TEXT);
)sql";

constexpr const char* kRunIndexesAndViews = R"sql(
CREATE INDEX kernels_start ON kernels(start_ns);
CREATE INDEX kernels_correlation ON kernels(process_id, correlation_id);
CREATE INDEX kernels_name ON kernels(process_id, name_id);
CREATE INDEX kernels_key ON kernels(key_hash);
CREATE INDEX memcpys_correlation ON memcpys(process_id, correlation_id);
CREATE INDEX memsets_correlation ON memsets(process_id, correlation_id);
CREATE INDEX api_calls_correlation ON api_calls(process_id, correlation_id);
CREATE INDEX api_calls_thread ON api_calls(process_id, thread_id, start_ns);
CREATE INDEX nvtx_ranges_thread ON nvtx_ranges(process_id, thread_id, start_ns);
CREATE INDEX launches_seq ON launches(process_id, seq);
CREATE INDEX launches_key ON launches(key_hash);
CREATE INDEX launches_correlation ON launches(process_id, correlation_id);
CREATE INDEX blocks_launch ON blocks(process_id, launch_seq);
CREATE INDEX blocks_sm ON blocks(sm);
CREATE VIEW kernels_named AS
  SELECT k.*, COALESCE(d.value, n.value) AS name, n.value AS mangled_name, p.value AS key_path
  FROM kernels k LEFT JOIN strings n ON n.process_id = k.process_id AND n.id = k.name_id
  LEFT JOIN strings d ON d.process_id = k.process_id AND d.id = k.demangled_id
  LEFT JOIN strings p ON p.process_id = k.process_id AND p.id = k.key_path_id;
CREATE VIEW api_calls_named AS
  SELECT a.*, s.value AS name FROM api_calls a LEFT JOIN strings s ON s.process_id = a.process_id AND s.id = a.name_id;
CREATE VIEW nvtx_ranges_named AS
  SELECT r.*, s.value AS name, d.value AS domain
  FROM nvtx_ranges r LEFT JOIN strings s ON s.process_id = r.process_id AND s.id = r.name_id
  LEFT JOIN strings d ON d.process_id = r.process_id AND d.id = r.domain_id;
CREATE VIEW launches_named AS
  SELECT l.*, s.value AS kernel, p.value AS key_path
  FROM launches l LEFT JOIN strings s ON s.process_id = l.process_id AND s.id = l.kernel_id
  LEFT JOIN strings p ON p.process_id = l.process_id AND p.id = l.key_path_id;
)sql";

// The run schema from the one-trace schema: process_id first in every record table.
std::string RunSchema() {
  std::string s = kSchema;
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = s.find(from);
    if (at == std::string::npos) throw std::logic_error("run schema: no " + from);
    s.replace(at, from.size(), to);
  };
  replace("CREATE TABLE strings (id INTEGER PRIMARY KEY, value TEXT NOT NULL);",
          "CREATE TABLE strings (process_id INTEGER NOT NULL, id INTEGER NOT NULL, value TEXT NOT NULL, "
          "PRIMARY KEY (process_id, id));");
  replace("CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);",
          "CREATE TABLE counters (process_id INTEGER NOT NULL, name TEXT NOT NULL, value INTEGER NOT NULL, "
          "PRIMARY KEY (process_id, name));");
  for (const char* t : {"kernels", "memcpys", "memsets", "api_calls", "nvtx_ranges", "launches", "blocks"})
    replace(std::string("CREATE TABLE ") + t + " (",
            std::string("CREATE TABLE ") + t + " (process_id INTEGER NOT NULL, ");
  return s + kRunTables + TWINSCOPE_SQLITE_RANK_TABLES;
}

// The counters of the last STATUS/SUMMARY object, with process_id first when > 0.
void WriteCounters(Db& db, const nlohmann::json& status, uint64_t process_id) {
  Statement counter = db.Insert("counters", process_id ? 3 : 2);
  if (!status.contains("counters") || !status["counters"].is_object()) return;
  for (const auto& [name, value] : status["counters"].items()) {
    if (!value.is_number_integer()) continue;
    Row row = counter.Bind();
    if (process_id) row.I(process_id);
    row.Text(name.c_str())
        .I(value.is_number_unsigned() ? value.get<uint64_t>() : static_cast<uint64_t>(value.get<int64_t>()))
        .Insert();
  }
}

// device, context, stream, correlation_id, graph_id, graph_node_id, flags:
// the last columns of memcpys and memsets.
template <class R>
Row& BindPlace(Row& row, const R& r) {
  return row.I(r.device).I(r.context).I(r.stream).I(r.correlation_id).I(r.graph_id).I(r.graph_node_id).I(r.flags);
}

class SqliteSink : public RecordSink {
 public:
  // `process_id` > 0: a run database, whose record tables start with process_id.
  explicit SqliteSink(Db& db, uint64_t process_id = 0)
      : process_id_(process_id),
        kernel_(db.Insert("kernels", kKernelColumnCount + Extra())),
        memcpy_(db.Insert("memcpys", 15 + Extra())),
        memset_(db.Insert("memsets", 13 + Extra())),
        api_(db.Insert("api_calls", 8 + Extra())),
        nvtx_(db.Insert("nvtx_ranges", 9 + Extra())),
        launch_(db.Insert("launches", 23 + Extra())),
        block_(db.Insert("blocks", 10 + Extra())) {}

  void OnKernel(const KernelRecord& r) override {
    Row row = Start(kernel_);
    BindKernel(row, r, Counted(ValidSpan(r.start_ns, r.end_ns, r.flags))).Insert();
  }
  void OnMemcpy(const MemcpyRecord& r) override {
    const bool v = Counted(ValidSpan(r.start_ns, r.end_ns, r.flags));
    Row row = Start(memcpy_);
    row.Span(r.start_ns, r.end_ns, v).I(!v).I(r.bytes).Text(CopyKindName(r.copy_kind)).I(r.src_kind).I(r.dst_kind);
    BindPlace(row, r).Insert();
  }
  void OnMemset(const MemsetRecord& r) override {
    const bool v = Counted(ValidSpan(r.start_ns, r.end_ns, r.flags));
    Row row = Start(memset_);
    BindPlace(row.Span(r.start_ns, r.end_ns, v).I(!v).I(r.bytes).I(r.value), r).Insert();
  }
  void OnApi(const ApiRecord& r) override {
    Start(api_)
        .Span(r.start_ns, r.end_ns, ValidSpan(r.start_ns, r.end_ns))
        .I(r.thread_id)
        .I(r.correlation_id)
        .Text(r.domain == static_cast<uint32_t>(ApiDomain::kDriver) ? "driver" : "runtime")
        .I(r.cbid)
        .I(r.name)
        .Insert();
  }
  void OnNvtx(const NvtxRecord& r) override {
    const char* kind = r.kind == static_cast<uint32_t>(NvtxKind::kMark)       ? "mark"
                       : r.kind == static_cast<uint32_t>(NvtxKind::kStartEnd) ? "start_end"
                                                                              : "push_pop";
    const bool closed = r.end_ns != 0 && r.end_ns >= r.start_ns;
    Start(nvtx_)
        .I(r.start_ns)
        .Opt(closed, r.end_ns)
        .Opt(closed, r.end_ns - r.start_ns)
        .I(r.thread_id)
        .I(r.range_id)
        .Text(kind)
        .Opt(r.domain != 0, r.domain)
        .I(r.name)
        .I(r.depth)
        .Insert();
  }
  void OnLaunch(const LaunchRecord& r) override {
    Start(launch_)
        .I(r.seq)
        .I(r.cpu_ns)
        .I(r.thread_id)
        .I(r.grid_id)
        .I(r.graph_exec_id)
        .I(r.key.hash)
        .Opt(r.key.path != 0, r.key.path)
        .I(r.key.ordinal)
        .I(r.correlation_id)
        .I(r.device)
        .I(r.stream)
        .I(r.kernel)
        .Dims(r.grid)
        .Dims(r.block)
        .Dims(r.cluster)
        .I(r.flags)
        .I(r.blocks_recorded)
        .Insert();
  }
  void OnBlock(const BlockRecord& r) override {
    Row row = Start(block_);
    row.I(r.launch_seq).Span(r.enter_ns, r.exit_ns, Counted(ValidSpan(r.enter_ns, r.exit_ns)));
    BindBlockPlace(row, r).Insert();
  }
  void OnStatus(const nlohmann::json& status, bool) override { last_status = status; }

  uint64_t invalid = 0;
  nlohmann::json last_status = nlohmann::json::object();

 private:
  int Extra() const { return process_id_ ? 1 : 0; }
  Row Start(Statement& s) {
    Row row = s.Bind();
    if (process_id_) row.I(process_id_);
    return row;
  }
  bool Counted(bool valid) {  // counts the records with invalid times
    invalid += !valid;
    return valid;
  }
  uint64_t process_id_;
  Statement kernel_, memcpy_, memset_, api_, nvtx_, launch_, block_;
};

}  // namespace

bool SqliteAvailable() { return true; }

StatusOr<ExportResult> ExportSqlite(const std::string& trace, const std::string& out) {
  std::string error;
  auto reader = TraceReader::Open(trace, &error);
  if (!reader) return Status::Error(error);
  ExportResult result;
  try {
    Db db(out, kSchema);
    SqliteSink sink(db);
    result.report = reader->Read(sink);
    result.records = result.report.records;

    db.WriteStrings(*reader);
    WriteCounters(db, sink.last_status, 0);
    Statement meta = db.Insert("meta", 2);
    auto put = [&](const std::string& key, const std::string& value) {
      meta.Bind().Text(key.c_str()).Text(value.c_str()).Insert();  // each up to its first NUL
    };
    const auto& header = reader->header();
    put("header", MetaJson(header));
    put("role", header.value("role", std::string()));
    put("format_version", std::to_string(reader->version()));
    put("status", MetaJson(sink.last_status));
    put("read_end", ReadEndName(result.report.end));
    put("read_message", result.report.message);
    put("records", std::to_string(result.report.records));
    put("source", trace);
    db.Commit(kIndexesAndViews);
    result.written = db.rows();
    result.skipped_invalid = 0;
    if (sink.invalid) {
      result.warnings.push_back(std::to_string(sink.invalid) +
                                " records have invalid timestamps (invalid_timestamp = 1 / duration_ns NULL)");
    }
  } catch (const std::exception& e) {
    return Status::Error(e.what());
  }
  AddReadWarnings(result.report, &result.warnings);
  return result;
}

StatusOr<ExportResult> ExportSqliteRun(const std::vector<RunProcess>& processes, const std::string& out) {
  if (processes.empty()) return Status::Error("no process with GPU work to export");
  ExportResult result;
  try {
    const std::string schema = RunSchema();
    Db db(out, schema.c_str());
    Statement process = db.Insert("process", 28);
    uint64_t invalid = 0;
    bool corrupt = false;
    // Launcher ranks: each ranked process's steps, read in the same pass, compared as `twinscope stats RUN`
    // compares them (docs/processes.md, "Ranks").
    std::vector<procs::RankInput> ranks;
    std::vector<RankOwner> owners;
    for (size_t i = 0; i < processes.size(); ++i) {
      const RunProcess& p = processes[i];
      const uint64_t id = i + 1;
      std::string error;
      auto reader = TraceReader::Open(p.trace, &error);
      if (!reader) return Status::Error(error);
      SqliteSink sink(db, id);
      procs::StepSink steps(*reader);
      TeeSink tee(sink, steps);
      const ReadReport report = p.rank ? reader->Read(tee) : reader->Read(sink);
      if (p.rank) {
        ranks.push_back(procs::RankInput{*p.rank, std::move(steps.steps), {}});
        owners.push_back(RankOwner{p.pid, id, ""});
      }
      result.records += report.records;
      invalid += sink.invalid;
      db.WriteStrings(*reader, id);
      WriteCounters(db, sink.last_status, id);
      std::vector<std::string> warnings;
      AddReadWarnings(report, &warnings);
      for (const auto& w : warnings) result.warnings.push_back(p.trace + ": " + w);
      if (report.end == ReadEnd::kCorrupt) corrupt = true;
      if (i == 0 || report.end > result.report.end) result.report = report;
      auto opt = [](Row& row, const std::optional<int64_t>& v) -> Row& {
        return v ? row.I(static_cast<uint64_t>(*v)) : row.Null();
      };
      Row row = process.Bind();
      row.I(id).I(static_cast<uint64_t>(p.pid)).I(static_cast<uint64_t>(p.ppid)).Text(p.host).Text(p.command);
      opt(opt(opt(row, p.rank), p.local_rank), p.world_size);
      row.I(p.top).Text(p.role).Text(p.side).Text(p.trace).Text(p.label).I(p.start_realtime_ns);
      row.I(static_cast<uint64_t>(p.to_realtime_ns)).I(p.aligned);
      row.I(p.launches).I(p.kernel_records).I(p.traced_launches).I(p.block_records);
      row.I(p.kernel_records_missing).I(p.cupti_dropped).I(p.writer_dropped);
      row.Text(std::string(ReadEndName(report.end))).Text(report.message).I(report.records);
      row.Text(MetaJson(reader->header())).Text(MetaJson(sink.last_status)).Insert();
    }
    if (corrupt) result.report.end = ReadEnd::kCorrupt;
    if (ranks.size() >= 2)
      WriteRankTables(db, procs::CompareRanks(ranks), owners, "the kernel records of each rank's trace (no join)");
    Statement meta = db.Insert("meta", 2);
    auto put = [&](const std::string& key, const std::string& value) { meta.Bind().Text(key).Text(value).Insert(); };
    std::set<std::string> hosts;
    for (const auto& p : processes) hosts.insert(p.host);
    put("processes", std::to_string(processes.size()));
    put("hosts", MetaJson(nlohmann::json(hosts)));
    put("alignment", AlignmentText(processes));
    put("format_version", std::to_string(kFormatVersion));
    put("records", std::to_string(result.records));
    db.Commit(kRunIndexesAndViews);
    result.written = db.rows();
    if (invalid) {
      result.warnings.push_back(std::to_string(invalid) +
                                " records have invalid timestamps (invalid_timestamp = 1 / duration_ns NULL)");
    }
  } catch (const std::exception& e) {
    return Status::Error(e.what());
  }
  return result;
}

}  // namespace twinscope::exporters

#else  // !TWINSCOPE_HAVE_SQLITE

namespace twinscope::exporters {

bool SqliteAvailable() { return false; }

StatusOr<ExportResult> ExportSqlite(const std::string&, const std::string&) {
  return SqliteMissing("export to chrome, or ");
}

StatusOr<ExportResult> ExportSqliteRun(const std::vector<RunProcess>&, const std::string&) {
  return SqliteMissing("export to chrome, or ");
}

}  // namespace twinscope::exporters

#endif
