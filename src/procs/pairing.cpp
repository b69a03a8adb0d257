// Pairing of a primary run's processes with its shadow run's (docs/join.md, "Processes").
#include "procs/pairing.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <tuple>

namespace twinscope::procs {
namespace {

size_t Depth(const ProcessRef& p) { return p.top ? 0 : p.ancestors.size(); }

// Indices of the processes with GPU work, by start time (then pid), so ordinals follow start order.
std::vector<size_t> WithWork(const std::vector<ProcessRef>& v, size_t* without) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].gpu_work > 0)
      idx.push_back(i);
    else
      ++*without;
  }
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return std::tie(v[a].start_realtime_ns, v[a].pid) < std::tie(v[b].start_realtime_ns, v[b].pid);
  });
  return idx;
}

std::string Label(const ProcessRef& p, PairRule rule, size_t ordinal) {
  if (rule == PairRule::kRank && p.rank) return "rank " + std::to_string(*p.rank);
  std::string s = ShortName(p.command_line);
  if (s.empty()) s = "pid " + std::to_string(p.pid);
  return s + " #" + std::to_string(ordinal);
}

}  // namespace

const char* PairRuleName(PairRule r) {
  switch (r) {
    case PairRule::kRank:
      return "rank";
    case PairRule::kTree:
      return "tree";
    case PairRule::kCommand:
      return "command";
    case PairRule::kOnly:
      return "only";
    case PairRule::kUser:
      return "user";
  }
  return "?";
}

std::string CommandSignature(const std::vector<std::string>& command_line) {
  std::string out;
  for (size_t a = 0; a < command_line.size(); ++a) {
    if (a) out += ' ';
    const std::string& s = command_line[a];
    for (size_t i = 0; i < s.size(); ++i) {
      if (std::isdigit(static_cast<unsigned char>(s[i]))) {
        out += "#";
        while (i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) ++i;
      } else {
        out += s[i];
      }
    }
  }
  return out;
}

std::string ShortName(const std::vector<std::string>& command_line) {
  if (command_line.empty()) return "";
  auto base = [](const std::string& s) {
    size_t slash = s.find_last_of('/');
    return slash == std::string::npos ? s : s.substr(slash + 1);
  };
  std::string name = base(command_line[0]);
  if (name.rfind("python", 0) == 0) {
    for (size_t i = 1; i < command_line.size(); ++i) {
      const std::string& a = command_line[i];
      if (a == "-m" && i + 1 < command_line.size()) {
        name += " -m " + command_line[i + 1];
        break;
      }
      if (a == "-c") {
        name += " -c";
        break;
      }
      if (!a.empty() && a[0] != '-') {
        name += " " + base(a);
        break;
      }
    }
  }
  if (name.size() > 48) name = name.substr(0, 45) + "...";
  return name;
}

Pairing PairProcesses(const std::vector<ProcessRef>& primary, const std::vector<ProcessRef>& shadow,
                      const PairingOptions& options) {
  Pairing out;
  std::vector<size_t> p_order = WithWork(primary, &out.primary_without_work);
  std::vector<size_t> s_order = WithWork(shadow, &out.shadow_without_work);
  std::vector<bool> p_used(primary.size(), false), s_used(shadow.size(), false);
  auto add = [&](size_t p, size_t s, PairRule rule, size_t ordinal) {
    p_used[p] = s_used[s] = true;
    out.pairs.push_back(ProcessPair{p, s, rule, Label(primary[p], rule, ordinal)});
  };

  // 1. The user's pairs, by pid.
  for (auto [ppid, spid] : options.by_pid) {
    auto pi = std::find_if(p_order.begin(), p_order.end(), [&](size_t i) { return primary[i].pid == ppid; });
    auto si = std::find_if(s_order.begin(), s_order.end(), [&](size_t i) { return shadow[i].pid == spid; });
    if (pi == p_order.end() || si == s_order.end()) {
      out.notes.push_back("--pair " + std::to_string(ppid) + "=" + std::to_string(spid) + ": " +
                          (pi == p_order.end() ? "no primary process " + std::to_string(ppid)
                                               : "no shadow process " + std::to_string(spid)) +
                          " with GPU work; ignored");
      continue;
    }
    // A pid held by several processes of one side (several hosts, or a pid reused): said, the first taken.
    const auto p_held = std::count_if(p_order.begin(), p_order.end(), [&](size_t i) { return primary[i].pid == ppid; });
    const auto s_held = std::count_if(s_order.begin(), s_order.end(), [&](size_t i) { return shadow[i].pid == spid; });
    if (p_held > 1 || s_held > 1) {
      out.notes.push_back("--pair " + std::to_string(ppid) + "=" + std::to_string(spid) + ": pid " +
                          (p_held > 1 ? std::to_string(ppid) + " is held by " + std::to_string(p_held) + " primary"
                                      : std::to_string(spid) + " is held by " + std::to_string(s_held) + " shadow") +
                          " processes (several hosts, or a pid reused): the first started is paired; ranks tell "
                          "them apart");
    }
    if (p_used[*pi] || s_used[*si]) {
      out.notes.push_back("--pair " + std::to_string(ppid) + "=" + std::to_string(spid) +
                          ": a process named twice; the first pair kept");
      continue;
    }
    add(*pi, *si, PairRule::kUser, 0);
  }

  // 2. Ranks, where both sides have them and each rank is unique on its side.
  if (!options.ignore_ranks) {
    std::map<int64_t, std::vector<size_t>> p_rank, s_rank;
    for (size_t i : p_order)
      if (!p_used[i] && primary[i].rank) p_rank[*primary[i].rank].push_back(i);
    for (size_t i : s_order)
      if (!s_used[i] && shadow[i].rank) s_rank[*shadow[i].rank].push_back(i);
    if (p_rank.empty() != s_rank.empty())
      out.notes.push_back(std::string("launcher ranks on the ") + (p_rank.empty() ? "shadow" : "primary") +
                          " side only: paired by the process tree");
    for (auto& [rank, ps] : p_rank) {
      auto it = s_rank.find(rank);
      if (it == s_rank.end()) continue;
      if (ps.size() != 1 || it->second.size() != 1) {
        out.notes.push_back("rank " + std::to_string(rank) + " is held by several processes: paired by the tree");
        continue;
      }
      add(ps[0], it->second[0], PairRule::kRank, 0);
    }
  }

  // 3. The tree: same command signature, same depth, same ordinal by start time; then 4. the same
  // command signature at any depth.
  auto by_signature = [&](bool with_depth, PairRule rule) {
    using Key = std::pair<std::string, size_t>;
    std::map<Key, std::vector<size_t>> p_groups, s_groups;
    for (size_t i : p_order)
      if (!p_used[i])
        p_groups[{CommandSignature(primary[i].command_line), with_depth ? Depth(primary[i]) : 0}].push_back(i);
    for (size_t i : s_order)
      if (!s_used[i])
        s_groups[{CommandSignature(shadow[i].command_line), with_depth ? Depth(shadow[i]) : 0}].push_back(i);
    for (auto& [key, ps] : p_groups) {
      auto it = s_groups.find(key);
      if (it == s_groups.end()) continue;
      const size_t n = std::min(ps.size(), it->second.size());
      if (ps.size() != it->second.size())
        out.notes.push_back(std::to_string(ps.size()) + " primary and " + std::to_string(it->second.size()) +
                            " shadow processes run `" + ShortName(primary[ps[0]].command_line) + "`: the first " +
                            std::to_string(n) + " by start time paired");
      for (size_t k = 0; k < n; ++k) add(ps[k], it->second[k], rule, k);
    }
  };
  by_signature(true, PairRule::kTree);
  by_signature(false, PairRule::kCommand);

  // 5. One process left on each side.
  std::vector<size_t> p_left, s_left;
  for (size_t i : p_order)
    if (!p_used[i]) p_left.push_back(i);
  for (size_t i : s_order)
    if (!s_used[i]) s_left.push_back(i);
  if (p_left.size() == 1 && s_left.size() == 1) {
    out.notes.push_back("the only processes left, `" + ShortName(primary[p_left[0]].command_line) + "` and `" +
                        ShortName(shadow[s_left[0]].command_line) + "`, paired although their commands differ");
    add(p_left[0], s_left[0], PairRule::kOnly, 0);
    p_left.clear();
    s_left.clear();
  }
  out.primary_unpaired = p_left;
  out.shadow_unpaired = s_left;
  std::stable_sort(out.pairs.begin(), out.pairs.end(), [&](const ProcessPair& a, const ProcessPair& b) {
    return std::tie(primary[a.primary].start_realtime_ns, primary[a.primary].pid) <
           std::tie(primary[b.primary].start_realtime_ns, primary[b.primary].pid);
  });
  // Labels must be unique (they name folders).
  std::map<std::string, int> seen;
  for (auto& pr : out.pairs) {
    int n = seen[pr.label]++;
    if (n) pr.label += "." + std::to_string(n);
  }
  return out;
}

}  // namespace twinscope::procs
