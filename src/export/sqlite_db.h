// SQLite helpers shared by the trace exporter (sqlite_export.cpp) and the
// joined export (export/join): a database written once in one transaction,
// its prepared statements and a binder for one row's values; every failure is
// a std::runtime_error with SQLite's own message. Internal to src/export;
// built only with TWINSCOPE_WITH_SQLITE.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "twinscope/records.h"
#include "twinscope/trace_reader.h"

namespace twinscope::exporters {

class Db;
class Row;

// One prepared statement of a Db, finalized with this object (which must not
// outlive its Db). Bind() starts a row at the first `?`; Row::Insert() runs
// the statement with the row's values.
class Statement {
 public:
  Row Bind();
  // Runs the statement with the values bound, then resets it for the next
  // row. Throws "SQLite insert: ..." when SQLite refuses it.
  void Step();

 private:
  friend class Db;
  friend class Row;
  struct Finalize {
    void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
  };
  Statement(Db* db, sqlite3_stmt* s) : db_(db), s_(s) {}
  Db* db_;
  std::unique_ptr<sqlite3_stmt, Finalize> s_;
};

// A database written once by this process, for one export. Not thread-safe.
class Db {
 public:
  // Creates `path` afresh (an older file there is removed), with the fast
  // settings of a one-writer bulk load (no journal, no syncs), makes `schema`
  // and begins the one transaction all rows go into. Throws "cannot replace
  // PATH: ...", "cannot create PATH: ..." or "SQLite: ...".
  Db(const std::string& path, const char* schema);
  // Opens the EXISTING database `path` to add to it (its settings kept), runs `sql` (tables made IF NOT
  // EXISTS) and begins one transaction. Throws "cannot open PATH: ..." or "SQLite: ...".
  enum ExistingTag { kExisting };
  Db(const std::string& path, ExistingTag, const char* sql);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // INSERT INTO `table` VALUES (?, ...) with `columns` placeholders.
  Statement Insert(const std::string& table, int columns);
  // Commits the rows, then runs `after` (indexes and views, made once the
  // rows are in).
  void Commit(const char* after);
  // The `strings` table both databases have (id, value): every string of `reader`.
  void WriteStrings(const TraceReader& reader);
  // The run database's `strings` (process_id, id, value): every string of `reader`.
  void WriteStrings(const TraceReader& reader, uint64_t process_id);

  uint64_t rows() const { return rows_; }  // rows inserted so far

 private:
  friend class Statement;
  void Exec(const char* sql);                // throws "SQLite: ..."
  [[noreturn]] void Fail(const char* what);  // throws "SQLite WHAT: <SQLite's message>"
  sqlite3* db_ = nullptr;
  uint64_t rows_ = 0;
};

// Binds values to the ?s of one statement in order; Insert() runs it.
class Row {
 public:
  explicit Row(Statement& s) : st_(s), s_(s.s_.get()) {}
  Row& I(uint64_t v) {  // unsigned values are stored with the same 64 bits
    sqlite3_bind_int64(s_, ++i_, static_cast<sqlite3_int64>(v));
    return *this;
  }
  Row& Null() {
    sqlite3_bind_null(s_, ++i_);
    return *this;
  }
  Row& Text(const char* t) {  // up to its NUL; `t` must outlive Insert()
    sqlite3_bind_text(s_, ++i_, t, -1, SQLITE_STATIC);
    return *this;
  }
  Row& Text(const std::string& t) {  // all of it, copied
    sqlite3_bind_text(s_, ++i_, t.data(), static_cast<int>(t.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Row& Real(double v) {
    sqlite3_bind_double(s_, ++i_, v);
    return *this;
  }
  Row& Opt(bool present, uint64_t v) { return present ? I(v) : Null(); }
  Row& Dims(Dim3 d) { return I(d.x).I(d.y).I(d.z); }  // three columns: x, y, z
  // start_ns, end_ns, duration_ns (NULL unless `valid`).
  Row& Span(uint64_t start, uint64_t end, bool valid) { return I(start).I(end).Opt(valid, end - start); }
  void Insert() { st_.Step(); }

 private:
  Statement& st_;
  sqlite3_stmt* s_;
  int i_ = 0;
};

inline Row Statement::Bind() { return Row(*this); }

// The columns of one KernelRecord, as the `kernels` tables of both
// databases hold them (docs/sqlite-schema.md), and their binder.
#define TWINSCOPE_SQLITE_KERNEL_COLUMNS                                                                         \
  "start_ns INTEGER, end_ns INTEGER, duration_ns INTEGER, invalid_timestamp INTEGER NOT NULL, device INTEGER, " \
  "context INTEGER, stream INTEGER, correlation_id INTEGER, grid_id INTEGER, graph_id INTEGER, graph_node_id "  \
  "INTEGER, flags INTEGER, grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, block_x INTEGER, block_y INTEGER, "  \
  "block_z INTEGER, static_shared_bytes INTEGER, dynamic_shared_bytes INTEGER, registers_per_thread INTEGER, "  \
  "name_id INTEGER, demangled_id INTEGER, key_hash INTEGER, key_path_id INTEGER, key_ordinal INTEGER"
constexpr int kKernelColumnCount = 26;
inline Row& BindKernel(Row& row, const KernelRecord& r, bool valid) {
  return row.Span(r.start_ns, r.end_ns, valid)
      .I(!valid)
      .I(r.device)
      .I(r.context)
      .I(r.stream)
      .I(r.correlation_id)
      .I(r.grid_id)
      .I(r.graph_id)
      .I(r.graph_node_id)
      .I(r.flags)
      .Dims(r.grid)
      .Dims(r.block)
      .I(r.static_shared_bytes)
      .I(r.dynamic_shared_bytes)
      .I(r.registers_per_thread)
      .I(r.name)
      .Opt(r.demangled != 0, r.demangled)
      .I(r.key.hash)
      .Opt(r.key.path != 0, r.key.path)
      .I(r.key.ordinal);
}

// block_linear, block_order, x, y, z, sm: the last columns of both `blocks` tables.
inline Row& BindBlockPlace(Row& row, const BlockRecord& r) {
  return row.I(r.block_linear).I(r.order).I(r.x).I(r.y).I(r.z).I(r.sm);
}

// A JSON value as a `meta` table holds it (one line; invalid UTF-8 replaced).
inline std::string MetaJson(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace twinscope::exporters
