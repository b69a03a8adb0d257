// Per-launch block pictures: "Blocks of one launch" (picker, heatmap, order plot, reference) and links to it.
#include "views/report/html.h"
#include "views/report/renderer.h"

namespace twinscope::report {

// A launch's id as a link that shows its blocks, or as plain text when it has no block detail.
std::string Renderer::LaunchRef(int64_t id) const {
  std::string text = "#" + std::to_string(id);
  if (detail_ids_.count(id))
    return "<a href=\"#blocks\" class=\"ts-show\" data-launch=\"" + std::to_string(id) + "\">" + text + "</a>";
  return "<span title=\"no block detail for this launch in the report\">" + text + "</span>";
}

void Renderer::Blocks(std::string& h) {
  h += "<section id=\"blocks\">\n<h2>Blocks of one launch</h2>\n<p class=\"note\">" + std::string(kStretchNote) +
       "</p>\n";
  if (detail_.empty()) {
    h += "<p>No launch has block detail in this " +
         std::string(detail_left_out_ ? "report (over its bounds)." : "join.") + "</p>\n</section>\n";
    return;
  }
  h += "<div class=\"controls\"><button type=\"button\" id=\"ts-prev\" title=\"previous launch\">&larr;</button>"
       "<label for=\"ts-launch-select\">launch</label> <select id=\"ts-launch-select\">\n";
  for (size_t i = 0; i < detail_.size(); ++i) {
    int64_t id = detail_[i].id;
    auto lit = by_id_.find(id);
    std::string label = "#" + std::to_string(id);
    auto rit = role_.find(id);
    if (rit != role_.end()) label += " \xC2\xB7 " + rit->second;
    if (lit != by_id_.end()) label += " \xC2\xB7 " + DurCell(lit->second->primary.dur_ns.value_or(0));
    auto vit = verdicts_.find(id);
    if (vit != verdicts_.end()) {
      std::string vs;
      for (const auto& v : *vit->second) vs += (vs.empty() ? "" : ", ") + VerdictLabel(v);
      if (!vs.empty()) label += " \xC2\xB7 " + vs;
    }
    label += " \xC2\xB7 " + Count(static_cast<int64_t>(encoded_[i].count)) + " blocks";
    if (lit != by_id_.end()) label += " \xC2\xB7 " + ShortKernelName(lit->second->kernel, 60);
    h += "<option value=\"" + std::to_string(i) + "\">" + Esc(label) + "</option>\n";
  }
  h += "</select><button type=\"button\" id=\"ts-next\" title=\"next launch\">&rarr;</button></div>\n";
  if (detail_left_out_)
    h += "<p class=\"note\">" + Count(static_cast<int64_t>(detail_left_out_)) +
         " more launches have block detail in the join but are over this report's bounds (" +
         Count(static_cast<int64_t>(o_.max_detail_launches)) + " launches, " +
         Count(static_cast<int64_t>(o_.max_detail_blocks)) + " blocks).</p>\n";
  if (malformed_)
    h += "<p class=\"warn\">" + Count(static_cast<int64_t>(malformed_)) +
         " block rows of the join are not [block, sm, enter_ns, exit_ns, order] and are not shown.</p>\n";
  h += "<div id=\"ts-facts\" class=\"facts-grid\"></div>\n"
       "<figure><figcaption><strong>Block heatmap.</strong> One row per SM (the SM's concurrent blocks stacked "
       "inside its row), time on the horizontal axis from the launch's first block entry (shadow clock); each "
       "block is a bar from entry to exit, coloured by block index. The straggler is red; the shaded band is the "
       "tail (median exit to last exit).</figcaption>\n"
       "<div class=\"heat\"><canvas id=\"ts-heatmap\"></canvas><div class=\"tip\" hidden></div></div></figure>\n"
       "<figure><figcaption><strong>Arrival order.</strong> Block index against the order in which blocks "
       "entered; in-order blocks lie on the diagonal. The straggler is red.</figcaption>\n"
       "<div class=\"heat\"><canvas id=\"ts-order\"></canvas><div class=\"tip\" hidden></div></div></figure>\n"
       "<figure id=\"ts-ref-figure\" hidden><figcaption><strong>Reference launch</strong> <span "
       "id=\"ts-ref-label\"></span>: the launch of median duration of the same shape, drawn the same way "
       "(its own time axis).</figcaption>\n"
       "<div class=\"heat\"><canvas id=\"ts-heatmap-ref\"></canvas><div class=\"tip\" hidden></div></div>"
       "</figure>\n</section>\n";
}

}  // namespace twinscope::report
