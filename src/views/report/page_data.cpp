// Bounding (which launches, groups and block pictures reach the page) and the JSON the page's script reads.
#include <algorithm>
#include <cstdio>
#include <set>

#include "views/report/renderer.h"
#include "views/report/report_assets.h"

namespace twinscope::report {

void Renderer::Prepare() {
  summary_ = join_.summary ? &*join_.summary : nullptr;
  if (join_.launches) {
    for (const views::LaunchDoc& l : *join_.launches) {
      const int64_t id = Signed(l.id);
      all_.push_back({id, &l});
      by_id_.emplace(id, &l);
    }
  }
  auto dur = [](const Launch& l) { return static_cast<double>(l.l->primary.dur_ns.value_or(0)); };
  std::stable_sort(all_.begin(), all_.end(), [&](const Launch& a, const Launch& b) { return dur(a) > dur(b); });
  rows_ = std::min(all_.size(), o_.max_launch_rows);
  launches_total_ =
      std::max<int64_t>(join_.launches_total ? Signed(*join_.launches_total) : static_cast<int64_t>(all_.size()),
                        static_cast<int64_t>(all_.size()));

  // Why slow: groups and the roles of their launches.
  if (join_.why_slow) {
    const std::vector<views::WhySlowDoc>& ws = *join_.why_slow;
    for (size_t g = 0; g < ws.size(); ++g) {
      const views::WhySlowDoc& grp = ws[g];
      if (grp.slow.empty()) {  // no finding: counted in one line (docs/join.md, "Why slow")
        ++groups_quiet_;
        continue;
      }
      if (groups_.size() >= o_.max_why_slow_groups) {
        ++groups_left_out_;
        continue;
      }
      groups_.push_back(&grp);
      role_.emplace(Signed(grp.reference), "reference");
      for (const views::SlowDoc& s : grp.slow) {
        char buf[32];
        std::snprintf(buf, sizeof buf, " %.2f\xC3\x97", s.ratio);
        role_.emplace(Signed(s.launch), "slow" + std::string(buf));
        verdicts_.emplace(Signed(s.launch), &s.verdicts);
      }
    }
  }

  // Block detail: in the join's order (reference and slow launches first), within both bounds.
  uint64_t blocks = 0;
  if (join_.block_detail) {
    for (const views::BlockDetailDoc& d : *join_.block_detail) {
      const uint64_t n = d.blocks.size() + d.malformed_rows;
      if (detail_.size() >= o_.max_detail_launches || blocks + n > o_.max_detail_blocks) {
        ++detail_left_out_;
        continue;
      }
      EncodedBlocks e = EncodeBlocks(d.blocks, o_.deflate_blocks);
      e.malformed += d.malformed_rows;
      malformed_ += e.malformed;
      blocks += e.count;
      detail_.push_back({Signed(d.launch), &d});
      detail_ids_.insert(Signed(d.launch));
      encoded_.push_back(std::move(e));
    }
  }
  PrepareRequests();
  if (info_) {
    info_->request_rows = request_rows_.size();
    info_->request_steps = request_steps_.size();
    info_->launch_rows = rows_;
    info_->launches_total = static_cast<size_t>(launches_total_);
    info_->detail_launches = detail_.size();
    info_->detail_blocks = blocks;
    info_->detail_launches_left_out = detail_left_out_;
    info_->malformed_block_rows = malformed_;
  }
}

// The join as the page's script reads it: its parts as in join.json, the lists bounded as the page shows
// them, and the page's own "report" part.
json Renderer::Data() const {
  views::JoinDoc page;
  page.primary = join_.primary;
  page.shadow = join_.shadow;
  page.options = join_.options;
  page.warnings = join_.warnings;
  page.summary = join_.summary;
  page.divergences = join_.divergences;
  page.reasons = join_.reasons;
  page.drift_total = join_.drift_total;
  page.steps_total = join_.steps_total;
  page.launches_total = join_.launches_total;
  // Launches: the table's rows, then any other launch the block detail or why-slow refers to.
  auto& launches = page.launches.emplace();
  std::set<int64_t> in;
  for (size_t r = 0; r < rows_; ++r) {
    launches.push_back(*all_[r].l);
    in.insert(all_[r].id);
  }
  auto add = [&](int64_t id) {
    auto it = by_id_.find(id);
    if (it != by_id_.end() && in.insert(id).second) launches.push_back(*it->second);
  };
  for (const auto& dl : detail_) add(dl.id);
  for (const auto& [id, role] : role_) add(id);
  auto& ws = page.why_slow.emplace();
  for (const views::WhySlowDoc* g : groups_) ws.push_back(*g);
  const DriftTable drift = DriftRows();
  auto& dr = page.drift.emplace();
  for (const views::DriftDoc* r : drift.rows) dr.push_back(*r);
  json d = views::ToJson(page);
  // The page's own rows, beside the join's: the drift past the bound summed, the steps as bars.
  if (drift.rest) {
    const views::DriftDoc& r = *drift.rest;
    d["drift"].push_back({{"range", r.range},
                          {"exact", Signed(r.exact)},
                          {"time_only", Signed(r.time_only)},
                          {"unmatched", Signed(r.unmatched)},
                          {"shape_differs", Signed(r.shape_differs)}});
  }
  d["steps"] = StepsData();
  if (requests_) d["requests"] = RequestsData();
  json detail = json::array();
  for (size_t i = 0; i < detail_.size(); ++i) {
    const auto& e = encoded_[i];
    detail.push_back({{"launch", detail_[i].id},
                      {"element", "ts-blocks-" + std::to_string(i)},
                      {"count", e.count},
                      {"t0_ns", e.t0_ns},
                      {"unit_ns", e.unit_ns},
                      {"order_implicit", e.order_implicit},
                      {"codec", e.codec},
                      {"role", role_.count(detail_[i].id) ? role_.at(detail_[i].id) : ""}});
  }
  json& r = d["report"];
  r["detail"] = std::move(detail);
  r["launch_rows"] = rows_;
  r["launches_total"] = launches_total_;
  r["detail_left_out"] = detail_left_out_;
  r["chartjs"] = Charts() ? std::string(report_assets::kChartJsVersion) : std::string();
  r["stretch_note"] = std::string(kStretchNote);
  return d;
}

// The steps as bars: at most max_steps, consecutive ranges merged (summed) beyond that.
json Renderer::StepsData() const {
  json out = json::array();
  if (!join_.steps) return out;
  const std::vector<views::StepDoc>& steps = *join_.steps;
  size_t n = steps.size(), bars = std::min(n, std::max<size_t>(o_.max_steps, 1));
  for (size_t b = 0; b < bars; ++b) {
    size_t lo = b * n / bars, hi = (b + 1) * n / bars;
    if (hi - lo == 1) {
      out.push_back(views::ToJson(steps[lo]));
      continue;
    }
    json bar = {{"range", steps[lo].range + " \xE2\x80\xA6 " + steps[hi - 1].range}, {"steps", hi - lo}};
    double kernels = 0, kernel_ns = 0, target_ns = 0;
    for (size_t i = lo; i < hi; ++i) {
      kernels += static_cast<double>(steps[i].kernels);
      kernel_ns += static_cast<double>(steps[i].kernel_ns);
      target_ns += static_cast<double>(steps[i].target_ns);
    }
    bar["kernels"] = kernels;
    bar["kernel_ns"] = kernel_ns;
    bar["target_ns"] = target_ns;
    out.push_back(std::move(bar));
  }
  return out;
}

}  // namespace twinscope::report
