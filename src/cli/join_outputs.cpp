#include "cli/join_outputs.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "cli/run_pairs.h"
#include "join/join_views.h"
#include "join/joined_run.h"
#include "join/model_file.h"
#include "views/join_doc.h"
#include "views/join_text.h"
#include "views/join_writer.h"

namespace twinscope::cli {
namespace {

bool IsFile(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string BaseName(const std::string& p) {
  size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace

join::JoinOptions TwinOptions(const std::string& dir) {
  join::JoinOptions o;
  const std::string path = dir + "/twin.json";
  // What the join assumes without the file's options, said once on stderr and kept in the model's warnings
  // (join.json): a twin folder without its options must not silently give a different join.
  auto assume = [&](const std::string& what) {
    const std::string w = path + " " + what +
                          ": joined as sequential twins (no overlap flag) without a request trace; "
                          "give the traces to `twinscope join` (--concurrent, --requests) to choose";
    std::fprintf(stderr, "twinscope: warning: %s\n", w.c_str());
    o.warnings.push_back(w);
    return o;
  };
  std::ifstream f(path);
  if (!f) return assume("is missing");
  auto j = nlohmann::json::parse(f, nullptr, false);
  if (!j.is_object())
    return assume(j.is_discarded() ? "is not valid JSON (damaged or cut short)" : "is not a JSON object");
  o.concurrent = j.value("concurrent", false);
  o.serving = j.value("serve", false);
  o.shadow_window_start_realtime_ns = j.value("shadow_start_realtime_ns", uint64_t{0});
  o.shadow_window_end_realtime_ns = j.value("shadow_end_realtime_ns", uint64_t{0});
  o.primary_start_realtime_ns = j.value("primary_start_realtime_ns", uint64_t{0});
  o.primary_end_realtime_ns = j.value("primary_end_realtime_ns", uint64_t{0});
  // A serving run's request trace and schedule; a folder that moved still finds its own copies. One named but
  // found in neither place is said, with what the join does without it.
  auto input = [&](const char* key, const char* without) {
    const auto it = j.find(key);
    std::string p = it != j.end() && it->is_string() ? it->get<std::string>() : "";
    if (!p.empty() && !IsFile(p) && IsFile(dir + "/" + BaseName(p))) p = dir + "/" + BaseName(p);
    if (!p.empty() && !IsFile(p)) {
      const std::string w = path + " names " + key + " " + p + ", which is not there (nor in " + dir + "): " + without;
      std::fprintf(stderr, "twinscope: warning: %s\n", w.c_str());
      o.warnings.push_back(w);
      p.clear();
    }
    return p;
  };
  o.requests.trace = input("request_trace", "joined without per-request views");
  if (!o.requests.trace.empty()) o.requests.schedule = input("schedule", "per-request views without step batches");
  return o;
}

bool IsJoinFolder(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  auto l = ListRun(path);
  return l.ok() && l->twin;
}

StatusOr<std::string> MainTraceOf(const std::string& path, const std::string& side_name, const char* command) {
  auto l = ListRun(path);
  if (!l.ok()) return l.status();
  const RunSide* side = l->twin ? l->Side(side_name) : &l->sides.front();
  if (!side) return Status::Error(path + ": no " + side_name + " side");
  const std::string where = side->dir + (side->name.empty() ? "" : " (" + side->name + ")");
  if (side->traces.empty()) return Status::Error(where + ": no trace there");
  if (side->traces.size() == 1) return side->traces.front().path;  // nothing to choose: joined as it is
  std::string why;
  const RunTrace* main = MainTrace(*side, &why);
  if (!main) {
    std::string list;
    for (const auto& t : side->traces) list += "\n  " + t.path + (t.error.empty() ? ": no GPU work" : ": " + t.error);
    return Status::Error(where + ": no trace with GPU work:" + list);
  }
  if (side->traces.size() > 1)
    std::fprintf(stderr, "%s: %s: %zu traces; joining %s, %s (processes are not paired yet)\n", command,
                 side->name.empty() ? path.c_str() : side->name.c_str(), side->traces.size(), main->path.c_str(),
                 why.c_str());
  return main->path;
}

int JoinAndReport(const JoinOutputRequest& r, join::JoinedModel* model_out, views::DeferredReport* defer_report) {
  // One pass over each trace for the model (and the primary's records the
  // timeline views draw), one more over the shadow for block detail.
  auto run = join::JoinForViews(r.primary, r.shadow, r.options);
  if (!run.ok()) {
    std::fprintf(stderr, "twinscope join: %s\n", run.status().message().c_str());
    return 1;
  }
  views::PrintJoin(stdout, run->model, r.top);
  bool ok = true;
  if (!r.out_dir.empty()) ok = views::WriteJoinViews(&*run, r.out_dir, stdout, "twinscope join", defer_report);
  std::fflush(stdout);
  if (model_out) *model_out = std::move(run->model);
  return ok ? 0 : 1;
}

StatusOr<join::JoinedModel> SavedOrJoined(const std::string& dir, const std::string& primary, const std::string& shadow,
                                          const char* command, join::RecordLog* primary_log, bool* log_filled) {
  if (log_filled) *log_filled = false;
  const std::string saved = dir + "/" + join::kModelFile;
  join::ModelUnusable why = join::ModelUnusable::kNone;
  auto model = join::LoadModel(saved, primary, shadow, &why);
  if (model.ok()) {
    std::fprintf(stderr, "%s: read the saved join %s (twinscope join joins the traces again)\n", command,
                 saved.c_str());
    return model;
  }
  if (why == join::ModelUnusable::kMissing)
    std::fprintf(stderr, "%s: %s has no saved join (%s): joining the traces\n", command, dir.c_str(), join::kModelFile);
  else
    std::fprintf(stderr, "%s: %s: joining the traces again\n", command, model.status().message().c_str());
  if (log_filled) *log_filled = primary_log != nullptr;
  return join::JoinTraces(primary, shadow, TwinOptions(dir), primary_log);
}

int StatsOnJoin(const std::string& path, const std::string& shadow, bool json, size_t top) {
  // A run of several processes joined pair by pair: its processes first, then the main pair's join.
  nlohmann::json processes;
  if (shadow.empty()) {
    std::ifstream pf(path + "/processes.json");
    if (pf) processes = nlohmann::json::parse(pf, nullptr, false);
  }
  std::string main_primary, main_shadow;
  if (processes.is_object() && processes.value("pairs", nlohmann::json::array()).size() > 1) {
    if (!json) PrintProcessesJson(path);
    for (const auto& pr : processes["pairs"])
      if (pr.value("main", false)) {
        main_primary = pr.value("primary", nlohmann::json::object()).value("trace", std::string());
        main_shadow = pr.value("shadow", nlohmann::json::object()).value("trace", std::string());
      }
    if (!json) std::printf("\nthe main pair (its views are at the folder's top):\n");
  }
  auto pt =
      main_primary.empty() ? MainTraceOf(path, "primary", "twinscope stats") : StatusOr<std::string>(main_primary);
  auto st = main_shadow.empty() ? MainTraceOf(shadow.empty() ? path : shadow, "shadow", "twinscope stats")
                                : StatusOr<std::string>(main_shadow);
  for (auto* t : {&pt, &st}) {
    if (!t->ok()) {
      std::fprintf(stderr, "twinscope stats: %s\n", t->status().message().c_str());
      return 1;
    }
  }
  const std::string p = *pt, s = *st;
  auto model = shadow.empty() ? SavedOrJoined(path, p, s, "twinscope stats") : join::JoinTraces(p, s, {});
  if (!model.ok()) {
    std::fprintf(stderr, "twinscope stats: %s\n", model.status().message().c_str());
    return 1;
  }
  if (json) {
    nlohmann::json j = views::JoinJson(*model, {}, {});
    if (processes.is_object()) j["processes"] = processes;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    views::PrintJoin(stdout, *model, top);
  }
  return 0;
}

}  // namespace twinscope::cli
