// SQLite exporter: one table per record type, schema in docs/sqlite-schema.md.
// All rows go in through prepared statements inside one transaction; indexes
// and views are created after the rows.
#include "export/export.h"

namespace twinscope::exporters {

Status SqliteMissing(const std::string& instead) {
  return Status::Error(
      "this twinscope was built without SQLite (TWINSCOPE_WITH_SQLITE=OFF: sqlite3.h was not available); " + instead +
      "rebuild with libsqlite3-dev installed");
}

}  // namespace twinscope::exporters

#ifdef TWINSCOPE_HAVE_SQLITE

#include "export/sqlite_db.h"
#include "export/timeline_scan.h"

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

// device, context, stream, correlation_id, graph_id, graph_node_id, flags:
// the last columns of memcpys and memsets.
template <class R>
Row& BindPlace(Row& row, const R& r) {
  return row.I(r.device).I(r.context).I(r.stream).I(r.correlation_id).I(r.graph_id).I(r.graph_node_id).I(r.flags);
}

class SqliteSink : public RecordSink {
 public:
  explicit SqliteSink(Db& db)
      : kernel_(db.Insert("kernels", kKernelColumnCount)),
        memcpy_(db.Insert("memcpys", 15)),
        memset_(db.Insert("memsets", 13)),
        api_(db.Insert("api_calls", 8)),
        nvtx_(db.Insert("nvtx_ranges", 9)),
        launch_(db.Insert("launches", 23)),
        block_(db.Insert("blocks", 10)) {}

  void OnKernel(const KernelRecord& r) override {
    Row row = kernel_.Bind();
    BindKernel(row, r, Counted(ValidSpan(r.start_ns, r.end_ns, r.flags))).Insert();
  }
  void OnMemcpy(const MemcpyRecord& r) override {
    const bool v = Counted(ValidSpan(r.start_ns, r.end_ns, r.flags));
    Row row = memcpy_.Bind();
    row.Span(r.start_ns, r.end_ns, v).I(!v).I(r.bytes).Text(CopyKindName(r.copy_kind)).I(r.src_kind).I(r.dst_kind);
    BindPlace(row, r).Insert();
  }
  void OnMemset(const MemsetRecord& r) override {
    const bool v = Counted(ValidSpan(r.start_ns, r.end_ns, r.flags));
    Row row = memset_.Bind();
    BindPlace(row.Span(r.start_ns, r.end_ns, v).I(!v).I(r.bytes).I(r.value), r).Insert();
  }
  void OnApi(const ApiRecord& r) override {
    api_.Bind()
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
    nvtx_.Bind()
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
    launch_.Bind()
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
    Row row = block_.Bind();
    row.I(r.launch_seq).Span(r.enter_ns, r.exit_ns, Counted(ValidSpan(r.enter_ns, r.exit_ns)));
    BindBlockPlace(row, r).Insert();
  }
  void OnStatus(const nlohmann::json& status, bool) override { last_status = status; }

  uint64_t invalid = 0;
  nlohmann::json last_status = nlohmann::json::object();

 private:
  bool Counted(bool valid) {  // counts the records with invalid times
    invalid += !valid;
    return valid;
  }
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
    Statement counter = db.Insert("counters", 2);
    if (sink.last_status.contains("counters") && sink.last_status["counters"].is_object()) {
      for (const auto& [name, value] : sink.last_status["counters"].items()) {
        if (!value.is_number_integer()) continue;
        counter.Bind()
            .Text(name.c_str())
            .I(value.is_number_unsigned() ? value.get<uint64_t>() : static_cast<uint64_t>(value.get<int64_t>()))
            .Insert();
      }
    }
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

}  // namespace twinscope::exporters

#else  // !TWINSCOPE_HAVE_SQLITE

namespace twinscope::exporters {

bool SqliteAvailable() { return false; }

StatusOr<ExportResult> ExportSqlite(const std::string&, const std::string&) {
  return SqliteMissing("export to chrome, or ");
}

}  // namespace twinscope::exporters

#endif
