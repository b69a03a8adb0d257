// Bounding (which launches, groups and block pictures reach the page) and the JSON the page's script reads.
#include <algorithm>
#include <cstdio>
#include <set>

#include "views/report/renderer.h"
#include "views/report/report_assets.h"

namespace twinscope::report {

void Renderer::Prepare() {
  summary_ = At(join_, "summary");
  const json& launches = At(join_, "launches");
  if (launches.is_array()) {
    for (size_t i = 0; i < launches.size(); ++i) {
      const json& l = launches[i];
      if (!l.is_object()) continue;
      int64_t id = Int(l, "id", static_cast<int64_t>(i));
      all_.push_back({id, &l});
      by_id_.emplace(id, &l);
    }
  }
  std::stable_sort(all_.begin(), all_.end(), [](const Launch& a, const Launch& b) {
    return Num(At(*a.j, "primary"), "dur_ns") > Num(At(*b.j, "primary"), "dur_ns");
  });
  rows_ = std::min(all_.size(), o_.max_launch_rows);
  launches_total_ = std::max<int64_t>(Int(join_, "launches_total", static_cast<int64_t>(all_.size())),
                                      static_cast<int64_t>(all_.size()));

  // Why slow: groups and the roles of their launches.
  const json& ws = At(join_, "why_slow");
  if (ws.is_array()) {
    for (size_t g = 0; g < ws.size() && g < o_.max_why_slow_groups; ++g) {
      const json& grp = ws[g];
      if (!grp.is_object()) continue;
      groups_.push_back(&grp);
      if (Has(grp, "reference")) role_.emplace(Int(grp, "reference"), "reference");
      for (const auto& s : At(grp, "slow")) {
        if (!Has(s, "launch")) continue;
        std::string r = "slow";
        if (Has(s, "ratio")) {
          char buf[32];
          std::snprintf(buf, sizeof buf, " %.2f\xC3\x97", Num(s, "ratio"));
          r += buf;
        }
        role_.emplace(Int(s, "launch"), r);
        verdicts_.emplace(Int(s, "launch"), &At(s, "verdicts"));
      }
    }
    groups_left_out_ = ws.size() - groups_.size();
  }

  // Block detail: in the join's order (reference and slow launches first), within both bounds.
  const json& bd = At(join_, "block_detail");
  uint64_t blocks = 0;
  if (bd.is_array()) {
    for (const auto& d : bd) {
      const json& rows = At(d, "blocks");
      uint64_t n = rows.is_array() ? rows.size() : 0;
      if (!Has(d, "launch") || detail_.size() >= o_.max_detail_launches || blocks + n > o_.max_detail_blocks) {
        ++detail_left_out_;
        continue;
      }
      EncodedBlocks e = EncodeBlocks(rows, o_.deflate_blocks);
      malformed_ += e.malformed;
      blocks += e.count;
      detail_.push_back({Int(d, "launch"), &d});
      detail_ids_.insert(Int(d, "launch"));
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

json Renderer::Data() const {
  json d = json::object();
  for (auto it = join_.begin(); it != join_.end(); ++it) {
    const std::string& k = it.key();
    if (k == "launches" || k == "block_detail" || k == "steps" || k == "drift" || k == "why_slow" || k == "requests")
      continue;
    d[k] = it.value();
  }
  // Launches: the table's rows, then any other launch the block detail or why-slow refers to.
  json launches = json::array();
  std::set<int64_t> in;
  for (size_t r = 0; r < rows_; ++r) {
    launches.push_back(*all_[r].j);
    in.insert(all_[r].id);
  }
  auto add = [&](int64_t id) {
    auto it = by_id_.find(id);
    if (it != by_id_.end() && in.insert(id).second) launches.push_back(*it->second);
  };
  for (const auto& dl : detail_) add(dl.id);
  for (const auto& [id, role] : role_) add(id);
  d["launches"] = std::move(launches);
  json ws = json::array();
  for (const json* g : groups_) ws.push_back(*g);
  d["why_slow"] = std::move(ws);
  json rest;
  json drift = json::array();
  for (const json* r : DriftRows(&rest)) drift.push_back(*r);
  if (rest.is_object()) drift.push_back(rest);
  d["drift"] = std::move(drift);
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
  const json& steps = At(join_, "steps");
  json out = json::array();
  if (!steps.is_array()) return out;
  size_t n = steps.size(), bars = std::min(n, std::max<size_t>(o_.max_steps, 1));
  for (size_t b = 0; b < bars; ++b) {
    size_t lo = b * n / bars, hi = (b + 1) * n / bars;
    if (hi - lo == 1) {
      out.push_back(steps[lo]);
      continue;
    }
    json bar = {{"range", Str(steps[lo], "range") + " \xE2\x80\xA6 " + Str(steps[hi - 1], "range")},
                {"steps", hi - lo}};
    double kernels = 0, kernel_ns = 0, target_ns = 0;
    for (size_t i = lo; i < hi; ++i) {
      kernels += Num(steps[i], "kernels");
      kernel_ns += Num(steps[i], "kernel_ns");
      target_ns += Num(steps[i], "target_ns");
    }
    bar["kernels"] = kernels;
    bar["kernel_ns"] = kernel_ns;
    bar["target_ns"] = target_ns;
    out.push_back(std::move(bar));
  }
  return out;
}

}  // namespace twinscope::report
