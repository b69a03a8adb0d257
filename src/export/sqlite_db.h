// SQLite helpers shared by the trace exporter (sqlite_export.cpp) and the
// joined export (export/join): a database that throws std::runtime_error with
// SQLite's own message, and a binder for one statement's values. Internal to
// src/export; built only with TWINSCOPE_WITH_SQLITE.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "twinscope/records.h"

namespace twinscope::exporters {

class Db {
 public:
  explicit Db(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
      std::string m = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      throw std::runtime_error("cannot create " + path + ": " + m);
    }
  }
  ~Db() {
    for (auto* s : statements_) sqlite3_finalize(s);
    if (db_) sqlite3_close(db_);
  }
  void Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string m = err ? err : "unknown error";
      sqlite3_free(err);
      throw std::runtime_error(std::string("SQLite: ") + m);
    }
  }
  sqlite3_stmt* Prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &s, nullptr) != SQLITE_OK) Fail("prepare");
    statements_.push_back(s);
    return s;
  }
  void Step(sqlite3_stmt* s) {
    if (sqlite3_step(s) != SQLITE_DONE) Fail("insert");
    sqlite3_reset(s);
    ++rows;
  }
  [[noreturn]] void Fail(const char* what) {
    throw std::runtime_error(std::string("SQLite ") + what + ": " + sqlite3_errmsg(db_));
  }
  uint64_t rows = 0;

 private:
  sqlite3* db_ = nullptr;
  std::vector<sqlite3_stmt*> statements_;
};

// Binds values to the ?s of one statement in order.
class Row {
 public:
  explicit Row(sqlite3_stmt* s) : s_(s) {}
  Row& I(uint64_t v) {  // unsigned values are stored with the same 64 bits
    sqlite3_bind_int64(s_, ++i_, static_cast<sqlite3_int64>(v));
    return *this;
  }
  Row& Null() {
    sqlite3_bind_null(s_, ++i_);
    return *this;
  }
  Row& Text(const char* t) {  // `t` must outlive the statement's next step
    sqlite3_bind_text(s_, ++i_, t, -1, SQLITE_STATIC);
    return *this;
  }
  Row& Text(const std::string& t) {  // copied
    sqlite3_bind_text(s_, ++i_, t.data(), static_cast<int>(t.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Row& Real(double v) {
    sqlite3_bind_double(s_, ++i_, v);
    return *this;
  }
  Row& Opt(bool present, uint64_t v) { return present ? I(v) : Null(); }
  Row& Dims(Dim3 d) { return I(d.x).I(d.y).I(d.z); }  // three columns: x, y, z

 private:
  sqlite3_stmt* s_;
  int i_ = 0;
};

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
  return row.I(r.start_ns)
      .I(r.end_ns)
      .Opt(valid, r.end_ns - r.start_ns)
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

// "(?,?,...)" with `n` placeholders.
inline std::string Placeholders(int n) {
  std::string s = "(";
  for (int i = 0; i < n; ++i) s += i ? ",?" : "?";
  return s + ")";
}

// Fast settings for a database written once by one process.
constexpr const char* kBulkLoadPragmas =
    "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA page_size=65536; PRAGMA locking_mode=EXCLUSIVE; "
    "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-262144;";

}  // namespace twinscope::exporters
