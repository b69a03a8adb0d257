// The rank comparison in SQLite (docs/sqlite-schema.md, "Ranks"): tables `ranks`, `rank_step` and
// `rank_finding`, made (empty) in every joined and every run database, filled where a run's launcher
// ranks were compared (procs::CompareRanks): the main pair's join.sqlite of a twin run, the export of a
// record run with ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "procs/ranks.h"

// The rank tables and their index, empty (IF NOT EXISTS: a database written before them gets them too).
#define TWINSCOPE_SQLITE_RANK_TABLES                                                                             \
  "CREATE TABLE IF NOT EXISTS ranks (rank INTEGER NOT NULL, pid INTEGER, process_id INTEGER, pair TEXT, "        \
  "steps INTEGER, slowest_in INTEGER, stands_out_in INTEGER, waited_in INTEGER);\n"                              \
  "CREATE TABLE IF NOT EXISTS rank_step (step_index INTEGER NOT NULL, step TEXT NOT NULL, rank INTEGER NOT "     \
  "NULL, kernels INTEGER, kernel_ns INTEGER, span_ns INTEGER, slowest INTEGER NOT NULL, stands_out INTEGER NOT " \
  "NULL, ratio REAL, span_slowest INTEGER NOT NULL, waited INTEGER NOT NULL);\n"                                 \
  "CREATE INDEX IF NOT EXISTS rank_step_step ON rank_step(step_index, rank);\n"                                  \
  "CREATE TABLE IF NOT EXISTS rank_finding (step_index INTEGER NOT NULL, step TEXT NOT NULL, rank INTEGER NOT "  \
  "NULL, ratio REAL, text TEXT NOT NULL);\n"

namespace twinscope::exporters {

class Db;

// Who each compared rank is (parallel to RankComparison::ranks).
struct RankOwner {
  int64_t pid = 0;          // its (primary) process; 0: unknown
  uint64_t process_id = 0;  // process.id of a run database; 0: none (NULL)
  std::string pair;         // its process pair's label in a twin run; "": none (NULL)
};

// Writes `c` into the rank tables of `db` (inside its transaction) and its meta key `ranks` (JSON:
// `source`, `ranks`, `steps`, `steps_standing_out`, `min_ratio`). Throws as Db does.
void WriteRankTables(Db& db, const procs::RankComparison& c, const std::vector<RankOwner>& owners,
                     const std::string& source);

// The same into the existing database `path` (a join.sqlite written before the ranks were compared):
// its rank tables are made if it has none. Fails with SQLite's message, or "built without SQLite".
Status AddRankTables(const std::string& path, const procs::RankComparison& c, const std::vector<RankOwner>& owners,
                     const std::string& source);

}  // namespace twinscope::exporters
