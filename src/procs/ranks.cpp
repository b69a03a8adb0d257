// The rank comparison: the slowest rank per step and what it did differently (docs/join.md, "Ranks").
#include "procs/ranks.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace twinscope::procs {
namespace {

uint64_t Median(std::vector<uint64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

std::string Ms(uint64_t ns) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f ms", static_cast<double>(ns) / 1e6);
  return b;
}

std::string StepName(const std::string& range) {
  // "step 17#0" reads as "step 17"; other instances keep their number.
  if (range.size() > 2 && range.compare(range.size() - 2, 2, "#0") == 0) return range.substr(0, range.size() - 2);
  return range.empty() ? "(outside any range)" : range;
}

// Why rank `r` was slow in `range`, against the other ranks: the first difference found, in the order
// a performance engineer would check (more work, then the target kernel's block structure).
std::string Cause(const std::vector<RankInput>& in, size_t r, const std::string& range,
                  const std::vector<const RankStep*>& steps) {
  std::vector<uint64_t> other_kernels;
  for (size_t i = 0; i < in.size(); ++i)
    if (i != r && steps[i]) other_kernels.push_back(steps[i]->kernels);
  const uint64_t k_med = Median(other_kernels);
  std::vector<std::string> out;
  if (steps[r]->kernels > k_med)
    out.push_back("it ran " + std::to_string(steps[r]->kernels) + " kernels there, the others " +
                  std::to_string(k_med));

  // Target launches by kernel in this step, and by key.
  auto launches = [&](size_t i) {
    std::vector<const RankTargetLaunch*> v;
    for (const auto& t : in[i].targets)
      if (t.range == range) v.push_back(&t);
    return v;
  };
  const auto mine = launches(r);
  std::map<std::string, uint64_t> my_count;
  for (auto* t : mine) ++my_count[t->kernel];
  for (auto& [kernel, n] : my_count) {
    std::vector<uint64_t> others;
    for (size_t i = 0; i < in.size(); ++i) {
      if (i == r || !steps[i]) continue;
      uint64_t c = 0;
      for (auto* t : launches(i)) c += t->kernel == kernel;
      others.push_back(c);
    }
    const uint64_t med = Median(others);
    if (n > med)
      out.push_back("it launched " + kernel + " " + std::to_string(n) + " times, the others " + std::to_string(med));
  }
  // The same launch (key) on the other ranks, on the shadow's block structure.
  for (auto* t : mine) {
    if (!t->have_blocks) continue;
    std::vector<uint64_t> sms, blocks, tail_pct;
    for (size_t i = 0; i < in.size(); ++i) {
      if (i == r) continue;
      for (const auto& o : in[i].targets) {
        if (o.range != range || o.key != t->key || !o.have_blocks) continue;
        sms.push_back(o.blocks.sms_used);
        blocks.push_back(o.blocks.blocks_unique);
        tail_pct.push_back(o.blocks.span_ns ? o.blocks.tail_ns * 100 / o.blocks.span_ns : 0);
      }
    }
    if (sms.empty()) continue;
    const uint64_t sm_med = Median(sms), bl_med = Median(blocks), tail_med = Median(tail_pct);
    if (t->blocks.sms_used * 4 < sm_med * 3) {
      out.push_back("its launch of " + t->kernel + " used " + std::to_string(t->blocks.sms_used) +
                    " SMs; the others used " + std::to_string(sm_med));
    } else if (t->blocks.blocks_unique * 4 < bl_med * 3) {
      out.push_back("its launch of " + t->kernel + " had " + std::to_string(t->blocks.blocks_unique) +
                    " blocks; the others " + std::to_string(bl_med));
    } else {
      const uint64_t mine_tail = t->blocks.span_ns ? t->blocks.tail_ns * 100 / t->blocks.span_ns : 0;
      if (mine_tail > 50 && mine_tail > 2 * tail_med)
        out.push_back("one block held its launch of " + t->kernel + " up: block " +
                      std::to_string(t->blocks.straggler.block_linear) + " on SM " +
                      std::to_string(t->blocks.straggler.sm) + " (tail " + std::to_string(mine_tail) +
                      "% of the span; the others " + std::to_string(tail_med) + "%)");
    }
    if (out.size() >= 3) break;
  }
  if (out.empty())
    out.push_back(
        "the same kernels, each slower (contention for the GPU, clocks, memory): no difference in what it "
        "launched or in the target's block structure");
  std::string s;
  for (size_t i = 0; i < out.size(); ++i) s += (i ? "; " : "") + out[i];
  return s;
}

}  // namespace

RankComparison CompareRanks(const std::vector<RankInput>& in, const RankOptions& options) {
  RankComparison out;
  out.min_ratio = options.min_ratio;
  for (const auto& r : in) out.ranks.push_back(r.rank);
  out.slowest_in.assign(in.size(), 0);
  out.stands_out_in.assign(in.size(), 0);
  out.waited_in.assign(in.size(), 0);
  if (in.size() < 2) return out;
  std::vector<std::map<std::string, const RankStep*>> by_range(in.size());
  std::vector<std::string> order;
  std::set<std::string> ordered;
  for (size_t i = 0; i < in.size(); ++i)
    for (const auto& s : in[i].steps) {
      by_range[i].emplace(s.range, &s);
      if (ordered.insert(s.range).second) order.push_back(s.range);
    }
  for (const auto& range : order) {
    std::vector<const RankStep*> steps(in.size(), nullptr);
    size_t present = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      auto it = by_range[i].find(range);
      if (it != by_range[i].end()) steps[i] = it->second, ++present;
    }
    if (present < 2) continue;
    RankStepRow row;
    row.range = range;
    row.span_ns.assign(in.size(), 0);
    row.kernel_ns.assign(in.size(), 0);
    row.kernels.assign(in.size(), 0);
    for (size_t i = 0; i < in.size(); ++i)
      if (steps[i]) {
        row.span_ns[i] = steps[i]->last_end_ns - steps[i]->first_start_ns;
        row.kernel_ns[i] = steps[i]->kernel_ns;
        row.kernels[i] = steps[i]->kernels;
      }
    // The slowest by kernel time, and by span, each against the median of the other ranks there.
    auto slowest_of = [&](const std::vector<uint64_t>& v, size_t* at, double* ratio) {
      *at = static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
      std::vector<uint64_t> others;
      for (size_t i = 0; i < in.size(); ++i)
        if (i != *at && steps[i]) others.push_back(v[i]);
      const uint64_t med = Median(others);
      *ratio = med ? static_cast<double>(v[*at]) / static_cast<double>(med) : 0;
      return med;
    };
    const uint64_t med = slowest_of(row.kernel_ns, &row.slowest, &row.ratio);
    const uint64_t span_med = slowest_of(row.span_ns, &row.span_slowest, &row.span_ratio);
    row.stands_out = med && row.ratio >= options.min_ratio;
    row.waited = !row.stands_out && span_med && row.span_ratio >= options.min_ratio;
    ++out.slowest_in[row.slowest];
    if (row.waited) ++out.waited_in[row.span_slowest];
    if (row.stands_out) {
      ++out.stands_out_in[row.slowest];
      ++out.steps_standing_out;
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.2fx", row.ratio);
      row.text = "rank " + std::to_string(in[row.slowest].rank) + " was slowest in " + StepName(range) +
                 ": its kernels took " + Ms(row.kernel_ns[row.slowest]) + " against " + Ms(med) + " (" + ratio +
                 " the other ranks' median; span " + Ms(row.span_ns[row.slowest]) + " against " + Ms(span_med) + "); " +
                 Cause(in, row.slowest, range, steps);
      if (out.findings.size() < options.max_findings) out.findings.push_back(row.text);
    }
    out.steps.push_back(std::move(row));
  }
  return out;
}

}  // namespace twinscope::procs
