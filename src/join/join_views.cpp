// Helpers the views of the joined model share: launch order, detail launches, divergence text (the text
// view: src/views/join_text.h; the JSON: src/views/join_doc*).
#include "join/join_views.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <set>
#include <unordered_map>

#include "join/why_slow.h"

namespace twinscope::join {
uint64_t Dur(const PrimaryLaunch& p) { return p.have_kernel ? p.end_ns - p.start_ns : 0; }

std::vector<size_t> SlowestFirst(const JoinedModel& m) {
  std::vector<size_t> order(m.matches.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return Dur(m.primary[m.matches[a].primary]) > Dur(m.primary[m.matches[b].primary]);
  });
  return order;
}

namespace {

std::string RangeText(const std::string& from, const std::string& to) {
  const std::string a = from.empty() ? "(no range)" : from, b = to.empty() ? "(no range)" : to;
  return a == b ? a : a + " .. " + b;
}

}  // namespace

std::string DivergenceText(const DivergenceRegion& d) {
  std::string t;
  if (d.shadow_launches)
    t += "shadow " + RangeText(d.shadow_from, d.shadow_to) + " (seq " + std::to_string(d.first_seq) + ".." +
         std::to_string(d.last_seq) + ", " + std::to_string(d.shadow_launches) + " launches)";
  if (d.primary_launches)
    t += std::string(t.empty() ? "" : " vs ") + "primary " + RangeText(d.primary_from, d.primary_to) + " (#" +
         std::to_string(d.first_primary) + ".." + std::to_string(d.last_primary) + ", " +
         std::to_string(d.primary_launches) + " launches)";
  std::vector<std::string> what;
  if (d.other_shape) what.push_back(std::to_string(d.other_shape) + " of another shape");
  if (d.diverged > d.other_shape) what.push_back(std::to_string(d.diverged - d.other_shape) + " in another range");
  if (d.inserted) what.push_back(std::to_string(d.inserted) + " only in the shadow");
  if (d.deleted) what.push_back(std::to_string(d.deleted) + " only in the primary");
  if (d.other_kernels)
    what.push_back(std::to_string(d.other_kernels) + " of kernels the other side did not launch here");
  if (!what.empty()) {
    t += ": ";
    for (size_t i = 0; i < what.size(); ++i) t += (i ? ", " : "") + what[i];
  }
  if (d.positions > 1) t += " [could sit at " + std::to_string(d.positions) + " places]";
  return t;
}

std::vector<uint64_t> DetailSeqs(const JoinedModel& m, size_t max) {
  std::vector<uint64_t> out;
  std::set<uint64_t> seen;
  auto add = [&](size_t match) {
    uint64_t seq = m.shadow[m.matches[match].shadow].seq;
    if (out.size() < max && seen.insert(seq).second) out.push_back(seq);
  };
  for (const auto& g : m.groups) {
    if (g.slow.empty()) continue;
    add(g.reference);
    for (const auto& s : g.slow) add(s.match);
  }
  for (uint64_t seq : RequestDetailSeqs(m, kRequestDetailLaunches))
    if (out.size() < max && seen.insert(seq).second) out.push_back(seq);
  for (size_t i : SlowestFirst(m)) add(i);
  return out;
}

}  // namespace twinscope::join
