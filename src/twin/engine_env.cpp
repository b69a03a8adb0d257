// Engine adapters for `twin --serve`: the shim folder, the sides' environment, the status files.
#include "twin/engine_env.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/env_names.h"

namespace twinscope::twin {

namespace {

bool IsFile(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

EngineShim FindEngineShim(const std::string& exe_dir) {
  EngineShim s;
  if (const char* env = std::getenv(env::kEnginesDir); env && *env) {
    const std::string dir = std::string(env) + "/shim";
    if (IsFile(dir + "/sitecustomize.py")) return {dir, "$TWINSCOPE_ENGINES_DIR (" + dir + ")"};
    return {"", "$TWINSCOPE_ENGINES_DIR is set but " + dir + "/sitecustomize.py does not exist"};
  }
  std::string looked;
  for (const std::string& dir : {exe_dir + "/../engines/shim",
#ifdef TWINSCOPE_SOURCE_DIR
                                 std::string(TWINSCOPE_SOURCE_DIR) + "/python/twinscope/engines/shim"
#endif
       }) {
    if (IsFile(dir + "/sitecustomize.py")) return {dir, dir};
    looked += (looked.empty() ? "" : ", ") + dir;
  }
  return {"", "no engine adapter shim (sitecustomize.py) in " + looked + ": set TWINSCOPE_ENGINES_DIR"};
}

EnvList EngineAdapterEnv(const EngineAdapterSetup& setup, const std::string& role, const std::string& out_dir,
                         bool follow) {
  EnvList env;
  const std::string mode = setup.shim_dir.empty() ? "off" : setup.mode;
  env.emplace_back(env::kEngineAdapter, mode);
  if (mode == "off") return env;
  const char* user = std::getenv("PYTHONPATH");
  env.emplace_back("PYTHONPATH", setup.shim_dir + (user && *user ? ":" + std::string(user) : std::string()));
  env.emplace_back(env::kScheduleOut, out_dir + "/schedule-" + role + ".jsonl");
  env.emplace_back(env::kRequestTrace, out_dir + "/requests-" + role + ".jsonl");
  env.emplace_back(env::kAdapterStatus, out_dir + "/adapter-" + role + ".json");
  if (follow) env.emplace_back(env::kScheduleFollow, out_dir + "/schedule-primary.jsonl");
  std::ostringstream t;
  t << setup.follow_step_timeout_s;
  env.emplace_back(env::kFollowStepTimeout, t.str());
  return env;
}

nlohmann::json ReadAdapterStatus(const std::string& out_dir, const std::string& role) {
  std::ifstream f(out_dir + "/adapter-" + role + ".json");
  if (!f) return nullptr;
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  return j.is_object() ? j : nlohmann::json(nullptr);
}

std::string DescribeAdapter(const nlohmann::json& st, const std::string& role) {
  if (!st.is_object()) return "the " + role + "'s engine adapter wrote no status: none was loaded";
  std::string line = "the " + role + "'s engine adapter (" + st.value("engine", std::string("?")) + " " +
                     st.value("version", std::string("?")) + "): " + st.value("mode", std::string("?"));
  if (st.contains("steps")) line += ", " + std::to_string(st.value("steps", 0)) + " steps";
  if (st.value("forced_steps", 0) > 0) line += ", " + std::to_string(st.value("forced_steps", 0)) + " forced";
  if (st.value("timeouts", 0) > 0) line += ", " + std::to_string(st.value("timeouts", 0)) + " step timeouts";
  const std::string msg = st.value("message", std::string());
  if (!msg.empty()) line += " (" + msg + ")";
  return line;
}

bool AdapterRecorded(const nlohmann::json& st) {
  return st.is_object() && st.value("supported", false) && st.value("mode", std::string()) == "record" &&
         st.value("steps", 0) > 0;
}

std::vector<std::string> AdapterWarnings(const nlohmann::json& st) {
  std::vector<std::string> out;
  if (!st.is_object()) return out;
  auto take = [&](const nlohmann::json& list) {
    if (!list.is_array()) return;
    for (const auto& e : list) out.push_back(e.is_string() ? e.get<std::string>() : e.dump());
  };
  take(st.value("warnings", nlohmann::json()));
  if (st.contains("capacity") && st["capacity"].is_object()) take(st["capacity"].value("warnings", nlohmann::json()));
  take(st.value("errors", nlohmann::json()));
  return out;
}

}  // namespace twinscope::twin
