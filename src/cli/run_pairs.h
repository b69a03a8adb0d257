// A twin run of several processes: pairs the primary's processes with the shadow's (src/procs),
// joins each pair into its own folder, compares launcher ranks, and writes processes.json
// (docs/processes.md).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/run_dir.h"
#include "join/join_model.h"
#include "procs/pairing.h"
#include "procs/ranks.h"
#include "views/export/sqlite_ranks.h"

namespace twinscope::cli {

struct RunJoinRequest {
  std::string out_dir;  // the twin/join folder: the main pair's views here, the others in pairs/<label>/
  join::JoinOptions options;
  procs::PairingOptions pairing;
  size_t top = 10;
};

// Pairs and joins every pair of `primary` and `shadow`; prints a processes table when there is more
// than one process, the rank comparison where there are ranks. Returns 0, or 1 if no pair could be
// joined. `main_model` (may be null) receives the main pair's model.
int JoinRunPairs(const RunSide& primary, const RunSide& shadow, const RunJoinRequest& request,
                 join::JoinedModel* main_model = nullptr);

// `--pair PRIMARY_PID=SHADOW_PID` (repeatable) and `--pair-by rank|tree` on `sub`, parsed into
// `options` when the command runs (a malformed pair is a usage error naming the value).
void AddPairingFlags(CLI::App* sub, procs::PairingOptions* options);

// The RunSide named `side_name` of `path` (a trace file, a run folder or a twin folder).
StatusOr<RunSide> SideOf(const std::string& path, const std::string& side_name);

// The rank comparison of processes.json ("ranks"), as RanksJson wrote it, with each rank's process in
// `owners`. False if it is not there whole (fewer than two ranks, or written by an older twinscope).
bool RanksFromJson(const nlohmann::json& j, procs::RankComparison* c, std::vector<exporters::RankOwner>* owners);

// Adds the rank comparison of the joined run folder `dir` (its processes.json) to the SQLite database `db`
// (`twinscope export DIR --format sqlite`, which exports the main pair's join): the tables join.sqlite has.
// Ok with nothing added where the run has no ranks; an error (the tables stay empty) where processes.json's
// comparison cannot be read.
Status AddRunRanksToDatabase(const std::string& dir, const std::string& db);

// The processes.json of a joined run folder, printed as `twinscope stats DIR` shows it (nothing if
// the folder has none). Returns false if there is none.
bool PrintProcessesJson(const std::string& dir);

// `twinscope stats` on a run folder of several traces with launcher ranks (record runs): the rank
// comparison from the traces' kernel records. Prints nothing where fewer than two traces carry ranks.
void PrintRankComparisonOfTraces(const RunSide& side);

}  // namespace twinscope::cli
