// Shared autotune caches for the twins: XLA's per-fusion cache, Inductor's and Triton's (with Triton's
// @triton.autotune choices kept on disk).
#include "twin/autotune_env.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace twinscope::twin {
namespace {

// A folder that holds anything (an earlier run's cache entries).
bool NonEmptyDir(const std::string& d) {
  DIR* dir = opendir(d.c_str());
  if (!dir) return false;
  bool any = false;
  while (dirent* e = readdir(dir))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      any = true;
      break;
    }
  closedir(dir);
  return any;
}

}  // namespace

AutotuneEnv ShareAutotuneCaches(const std::string& out_dir, const std::function<const char*(const char*)>& lookup,
                                bool at_once) {
  auto get = [&](const char* name) -> const char* { return lookup ? lookup(name) : std::getenv(name); };
  AutotuneEnv a;
  const std::string dir = out_dir + "/autotune-cache";
  a.json = {{"dir", dir}, {"set", nlohmann::json::object()}, {"kept", nlohmann::json::array()}};
  std::vector<std::string> set, kept, warm;
  a.json["warm"] = nlohmann::json::object();
  // Whether a cache already held entries when the run started (an earlier run into this -o DIR, or the
  // user's own cache folder): the twins then reuse earlier choices, said in the note and in twin.json.
  auto check_warm = [&](const char* name, const std::string& d) {
    const bool w = NonEmptyDir(d);
    a.json["warm"][name] = w;
    if (w) warm.push_back(std::string(name) + " (" + d + ")");
  };
  auto make = [&](const std::string& d) {
    mkdir(dir.c_str(), 0755);  // the folder may exist; a failure shows up as the framework's own message
    mkdir(d.c_str(), 0755);
  };
  {
    constexpr char kFlag[] = "--xla_gpu_per_fusion_autotune_cache_dir";
    const char* cur = get("XLA_FLAGS");
    const std::string flags = cur ? cur : "";
    if (flags.find(kFlag) != std::string::npos) {
      kept.push_back("XLA_FLAGS " + std::string(kFlag));
    } else {
      const std::string d = dir + "/xla";
      check_warm("xla", d);
      make(d);
      const std::string value = flags + (flags.empty() ? "" : " ") + kFlag + "=" + d;
      a.env.emplace_back("XLA_FLAGS", value);
      set.push_back(std::string("XLA_FLAGS+=") + kFlag + "=" + d);
      a.json["set"]["XLA_FLAGS"] = value;
    }
  }
  for (const auto& [name, sub] :
       {std::pair<const char*, const char*>{"TORCHINDUCTOR_CACHE_DIR", "inductor"}, {"TRITON_CACHE_DIR", "triton"}}) {
    const char* cur = get(name);
    if (cur && *cur) {
      kept.push_back(name);
      check_warm(sub, cur);
      continue;
    }
    const std::string d = dir + "/" + sub;
    check_warm(sub, d);
    make(d);
    a.env.emplace_back(name, d);
    set.push_back(std::string(name) + "=" + d);
    a.json["set"][name] = d;
  }
  // Triton keeps @triton.autotune's choices in memory only unless TRITON_CACHE_AUTOTUNING=1: without it
  // each twin benchmarks on its own and may choose another config (another grid).
  if (const char* cur = get("TRITON_CACHE_AUTOTUNING"); cur && *cur) {
    kept.push_back(std::string("TRITON_CACHE_AUTOTUNING=") + cur);
  } else {
    a.env.emplace_back("TRITON_CACHE_AUTOTUNING", "1");
    set.push_back("TRITON_CACHE_AUTOTUNING=1");
    a.json["set"]["TRITON_CACHE_AUTOTUNING"] = "1";
  }
  for (const auto& k : kept) a.json["kept"].push_back(k);
  a.json["at_once"] = at_once;
  a.json["warm_at_start"] = !warm.empty();
  a.note = at_once ? "autotune caches shared by both runs (they start together: whichever side tunes a kernel "
                     "first writes the choice, so the primary may adopt a choice the shadow made under the probe, "
                     "and the shadow reuses what the primary has written; a run before fills them for both):"
                   : "autotune caches shared by both runs (the primary fills them first):";
  for (size_t i = 0; i < set.size(); ++i) a.note += (i ? ", " : " ") + set[i];
  if (set.empty()) a.note += " none set";
  if (!kept.empty()) {
    a.note += "; kept the user's";
    for (size_t i = 0; i < kept.size(); ++i) a.note += (i ? ", " : " ") + kept[i];
  }
  if (!warm.empty()) {
    a.note += "; WARM at the start (an earlier run's choices are reused by both sides:";
    for (size_t i = 0; i < warm.size(); ++i) a.note += (i ? ", " : " ") + warm[i];
    a.note += "; remove " + dir + " for a cold start)";
  }
  return a;
}

void AutotuneEnv::Apply(std::vector<std::pair<std::string, std::string>>* primary,
                        std::vector<std::pair<std::string, std::string>>* shadow, nlohmann::json* record) const {
  primary->insert(primary->end(), env.begin(), env.end());
  shadow->insert(shadow->end(), env.begin(), env.end());
  *record = json;
  std::fprintf(stderr, "twinscope twin: %s\n", note.c_str());
}

}  // namespace twinscope::twin
