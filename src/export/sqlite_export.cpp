// SQLite exporter: one table per record type, schema in docs/sqlite-schema.md.
// All rows go in through prepared statements inside one transaction; indexes
// and views are created after the rows.
#include "export/export.h"

#ifdef TWINSCOPE_HAVE_SQLITE

#include <unistd.h>

#include <cerrno>
#include <cstring>

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

bool Valid(uint64_t start, uint64_t end, uint32_t flags) {
  return !(flags & kFlagInvalidTimestamp) && start != 0 && end != 0 && end >= start;
}

class SqliteSink : public RecordSink {
 public:
  explicit SqliteSink(Db& db) : db_(db) {
    kernel_ = db.Prepare(("INSERT INTO kernels VALUES " + Placeholders(kKernelColumnCount)).c_str());
    memcpy_ = db.Prepare(("INSERT INTO memcpys VALUES " + Placeholders(15)).c_str());
    memset_ = db.Prepare(("INSERT INTO memsets VALUES " + Placeholders(13)).c_str());
    api_ = db.Prepare(("INSERT INTO api_calls VALUES " + Placeholders(8)).c_str());
    nvtx_ = db.Prepare(("INSERT INTO nvtx_ranges VALUES " + Placeholders(9)).c_str());
    launch_ = db.Prepare(("INSERT INTO launches VALUES " + Placeholders(23)).c_str());
    block_ = db.Prepare(("INSERT INTO blocks VALUES " + Placeholders(10)).c_str());
  }

  void OnKernel(const KernelRecord& r) override {
    const bool v = Valid(r.start_ns, r.end_ns, r.flags);
    if (!v) ++invalid;
    Row row(kernel_);
    BindKernel(row, r, v);
    db_.Step(kernel_);
  }
  void OnMemcpy(const MemcpyRecord& r) override {
    const bool v = Valid(r.start_ns, r.end_ns, r.flags);
    if (!v) ++invalid;
    Row(memcpy_)
        .I(r.start_ns)
        .I(r.end_ns)
        .Opt(v, r.end_ns - r.start_ns)
        .I(!v)
        .I(r.bytes)
        .Text(CopyKindName(r.copy_kind))
        .I(r.src_kind)
        .I(r.dst_kind)
        .I(r.device)
        .I(r.context)
        .I(r.stream)
        .I(r.correlation_id)
        .I(r.graph_id)
        .I(r.graph_node_id)
        .I(r.flags);
    db_.Step(memcpy_);
  }
  void OnMemset(const MemsetRecord& r) override {
    const bool v = Valid(r.start_ns, r.end_ns, r.flags);
    if (!v) ++invalid;
    Row(memset_)
        .I(r.start_ns)
        .I(r.end_ns)
        .Opt(v, r.end_ns - r.start_ns)
        .I(!v)
        .I(r.bytes)
        .I(r.value)
        .I(r.device)
        .I(r.context)
        .I(r.stream)
        .I(r.correlation_id)
        .I(r.graph_id)
        .I(r.graph_node_id)
        .I(r.flags);
    db_.Step(memset_);
  }
  void OnApi(const ApiRecord& r) override {
    const bool v = Valid(r.start_ns, r.end_ns, 0);
    Row(api_)
        .I(r.start_ns)
        .I(r.end_ns)
        .Opt(v, r.end_ns - r.start_ns)
        .I(r.thread_id)
        .I(r.correlation_id)
        .Text(r.domain == static_cast<uint32_t>(ApiDomain::kDriver) ? "driver" : "runtime")
        .I(r.cbid)
        .I(r.name);
    db_.Step(api_);
  }
  void OnNvtx(const NvtxRecord& r) override {
    const char* kind = r.kind == static_cast<uint32_t>(NvtxKind::kMark)       ? "mark"
                       : r.kind == static_cast<uint32_t>(NvtxKind::kStartEnd) ? "start_end"
                                                                              : "push_pop";
    const bool closed = r.end_ns != 0 && r.end_ns >= r.start_ns;
    Row(nvtx_)
        .I(r.start_ns)
        .Opt(closed, r.end_ns)
        .Opt(closed, r.end_ns - r.start_ns)
        .I(r.thread_id)
        .I(r.range_id)
        .Text(kind)
        .Opt(r.domain != 0, r.domain)
        .I(r.name)
        .I(r.depth);
    db_.Step(nvtx_);
  }
  void OnLaunch(const LaunchRecord& r) override {
    Row(launch_)
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
        .I(r.blocks_recorded);
    db_.Step(launch_);
  }
  void OnBlock(const BlockRecord& r) override {
    const bool v = Valid(r.enter_ns, r.exit_ns, 0);
    if (!v) ++invalid;
    Row(block_)
        .I(r.launch_seq)
        .I(r.enter_ns)
        .I(r.exit_ns)
        .Opt(v, r.exit_ns - r.enter_ns)
        .I(r.block_linear)
        .I(r.order)
        .I(r.x)
        .I(r.y)
        .I(r.z)
        .I(r.sm);
    db_.Step(block_);
  }
  void OnStatus(const nlohmann::json& status, bool) override { last_status = status; }

  uint64_t invalid = 0;
  nlohmann::json last_status = nlohmann::json::object();

 private:
  Db& db_;
  sqlite3_stmt *kernel_, *memcpy_, *memset_, *api_, *nvtx_, *launch_, *block_;
};

std::string Dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

}  // namespace

bool SqliteAvailable() { return true; }

StatusOr<ExportResult> ExportSqlite(const std::string& trace, const std::string& out) {
  std::string error;
  auto reader = TraceReader::Open(trace, &error);
  if (!reader) return Status::Error(error);
  if (unlink(out.c_str()) != 0 && errno != ENOENT)
    return Status::Error("cannot replace " + out + ": " + std::strerror(errno));
  ExportResult result;
  try {
    Db db(out);
    db.Exec(kBulkLoadPragmas);
    db.Exec(kSchema);
    db.Exec("BEGIN");
    SqliteSink sink(db);
    result.report = reader->Read(sink);
    result.records = result.report.records;

    sqlite3_stmt* str = db.Prepare("INSERT INTO strings VALUES (?,?)");
    for (const auto& [id, value] : reader->strings()) {
      sqlite3_bind_int64(str, 1, id);
      sqlite3_bind_text(str, 2, value.data(), static_cast<int>(value.size()), SQLITE_STATIC);
      db.Step(str);
    }
    sqlite3_stmt* counter = db.Prepare("INSERT INTO counters VALUES (?,?)");
    if (sink.last_status.contains("counters") && sink.last_status["counters"].is_object()) {
      for (const auto& [name, value] : sink.last_status["counters"].items()) {
        if (!value.is_number_integer()) continue;
        sqlite3_bind_text(counter, 1, name.c_str(), -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(
            counter, 2,
            value.is_number_unsigned() ? static_cast<sqlite3_int64>(value.get<uint64_t>()) : value.get<int64_t>());
        db.Step(counter);
      }
    }
    sqlite3_stmt* meta = db.Prepare("INSERT INTO meta VALUES (?,?)");
    auto put = [&](const std::string& key, const std::string& value) {
      sqlite3_bind_text(meta, 1, key.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(meta, 2, value.c_str(), -1, SQLITE_TRANSIENT);
      db.Step(meta);
    };
    const auto& header = reader->header();
    put("header", Dump(header));
    put("role", header.value("role", std::string()));
    put("format_version", std::to_string(reader->version()));
    put("status", Dump(sink.last_status));
    put("read_end", ReadEndName(result.report.end));
    put("read_message", result.report.message);
    put("records", std::to_string(result.report.records));
    put("source", trace);
    db.Exec("COMMIT");
    db.Exec(kIndexesAndViews);
    result.written = db.rows;
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
  return Status::Error(
      "this twinscope was built without SQLite (TWINSCOPE_WITH_SQLITE=OFF: sqlite3.h was not available); export to "
      "chrome, or rebuild with libsqlite3-dev installed");
}

}  // namespace twinscope::exporters

#endif
