// The SQLite database and statements of sqlite_db.h: opening, settings,
// transaction and errors in one place for both SQLite exports.
#include "export/sqlite_db.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace twinscope::exporters {
namespace {

// Fast settings for a database written once by one process.
constexpr const char* kBulkLoadPragmas =
    "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA page_size=65536; PRAGMA locking_mode=EXCLUSIVE; "
    "PRAGMA temp_store=MEMORY; PRAGMA cache_size=-262144;";

// "(?,?,...)" with `n` placeholders.
std::string Placeholders(int n) {
  std::string s = "(";
  for (int i = 0; i < n; ++i) s += i ? ",?" : "?";
  return s + ")";
}

}  // namespace

void Statement::Step() {
  if (sqlite3_step(s_.get()) != SQLITE_DONE) db_->Fail("insert");
  sqlite3_reset(s_.get());
  ++db_->rows_;
}

Db::Db(const std::string& path, const char* schema) {
  if (unlink(path.c_str()) != 0 && errno != ENOENT)
    throw std::runtime_error("cannot replace " + path + ": " + std::strerror(errno));
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    std::string m = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw std::runtime_error("cannot create " + path + ": " + m);
  }
  try {
    Exec(kBulkLoadPragmas);
    Exec(schema);
    Exec("BEGIN");
  } catch (...) {
    sqlite3_close(db_);
    throw;
  }
}

Db::Db(const std::string& path, ExistingTag, const char* sql) {
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    std::string m = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw std::runtime_error("cannot open " + path + ": " + m);
  }
  try {
    Exec("BEGIN");
    Exec(sql);
  } catch (...) {
    sqlite3_close(db_);
    throw;
  }
}

// A Statement left unfinalized keeps the connection open until it is (close_v2).
Db::~Db() { sqlite3_close_v2(db_); }

void Db::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string m = err ? err : "unknown error";
    sqlite3_free(err);
    throw std::runtime_error(std::string("SQLite: ") + m);
  }
}

Statement Db::Insert(const std::string& table, int columns) {
  const std::string sql = "INSERT INTO " + table + " VALUES " + Placeholders(columns);
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) Fail("prepare");
  return Statement(this, s);
}

void Db::Commit(const char* after) {
  Exec("COMMIT");
  Exec(after);
}

void Db::WriteStrings(const TraceReader& reader) {
  Statement str = Insert("strings", 2);
  for (const auto& [id, value] : reader.strings()) str.Bind().I(id).Text(value).Insert();
}

void Db::WriteStrings(const TraceReader& reader, uint64_t process_id) {
  Statement str = Insert("strings", 3);
  for (const auto& [id, value] : reader.strings()) str.Bind().I(process_id).I(id).Text(value).Insert();
}

void Db::Fail(const char* what) {
  throw std::runtime_error(std::string("SQLite ") + what + ": " + sqlite3_errmsg(db_));
}

}  // namespace twinscope::exporters
