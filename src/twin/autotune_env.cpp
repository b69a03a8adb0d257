// Shared autotune caches for the twins: XLA's per-fusion cache, Inductor's and Triton's.
#include "twin/autotune_env.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

namespace twinscope::twin {

AutotuneEnv ShareAutotuneCaches(const std::string& out_dir, const std::function<const char*(const char*)>& lookup,
                                bool at_once) {
  auto get = [&](const char* name) -> const char* { return lookup ? lookup(name) : std::getenv(name); };
  AutotuneEnv a;
  const std::string dir = out_dir + "/autotune-cache";
  a.json = {{"dir", dir}, {"set", nlohmann::json::object()}, {"kept", nlohmann::json::array()}};
  std::vector<std::string> set, kept;
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
      continue;
    }
    const std::string d = dir + "/" + sub;
    make(d);
    a.env.emplace_back(name, d);
    set.push_back(std::string(name) + "=" + d);
    a.json["set"][name] = d;
  }
  for (const auto& k : kept) a.json["kept"].push_back(k);
  a.note = at_once ? "autotune caches shared by both runs (they start together: the shadow reuses what the primary "
                     "has written when it tunes the same kernel; a run before fills them for both):"
                   : "autotune caches shared by both runs (the primary fills them first):";
  for (size_t i = 0; i < set.size(); ++i) a.note += (i ? ", " : " ") + set[i];
  if (set.empty()) a.note += " none set";
  if (!kept.empty()) {
    a.note += "; kept the user's";
    for (size_t i = 0; i < kept.size(); ++i) a.note += (i ? ", " : " ") + kept[i];
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
