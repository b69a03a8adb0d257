// Pairing of a primary run's processes with its shadow run's (docs/join.md, "Processes").
#include "procs/pairing.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

namespace twinscope::procs {
namespace {

size_t Depth(const ProcessRef& p) { return p.top ? 0 : p.ancestors.size(); }

// The order identical processes take on each side: by host slot, rank, local rank, first device, then
// pid (the launcher's spawn order on its host). Never the trace header's time: parallel workers race
// to build theirs, and a swapped order would pair them crosswise.
struct StableKey {
  int host = 0;
  int64_t rank = INT64_MAX, local_rank = INT64_MAX, device = INT64_MAX;
  uint32_t pid = 0;
  auto Tie() const { return std::tie(host, rank, local_rank, device, pid); }
};

StableKey KeyOf(const ProcessRef& p, int host) {
  StableKey k;
  k.host = host;
  if (p.rank) k.rank = *p.rank;
  if (p.local_rank) k.local_rank = *p.local_rank;
  if (!p.devices.empty()) k.device = *std::min_element(p.devices.begin(), p.devices.end());
  k.pid = p.pid;
  return k;
}

// Indices of the processes with GPU work, in their stable order (StableKey).
std::vector<size_t> WithWork(const std::vector<ProcessRef>& v, const std::vector<int>& host, size_t* without) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].gpu_work > 0)
      idx.push_back(i);
    else
      ++*without;
  }
  std::stable_sort(idx.begin(), idx.end(),
                   [&](size_t a, size_t b) { return KeyOf(v[a], host[a]).Tie() < KeyOf(v[b], host[b]).Tie(); });
  return idx;
}

std::vector<std::string> HostsOf(const std::vector<ProcessRef>& v) {
  std::vector<std::string> h;
  for (const auto& p : v)
    if (p.gpu_work > 0 && !p.host.empty()) h.push_back(p.host);
  std::sort(h.begin(), h.end());
  h.erase(std::unique(h.begin(), h.end()), h.end());
  return h;
}

// Each process's host slot: equal slots on the two sides are the same (mapped) host. One host a side
// (or none named): every slot 0. Equal host names: by name. As many hosts on each side: by sorted name
// (said). Otherwise hosts are ignored (said).
void MapHosts(const std::vector<ProcessRef>& primary, const std::vector<ProcessRef>& shadow, std::vector<int>* p_slot,
              std::vector<int>* s_slot, std::vector<std::string>* notes) {
  p_slot->assign(primary.size(), 0);
  s_slot->assign(shadow.size(), 0);
  const auto ph = HostsOf(primary), sh = HostsOf(shadow);
  if (ph.size() <= 1 && sh.size() <= 1) return;
  if (ph.size() != sh.size()) {
    notes->push_back(std::to_string(ph.size()) + " primary hosts and " + std::to_string(sh.size()) +
                     " shadow hosts: hosts are not mapped; processes are paired as if on one host");
    return;
  }
  if (ph != sh) {
    std::string map;
    for (size_t i = 0; i < ph.size(); ++i) map += (i ? ", " : "") + ph[i] + "=" + sh[i];
    notes->push_back("the two sides ran on different hosts: mapped by sorted name (primary=shadow: " + map + ")");
  }
  auto slot = [](const std::vector<std::string>& hosts, const std::string& h) {
    auto it = std::lower_bound(hosts.begin(), hosts.end(), h);
    return it != hosts.end() && *it == h ? static_cast<int>(it - hosts.begin()) : 0;
  };
  for (size_t i = 0; i < primary.size(); ++i) (*p_slot)[i] = slot(ph, primary[i].host);
  for (size_t i = 0; i < shadow.size(); ++i) (*s_slot)[i] = slot(sh, shadow[i].host);
}

// Best order-keeping match of two groups of one command (sizes differ): every process of the smaller
// group paired, at least total cost. Cost: how far apart the two processes' shares of their group's
// launches are (log ratio), plus 4 where both have local ranks and they differ.
std::vector<std::pair<size_t, size_t>> BestMatch(const std::vector<ProcessRef>& primary,
                                                 const std::vector<ProcessRef>& shadow, const std::vector<size_t>& ps,
                                                 const std::vector<size_t>& ss) {
  const bool swap = ps.size() < ss.size();  // the DP walks the longer group, skipping some of it
  const std::vector<size_t>& a = swap ? ss : ps;
  const std::vector<size_t>& b = swap ? ps : ss;
  const std::vector<ProcessRef>& av = swap ? shadow : primary;
  const std::vector<ProcessRef>& bv = swap ? primary : shadow;
  auto shares = [](const std::vector<ProcessRef>& v, const std::vector<size_t>& g) {
    double total = 0;
    for (size_t i : g) total += static_cast<double>(v[i].gpu_work);
    std::vector<double> out;
    for (size_t i : g) out.push_back(total > 0 ? static_cast<double>(v[i].gpu_work) / total : 0);
    return out;
  };
  const std::vector<double> sa = shares(av, a), sb = shares(bv, b);
  auto cost = [&](size_t i, size_t j) {
    double c = std::fabs(std::log((sa[i] + 1e-9) / (sb[j] + 1e-9)));
    const ProcessRef &x = av[a[i]], &y = bv[b[j]];
    if (x.local_rank && y.local_rank && *x.local_rank != *y.local_rank) c += 4;
    return c;
  };
  const size_t n = a.size(), m = b.size();
  const double kInf = std::numeric_limits<double>::infinity();
  // f[i][j]: the first i of a with the first j of b all paired.
  std::vector<std::vector<double>> f(n + 1, std::vector<double>(m + 1, kInf));
  for (size_t i = 0; i <= n; ++i) f[i][0] = 0;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= std::min(i, m); ++j) f[i][j] = std::min(f[i - 1][j], f[i - 1][j - 1] + cost(i - 1, j - 1));
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = n, j = m; j > 0; --i) {
    if (f[i][j] == f[i - 1][j]) continue;  // a[i-1] left out (ties: the later one is left, earlier pairs)
    out.emplace_back(swap ? b[j - 1] : a[i - 1], swap ? a[i - 1] : b[j - 1]);
    --j;
  }
  std::reverse(out.begin(), out.end());
  return out;
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
  std::vector<int> p_host, s_host;
  MapHosts(primary, shadow, &p_host, &s_host, &out.notes);
  std::vector<size_t> p_order = WithWork(primary, p_host, &out.primary_without_work);
  std::vector<size_t> s_order = WithWork(shadow, s_host, &out.shadow_without_work);
  std::vector<bool> p_used(primary.size(), false), s_used(shadow.size(), false);
  auto add = [&](size_t p, size_t s, PairRule rule, size_t ordinal) {
    p_used[p] = s_used[s] = true;
    out.pairs.push_back(ProcessPair{p, s, rule, Label(primary[p], rule, ordinal)});
  };

  // 1. The user's pairs, by pid. A pid held by several processes of one side (several hosts, or a pid
  // reused): every holder is tried, a free one on the same mapped host first.
  for (auto [ppid, spid] : options.by_pid) {
    const std::string pair = "--pair " + std::to_string(ppid) + "=" + std::to_string(spid) + ": ";
    std::vector<size_t> ph, sh;
    for (size_t i : p_order)
      if (primary[i].pid == ppid) ph.push_back(i);
    for (size_t i : s_order)
      if (shadow[i].pid == spid) sh.push_back(i);
    if (ph.empty() || sh.empty()) {
      out.notes.push_back(
          pair +
          (ph.empty() ? "no primary process " + std::to_string(ppid) : "no shadow process " + std::to_string(spid)) +
          " with GPU work; ignored");
      continue;
    }
    std::optional<std::pair<size_t, size_t>> chosen;
    for (int same_host = 1; same_host >= 0 && !chosen; --same_host)
      for (size_t pi : ph)
        for (size_t si : sh)
          if (!chosen && !p_used[pi] && !s_used[si] && (!same_host || p_host[pi] == s_host[si])) chosen = {pi, si};
    if (ph.size() > 1 || sh.size() > 1) {
      out.notes.push_back(pair + "pid " +
                          (ph.size() > 1
                               ? std::to_string(ppid) + " is held by " + std::to_string(ph.size()) + " primary"
                               : std::to_string(spid) + " is held by " + std::to_string(sh.size()) + " shadow") +
                          " processes (several hosts, or a pid reused): " +
                          (chosen ? "the first free one (by host, rank, pid) is paired; ranks tell them apart"
                                  : "every one is paired already"));
    }
    if (!chosen) {
      if (ph.size() == 1 && sh.size() == 1) out.notes.push_back(pair + "a process named twice; the first pair kept");
      continue;
    }
    add(chosen->first, chosen->second, PairRule::kUser, 0);
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

  // 3. The tree: same command signature, same depth, same mapped host, same ordinal in the stable
  // order; then 4. the same command signature (and host) at any depth. Unequal groups: best match.
  auto by_signature = [&](bool with_depth, PairRule rule) {
    using Key = std::tuple<std::string, size_t, int>;
    std::map<Key, std::vector<size_t>> p_groups, s_groups;
    for (size_t i : p_order)
      if (!p_used[i])
        p_groups[{CommandSignature(primary[i].command_line), with_depth ? Depth(primary[i]) : 0, p_host[i]}].push_back(
            i);
    for (size_t i : s_order)
      if (!s_used[i])
        s_groups[{CommandSignature(shadow[i].command_line), with_depth ? Depth(shadow[i]) : 0, s_host[i]}].push_back(i);
    for (auto& [key, ps] : p_groups) {
      auto it = s_groups.find(key);
      if (it == s_groups.end()) continue;
      const std::vector<size_t>& ss = it->second;
      if (ps.size() == ss.size()) {
        for (size_t k = 0; k < ps.size(); ++k) add(ps[k], ss[k], rule, k);
        continue;
      }
      const auto matched = BestMatch(primary, shadow, ps, ss);
      for (const auto& [pi, si] : matched)
        add(pi, si, rule, static_cast<size_t>(std::find(ps.begin(), ps.end(), pi) - ps.begin()));
      std::string left;
      for (size_t i : ps)
        if (!p_used[i]) left += (left.empty() ? "primary pid " : ", primary pid ") + std::to_string(primary[i].pid);
      for (size_t i : ss)
        if (!s_used[i]) left += (left.empty() ? "shadow pid " : ", shadow pid ") + std::to_string(shadow[i].pid);
      out.notes.push_back(std::to_string(ps.size()) + " primary and " + std::to_string(ss.size()) +
                          " shadow processes run `" + ShortName(primary[ps[0]].command_line) +
                          "`: " + std::to_string(matched.size()) +
                          " paired by best match (each one's share of the group's launches, its local rank; "
                          "order kept), " +
                          left + " left; --pair PRIMARY_PID=SHADOW_PID chooses");
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
