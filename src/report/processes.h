// The report's "Processes" section input (docs/report.md): the process pairs of a twin run of several
// processes, the unpaired ones and the rank comparison. Typed, filled by src/cli from the pairing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "procs/ranks.h"

namespace twinscope::report {

// One primary/shadow pair of the run, joined on its own.
struct ProcessPairRow {
  std::string label;   // "rank 1", "python3 #2"
  std::string rule;    // how it was paired: "rank", "tree", "command", "only", "user"
  std::string folder;  // its views, relative to the run folder: "." (the main pair) or "pairs/rank-1"
  bool main = false;   // the main pair (its views at the run folder's top)
  bool joined = false;
  bool has_report = false;  // its report.html was written (linked from the others)
  int64_t primary_pid = 0, shadow_pid = 0;
  std::string primary_command, shadow_command;  // short names (procs::ShortName)
  std::optional<int64_t> rank;                  // the launcher's rank (both sides)
  bool counted = false;                         // the join's counts below are known
  uint64_t shadow_launches = 0, exact = 0, primary_target_launches = 0;
};

// A process with GPU work that no rule paired.
struct UnpairedProcessRow {
  std::string side;  // "primary" / "shadow"
  int64_t pid = 0;
  std::string command;
  std::optional<int64_t> rank;
  uint64_t launches = 0;  // launch records (primary) or traced launches (shadow)
};

struct RunProcesses {
  std::vector<ProcessPairRow> pairs;  // the main pair first
  size_t current = 0;                 // the pair whose report this is (index into pairs)
  std::vector<UnpairedProcessRow> unpaired;
  uint64_t primary_without_gpu_work = 0, shadow_without_gpu_work = 0;
  std::vector<std::string> notes;  // the pairing's notes, one line each
  // The rank comparison (launcher ranks on both sides, >= 2 ranks); null: none.
  const procs::RankComparison* ranks = nullptr;
  std::vector<size_t> rank_pair;       // per ranks->ranks entry: its pair (index into pairs), or pairs.size()
  size_t max_rank_step_rows = 200;     // steps where one rank stood out, listed (the rest counted)
  size_t max_rank_step_cells = 20000;  // rows x ranks of that table: fewer rows with many ranks
};

// The link from the report in `from_folder` to the one in `to_folder` (folders as ProcessPairRow::folder):
// "report.html", "pairs/rank-1/report.html", "../../report.html", "../rank-2/report.html".
std::string PairReportLink(const std::string& from_folder, const std::string& to_folder);

}  // namespace twinscope::report
