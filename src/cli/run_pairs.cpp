// Joining a twin run of several processes, pair by pair (docs/processes.md).
#include "cli/run_pairs.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include "cli/join_outputs.h"
#include "procs/rank_inputs.h"
#include "procs/ranks.h"
#include "views/export/export.h"
#include "views/export/sqlite_ranks.h"
#include "views/join_writer.h"
#include "views/report/processes.h"

namespace twinscope::cli {
namespace {

procs::ProcessRef RefOf(const RunTrace& t) {
  procs::ProcessRef r;
  r.path = t.path;
  r.pid = static_cast<uint32_t>(t.process.pid);
  r.ppid = static_cast<uint32_t>(t.process.ppid);
  for (int a : t.process.ancestors) r.ancestors.push_back(static_cast<uint32_t>(a));
  r.top = t.process.top;
  r.rank = t.process.rank;
  r.local_rank = t.process.local_rank;
  r.host = t.process.host;
  // The devices it used: the collector's {"ordinal": N, ...} objects, the block probe's ordinals.
  const auto devices = t.last_status.find("devices");
  if (devices != t.last_status.end() && devices->is_array())
    for (const auto& d : *devices) {
      if (d.is_number_integer() && d.get<int64_t>() >= 0) r.devices.push_back(d.get<uint32_t>());
      if (d.is_object() && d.contains("ordinal") && d["ordinal"].is_number_integer() &&
          d["ordinal"].get<int64_t>() >= 0)
        r.devices.push_back(d["ordinal"].get<uint32_t>());
    }
  r.command_line = t.process.command_line;
  r.start_realtime_ns = t.process.start_realtime_ns;
  r.gpu_work = t.gpu_work() ? std::max<uint64_t>(1, t.Launches()) : 0;
  return r;
}

std::string FolderName(const std::string& label) {
  std::string s;
  for (char c : label) {
    const bool keep =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (c == ' ')
      s += (label.rfind("rank ", 0) == 0) ? '-' : '_';
    else if (c == '#')
      continue;
    else
      s += keep ? c : '_';
  }
  return s.empty() ? "pair" : s;
}

std::string Short(const procs::ProcessRef& p) {
  std::string s = procs::ShortName(p.command_line);
  return s.empty() ? "?" : s;
}

nlohmann::json ProcessJson(const procs::ProcessRef& p) {
  nlohmann::json j = {{"pid", p.pid}, {"command", Short(p)}, {"trace", p.path}, {"gpu_work", p.gpu_work}};
  if (p.rank) j["rank"] = *p.rank;
  if (p.local_rank) j["local_rank"] = *p.local_rank;
  if (!p.host.empty()) j["host"] = p.host;
  if (!p.devices.empty()) j["devices"] = p.devices;
  return j;
}

// The comparison in processes.json: all of it (RanksFromJson reads it back for `export DIR --format sqlite`),
// with each rank's process (`owners`, in c.ranks order).
nlohmann::json RanksJson(const procs::RankComparison& c, const std::vector<exporters::RankOwner>& owners) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : c.steps) {
    steps.push_back({{"range", s.range},
                     {"kernel_ns", s.kernel_ns},
                     {"span_ns", s.span_ns},
                     {"kernels", s.kernels},
                     {"slowest_rank", c.ranks[s.slowest]},
                     {"ratio", s.ratio},
                     {"stands_out", s.stands_out},
                     {"span_slowest_rank", c.ranks[s.span_slowest]},
                     {"span_ratio", s.span_ratio},
                     {"waited", s.waited},
                     {"text", s.text}});
  }
  nlohmann::json per_rank = nlohmann::json::array();
  for (size_t i = 0; i < c.ranks.size(); ++i) {
    nlohmann::json r = {{"rank", c.ranks[i]},
                        {"slowest_in", c.slowest_in[i]},
                        {"stands_out_in", c.stands_out_in[i]},
                        {"waited_in", c.waited_in[i]}};
    if (i < owners.size()) {
      r["pid"] = owners[i].pid;
      r["pair"] = owners[i].pair;
    }
    per_rank.push_back(std::move(r));
  }
  return {{"ranks", per_rank},
          {"steps", steps},
          {"steps_standing_out", c.steps_standing_out},
          {"findings", c.findings},
          {"min_ratio", c.min_ratio}};
}

void PrintRanks(const procs::RankComparison& c, const char* what) {
  if (c.ranks.size() < 2) return;
  std::printf(
      "\nranks compared (%s; docs/processes.md): %zu steps on at least two ranks, %llu where one rank stood "
      "out (>= 1.2x the others' median)\n",
      what, c.steps.size(), static_cast<unsigned long long>(c.steps_standing_out));
  for (size_t i = 0; i < c.ranks.size(); ++i)
    std::printf(
        "  rank %lld: most kernel time in %llu steps, stood out in %llu; a longer span only (waits, "
        "time-slicing) in %llu\n",
        static_cast<long long>(c.ranks[i]), static_cast<unsigned long long>(c.slowest_in[i]),
        static_cast<unsigned long long>(c.stands_out_in[i]), static_cast<unsigned long long>(c.waited_in[i]));
  for (const auto& f : c.findings) std::printf("  %s\n", f.c_str());
}

bool MakeDirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty()) mkdir(cur.c_str(), 0755);
    }
    if (i < path.size()) cur += path[i];
  }
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

void AddPairingFlags(CLI::App* sub, procs::PairingOptions* options) {
  sub->add_option_function<std::vector<std::string>>(
         "--pair",
         [options](const std::vector<std::string>& pairs) {
           for (const auto& v : pairs) {
             const size_t eq = v.find('=');
             char* end1 = nullptr;
             char* end2 = nullptr;
             const unsigned long a = eq == std::string::npos ? 0 : std::strtoul(v.c_str(), &end1, 10);
             const unsigned long b = eq == std::string::npos ? 0 : std::strtoul(v.c_str() + eq + 1, &end2, 10);
             if (eq == std::string::npos || end1 != v.c_str() + eq || !end2 || *end2 || !a || !b)
               throw CLI::ValidationError("--pair", "'" + v + "' is not PRIMARY_PID=SHADOW_PID (e.g. 4711=4802)");
             options->by_pid.emplace_back(static_cast<uint32_t>(a), static_cast<uint32_t>(b));
           }
         },
         "Pair these processes of a run of several (PRIMARY_PID=SHADOW_PID, the pids in the traces' headers: "
         "twinscope stats DIR/primary); repeatable; docs/processes.md")
      ->allow_extra_args(false);
  sub->add_option_function<std::string>(
         "--pair-by", [options](const std::string& v) { options->ignore_ranks = v == "tree"; },
         "rank (default: launcher ranks first, then the process tree) or tree (ignore ranks)")
      ->check(CLI::IsMember({"rank", "tree"}));
}

StatusOr<RunSide> SideOf(const std::string& path, const std::string& side_name) {
  auto l = ListRun(path);
  if (!l.ok()) return l.status();
  const RunSide* side = l->twin ? l->Side(side_name) : (l->sides.empty() ? nullptr : &l->sides.front());
  if (!side) return Status::Error(path + ": no " + side_name + " side there");
  if (side->traces.empty()) return Status::Error(side->dir + ": no trace there");
  return *side;
}

int JoinRunPairs(const RunSide& primary, const RunSide& shadow, const RunJoinRequest& r,
                 join::JoinedModel* main_model) {
  std::vector<procs::ProcessRef> p, s;
  for (const auto& t : primary.traces) p.push_back(RefOf(t));
  for (const auto& t : shadow.traces) s.push_back(RefOf(t));
  procs::Pairing pairing = procs::PairProcesses(p, s, r.pairing);
  const bool several = p.size() > 1 || s.size() > 1;
  if (pairing.pairs.empty()) {
    // No rule paired anything (the two sides run different commands): join each side's main trace.
    std::string pwhy, swhy;
    const RunTrace* pm = MainTrace(primary, &pwhy);
    const RunTrace* sm = MainTrace(shadow, &swhy);
    if (!pm || !sm) {
      std::fprintf(stderr,
                   "twinscope join: no primary process could be paired with a shadow process (%zu and %zu with GPU "
                   "work); name pairs with --pair PRIMARY_PID=SHADOW_PID\n",
                   p.size() - pairing.primary_without_work, s.size() - pairing.shadow_without_work);
      return 1;
    }
    const size_t pi = static_cast<size_t>(pm - primary.traces.data()),
                 si = static_cast<size_t>(sm - shadow.traces.data());
    std::fprintf(stderr,
                 "twinscope join: no rule paired the processes (rank, tree, command line); joining the main traces: "
                 "primary %s (%s), shadow %s (%s); name pairs with --pair PRIMARY_PID=SHADOW_PID\n",
                 pm->path.c_str(), pwhy.c_str(), sm->path.c_str(), swhy.c_str());
    pairing.notes.push_back("no rule paired the processes: the main traces were joined (" + pwhy + "; " + swhy + ")");
    auto drop = [](std::vector<size_t>& v, size_t i) { v.erase(std::remove(v.begin(), v.end(), i), v.end()); };
    drop(pairing.primary_unpaired, pi);
    drop(pairing.shadow_unpaired, si);
    pairing.pairs.push_back(procs::ProcessPair{pi, si, procs::PairRule::kOnly, "main"});
  }
  // The main pair: the most traced shadow launches (its views stay at the folder's top).
  size_t main = 0;
  for (size_t i = 1; i < pairing.pairs.size(); ++i)
    if (s[pairing.pairs[i].shadow].gpu_work > s[pairing.pairs[main].shadow].gpu_work) main = i;

  nlohmann::json pairs_json = nlohmann::json::array();
  std::vector<procs::RankInput> ranks;
  // Every pair's report is written last, once the whole run's processes and ranks are known (the report's
  // "Processes" section): each pair keeps its report's bounded input until then. A run of one process
  // writes its report at once, as a lone join does.
  report::RunProcesses run_processes;
  std::vector<views::DeferredReport> reports;
  std::vector<size_t> rank_pair;  // per ranks entry: its row in run_processes.pairs
  std::vector<exporters::RankOwner> rank_owners;
  bool all_ranked = true;
  int rc = 1;
  // The main pair first, so its summary is the one printed at the top.
  std::vector<size_t> order = {main};
  for (size_t i = 0; i < pairing.pairs.size(); ++i)
    if (i != main) order.push_back(i);
  for (size_t i : order) {
    const procs::ProcessPair& pr = pairing.pairs[i];
    const std::string folder = i == main ? "." : "pairs/" + FolderName(pr.label);
    JoinOutputRequest jr;
    jr.primary = p[pr.primary].path;
    jr.shadow = s[pr.shadow].path;
    jr.out_dir = r.out_dir.empty() ? "" : (i == main ? r.out_dir : r.out_dir + "/" + folder);
    jr.options = r.options;
    jr.top = r.top;
    if (several) {
      std::printf("\n== pair %s (paired by %s): primary pid %u %s, shadow pid %u%s\n", pr.label.c_str(),
                  procs::PairRuleName(pr.rule), p[pr.primary].pid, Short(p[pr.primary]).c_str(), s[pr.shadow].pid,
                  i == main ? " [main pair: its views are at the folder's top]" : "");
      std::fflush(stdout);
    }
    if (!jr.out_dir.empty() && !MakeDirs(jr.out_dir)) {
      std::fprintf(stderr, "twinscope join: cannot create %s\n", jr.out_dir.c_str());
      continue;
    }
    join::JoinedModel m;
    views::DeferredReport deferred;
    const int one = JoinAndReport(jr, &m, several ? &deferred : nullptr);
    report::ProcessPairRow row;
    row.label = pr.label;
    row.rule = procs::PairRuleName(pr.rule);
    row.folder = folder;
    row.main = i == main;
    row.joined = one == 0;
    row.has_report = !deferred.path.empty();
    row.primary_pid = p[pr.primary].pid;
    row.shadow_pid = s[pr.shadow].pid;
    row.primary_command = Short(p[pr.primary]);
    row.shadow_command = Short(s[pr.shadow]);
    if (p[pr.primary].rank && s[pr.shadow].rank) row.rank = p[pr.primary].rank;
    nlohmann::json pj = {
        {"label", pr.label}, {"rule", procs::PairRuleName(pr.rule)},  {"folder", folder},
        {"main", i == main}, {"primary", ProcessJson(p[pr.primary])}, {"shadow", ProcessJson(s[pr.shadow])},
        {"joined", one == 0}};
    if (one == 0 || m.summary.shadow_launches) {
      pj["shadow_launches"] = m.summary.shadow_launches;
      pj["exact"] = m.summary.exact;
      pj["primary_target_launches"] = m.summary.primary_target_launches;
      row.counted = true;
      row.shadow_launches = m.summary.shadow_launches;
      row.exact = m.summary.exact;
      row.primary_target_launches = m.summary.primary_target_launches;
      if (p[pr.primary].rank && s[pr.shadow].rank) {
        ranks.push_back(procs::RankInputFromJoin(*p[pr.primary].rank, m));
        rank_pair.push_back(run_processes.pairs.size());
        rank_owners.push_back(exporters::RankOwner{p[pr.primary].pid, 0, pr.label});
      }
    }
    run_processes.pairs.push_back(std::move(row));
    reports.push_back(std::move(deferred));
    if (!(p[pr.primary].rank && s[pr.shadow].rank)) all_ranked = false;
    if (one == 0) rc = 0;
    pairs_json.push_back(pj);
    if (i == main && main_model) *main_model = std::move(m);
  }
  nlohmann::json out = {{"pairs", pairs_json},
                        {"notes", pairing.notes},
                        {"primary_without_gpu_work", pairing.primary_without_work},
                        {"shadow_without_gpu_work", pairing.shadow_without_work}};
  nlohmann::json unpaired = nlohmann::json::array();
  auto add_unpaired = [&](const procs::ProcessRef& ref, const char* side) {
    nlohmann::json u = ProcessJson(ref);
    u["side"] = side;
    unpaired.push_back(std::move(u));
  };
  for (size_t i : pairing.primary_unpaired) add_unpaired(p[i], "primary");
  for (size_t i : pairing.shadow_unpaired) add_unpaired(s[i], "shadow");
  out["unpaired"] = unpaired;
  procs::RankComparison cmp;
  const bool compared = ranks.size() >= 2 && all_ranked;
  if (compared) {
    cmp = procs::CompareRanks(ranks);
    out["ranks"] = RanksJson(cmp, rank_owners);
  }
  if (!r.out_dir.empty()) {
    std::ofstream f(r.out_dir + "/processes.json");
    f << out.dump(2) << "\n";
  }
  // The comparison in the main pair's database (docs/sqlite-schema.md, "Ranks").
  const std::string main_db = r.out_dir + "/join.sqlite";
  struct stat db_st {};
  if (compared && !r.out_dir.empty() && exporters::SqliteAvailable() && stat(main_db.c_str(), &db_st) == 0) {
    Status added = exporters::AddRankTables(main_db, cmp, rank_owners, "the join of each rank's process pair");
    if (!added.ok()) std::fprintf(stderr, "twinscope join: sqlite: %s\n", added.message().c_str());
  }
  // Every pair's report, each with the whole run's processes (docs/report.md, "Processes").
  if (several && !r.out_dir.empty()) {
    for (size_t i : pairing.primary_unpaired)
      run_processes.unpaired.push_back({"primary", p[i].pid, Short(p[i]), p[i].rank, p[i].gpu_work});
    for (size_t i : pairing.shadow_unpaired)
      run_processes.unpaired.push_back({"shadow", s[i].pid, Short(s[i]), s[i].rank, s[i].gpu_work});
    run_processes.primary_without_gpu_work = pairing.primary_without_work;
    run_processes.shadow_without_gpu_work = pairing.shadow_without_work;
    run_processes.notes = pairing.notes;
    if (compared) {
      run_processes.ranks = &cmp;
      run_processes.rank_pair = rank_pair;
    }
    std::printf("\n");
    for (size_t k = 0; k < reports.size(); ++k) {
      if (reports[k].path.empty()) continue;
      run_processes.current = k;
      ReportOptions options;
      options.processes = &run_processes;
      views::WriteDeferredReport(reports[k], options, stdout);  // a failure is said on stderr
      reports[k] = {};                                          // its memory back before the next
    }
  }
  if (several) {
    std::printf("\n");
    if (!r.out_dir.empty()) PrintProcessesJson(r.out_dir);
  }
  return rc;
}

bool RanksFromJson(const nlohmann::json& j, procs::RankComparison* c, std::vector<exporters::RankOwner>* owners) {
  try {
    *c = {};
    owners->clear();
    std::map<int64_t, size_t> index;
    for (const auto& r : j.at("ranks")) {
      index[r.at("rank").get<int64_t>()] = c->ranks.size();
      c->ranks.push_back(r.at("rank").get<int64_t>());
      c->slowest_in.push_back(r.at("slowest_in").get<uint64_t>());
      c->stands_out_in.push_back(r.at("stands_out_in").get<uint64_t>());
      c->waited_in.push_back(r.at("waited_in").get<uint64_t>());
      owners->push_back(exporters::RankOwner{r.value("pid", int64_t{0}), 0, r.value("pair", std::string())});
    }
    for (const auto& s : j.at("steps")) {
      procs::RankStepRow row;
      row.range = s.at("range").get<std::string>();
      row.kernel_ns = s.at("kernel_ns").get<std::vector<uint64_t>>();
      row.span_ns = s.at("span_ns").get<std::vector<uint64_t>>();
      row.kernels = s.at("kernels").get<std::vector<uint64_t>>();  // absent before the comparison was whole
      row.slowest = index.at(s.at("slowest_rank").get<int64_t>());
      row.ratio = s.at("ratio").get<double>();
      row.stands_out = s.at("stands_out").get<bool>();
      row.span_slowest = index.at(s.at("span_slowest_rank").get<int64_t>());
      row.span_ratio = s.at("span_ratio").get<double>();
      row.waited = s.at("waited").get<bool>();
      row.text = s.at("text").get<std::string>();
      c->steps.push_back(std::move(row));
    }
    c->steps_standing_out = j.at("steps_standing_out").get<uint64_t>();
    c->findings = j.at("findings").get<std::vector<std::string>>();
    c->min_ratio = j.at("min_ratio").get<double>();
    return c->ranks.size() >= 2;
  } catch (const std::exception&) {
    return false;
  }
}

Status AddRunRanksToDatabase(const std::string& dir, const std::string& db) {
  std::ifstream f(dir + "/processes.json");
  if (!f) return Status::Ok();  // a run of one process: nothing to compare
  const auto j = nlohmann::json::parse(f, nullptr, false);
  if (!j.is_object() || !j.contains("ranks")) return Status::Ok();
  procs::RankComparison c;
  std::vector<exporters::RankOwner> owners;
  if (!RanksFromJson(j["ranks"], &c, &owners))
    return Status::Error(dir +
                         "/processes.json: its rank comparison cannot be read (written by an older twinscope?): "
                         "the rank tables are left empty; `twinscope join` of the folder writes it again");
  return exporters::AddRankTables(db, c, owners, "the join of each rank's process pair (processes.json)");
}

bool PrintProcessesJson(const std::string& dir) {
  std::ifstream f(dir + "/processes.json");
  if (!f) return false;
  auto j = nlohmann::json::parse(f, nullptr, false);
  if (!j.is_object()) {
    std::fprintf(stderr, "twinscope: %s/processes.json cannot be read (damaged): the pairs are not listed\n",
                 dir.c_str());
    return false;
  }
  const auto& pairs = j.value("pairs", nlohmann::json::array());
  std::printf("processes (docs/processes.md): %zu pairs; without GPU work: %llu primary, %llu shadow\n", pairs.size(),
              j.value("primary_without_gpu_work", 0ull), j.value("shadow_without_gpu_work", 0ull));
  std::printf("  %-22s %-8s %-28s %-8s %-10s %s\n", "pair", "by", "primary", "shadow", "exact", "views");
  for (const auto& pr : pairs) {
    const uint64_t sl = pr.value("shadow_launches", 0ull), ex = pr.value("exact", 0ull);
    char exact[48];
    if (sl)
      std::snprintf(exact, sizeof exact, "%llu/%llu", static_cast<unsigned long long>(ex),
                    static_cast<unsigned long long>(sl));
    else
      std::snprintf(exact, sizeof exact, "-");
    const auto& pp = pr.value("primary", nlohmann::json::object());
    const auto& sp = pr.value("shadow", nlohmann::json::object());
    std::string prim = std::to_string(pp.value("pid", 0)) + " " + pp.value("command", std::string());
    if (prim.size() > 28) prim = prim.substr(0, 25) + "...";
    std::printf("  %-22s %-8s %-28s %-8d %-10s %s\n", pr.value("label", std::string()).c_str(),
                pr.value("rule", std::string()).c_str(), prim.c_str(), sp.value("pid", 0), exact,
                pr.value("folder", std::string(".")).c_str());
  }
  for (const auto& u : j.value("unpaired", nlohmann::json::array()))
    std::printf("  unpaired %s process: pid %d %s (%llu launches)\n", u.value("side", std::string()).c_str(),
                u.value("pid", 0), u.value("command", std::string()).c_str(), u.value("gpu_work", 0ull));
  for (const auto& n : j.value("notes", nlohmann::json::array()))
    if (n.is_string()) std::printf("  note: %s\n", n.get<std::string>().c_str());
  if (j.contains("ranks") && j["ranks"].is_object()) {
    const auto& rk = j["ranks"];
    std::printf("ranks compared: %zu steps, %llu where one rank's kernel time stood out\n",
                rk.value("steps", nlohmann::json::array()).size(), rk.value("steps_standing_out", 0ull));
    for (const auto& r : rk.value("ranks", nlohmann::json::array()))
      std::printf("  rank %lld: most kernel time in %llu steps, stood out in %llu; a longer span only in %llu\n",
                  r.value("rank", 0ll), r.value("slowest_in", 0ull), r.value("stands_out_in", 0ull),
                  r.value("waited_in", 0ull));
    for (const auto& f2 : rk.value("findings", nlohmann::json::array()))
      if (f2.is_string()) std::printf("  %s\n", f2.get<std::string>().c_str());
  }
  return true;
}

void PrintRankComparisonOfTraces(const RunSide& side) {
  std::vector<procs::RankInput> in;
  for (const auto& t : side.traces) {
    if (!t.process.rank || !t.gpu_work()) continue;
    auto r = procs::RankInputFromTrace(*t.process.rank, t.path);
    if (!r.ok()) {
      std::fprintf(stderr, "twinscope stats: rank %lld: %s\n", static_cast<long long>(*t.process.rank),
                   r.status().message().c_str());
      continue;
    }
    in.push_back(std::move(*r));
  }
  if (in.size() < 2) return;
  PrintRanks(procs::CompareRanks(in), "primary traces: kernel time per step");
}

}  // namespace twinscope::cli
