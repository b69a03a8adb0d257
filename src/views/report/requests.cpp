// The "Requests" section of a serving run's report (docs/join.md, "Requests") and its bounded JSON copy.
#include <cstdio>
#include <map>
#include <set>

#include "views/report/html.h"
#include "views/report/renderer.h"

namespace twinscope::report {
namespace {

std::string Micros(const std::optional<int64_t>& us) {
  return us ? Duration(static_cast<double>(*us) * 1000.0) : "&ndash;";
}

// A request's arrival as milliseconds after `first_us` (both the server's CLOCK_REALTIME microseconds).
std::string ArrivalCell(const views::RequestRowDoc& r, int64_t first_us) {
  if (first_us < 0 || !r.arrival_unix_us || *r.arrival_unix_us < first_us) return "&ndash;";
  const int64_t us = *r.arrival_unix_us - first_us;
  char frac[8];
  std::snprintf(frac, sizeof frac, ".%03d", static_cast<int>(us % 1000));
  return Count(us / 1000) + frac + " ms";
}

}  // namespace

void Renderer::PrepareRequests() {
  if (!join_.requests) return;
  requests_ = &*join_.requests;
  for (const views::RequestRowDoc& r : requests_->rows) {
    if (request_rows_.size() < o_.max_request_rows) request_rows_.push_back(&r);
    // The first arrival of all the join's rows, so that the report's own bound does not move it.
    if (r.arrival_unix_us && *r.arrival_unix_us >= 0 &&
        (first_arrival_us_ < 0 || *r.arrival_unix_us < first_arrival_us_))
      first_arrival_us_ = *r.arrival_unix_us;
  }
  std::map<int64_t, const views::ServedStepDoc*> by_step;
  for (const views::ServedStepDoc& st : requests_->steps) by_step.emplace(Signed(st.step), &st);
  // The listed requests' steps, in their order, while the bound lasts.
  std::set<int64_t> kept;
  for (const views::RequestRowDoc* r : request_rows_) {
    for (uint64_t v : r->steps) {
      if (v > static_cast<uint64_t>(INT64_MAX) || kept.size() >= o_.max_request_steps) continue;
      auto it = by_step.find(static_cast<int64_t>(v));
      if (it != by_step.end() && kept.insert(it->first).second) request_steps_.push_back(it->second);
    }
  }
  for (size_t i = 0; i < request_rows_.size(); ++i) {
    size_t pictures = 0;
    for (uint64_t v : request_rows_[i]->steps) {
      auto it = v <= static_cast<uint64_t>(INT64_MAX) ? by_step.find(static_cast<int64_t>(v)) : by_step.end();
      if (it == by_step.end() || !kept.count(it->first)) continue;
      for (const views::StepLaunchDoc& t : it->second->target_launches)
        if (detail_ids_.count(t.launch)) ++pictures;
    }
    request_pictures_[static_cast<int64_t>(i)] = pictures;
  }
}

void Renderer::Requests(std::string& h) {
  if (!requests_) return;
  const views::RequestsDoc& rq = *requests_;
  const std::string& trace = rq.source.trace;
  h += "<section id=\"requests\">\n<h2>Requests</h2>\n<p class=\"note\">Each request the server handled, from "
       "its request trace <code>" +
       Esc(trace) +
       "</code>: when it arrived (after the first request, on the server's clock), the steps it was in, the "
       "primary's GPU kernel time in those steps (shared with the other requests of each step; <em>share</em> "
       "splits each step's time by the tokens it fed), the target kernel's launches there and how many the shadow "
       "matched. Pick a request for its steps and the block pictures of its target launches.</p>\n";
  for (const auto& w : rq.warnings) h += "<p class=\"warn\">" + Esc(w) + ".</p>\n";
  const int64_t total = Signed(rq.total);
  if (request_rows_.empty()) {
    h += "<p>The request trace holds no request.</p>\n</section>\n";
    return;
  }
  h += "<div class=\"table-wrap short\"><table class=\"requests\"><thead><tr><th>request</th><th "
       "class=\"num\">status</th><th class=\"num\">prompt</th><th class=\"num\">tokens</th><th class=\"num\" "
       "title=\"after the first request's arrival (the server's clock)\">arrival</th><th "
       "class=\"num\">first token</th><th class=\"num\">done</th><th class=\"num\">steps</th><th "
       "class=\"num\">kernel time</th><th class=\"num\">share</th><th class=\"num\">target launches</th><th "
       "class=\"num\">matched</th><th class=\"num\">block pictures</th></tr></thead><tbody>\n";
  for (size_t i = 0; i < request_rows_.size(); ++i) {
    const views::RequestRowDoc& r = *request_rows_[i];
    const int64_t status = r.status, launches = Signed(r.target_launches), exact = Signed(r.shadow_exact);
    const std::string steps = Cell(r.prefill_steps) + " + " + Cell(r.decode_steps);
    h += "<tr><td><a href=\"#requests\" class=\"ts-req\" data-request=\"" + std::to_string(i) + "\">" + Esc(r.id) +
         "</a></td><td class=\"num" + (status == 200 ? "" : " bad") + "\">" + Cell(r.status) +
         "</td><td class=\"num\">" + Cell(r.prompt_tokens) + "</td><td class=\"num\">" + Cell(r.completion_tokens) +
         "</td><td class=\"num\">" + ArrivalCell(r, first_arrival_us_) + "</td><td class=\"num\">" +
         Micros(r.first_token_us) + "</td><td class=\"num\">" + Micros(r.done_us) +
         "</td><td class=\"num\" title=\"prefill + decode\">" + steps + "</td><td class=\"num\">" +
         DurCell(r.kernel_ns) + "</td><td class=\"num\">" + DurCell(r.kernel_share_ns) + "</td><td class=\"num\">" +
         Count(launches) + "</td><td class=\"num" + (exact < launches ? " warn" : "") + "\">" + Count(exact) + " (" +
         Percent(exact, launches) + ")</td><td class=\"num\">" +
         Count(static_cast<int64_t>(request_pictures_[static_cast<int64_t>(i)])) + "</td></tr>\n";
  }
  h += "</tbody></table></div>\n";
  if (total > static_cast<int64_t>(request_rows_.size()))
    h += "<p class=\"note\">The first " + Count(static_cast<int64_t>(request_rows_.size())) + " of " + Count(total) +
         " requests (the rest are in the join: <code>twinscope stats DIR --json</code>, \"requests\").</p>\n";
  h += "<div class=\"controls\"><label for=\"ts-request-select\">request</label> <select id=\"ts-request-select\">\n";
  for (size_t i = 0; i < request_rows_.size(); ++i) {
    const views::RequestRowDoc& r = *request_rows_[i];
    std::string label =
        r.id + " \xC2\xB7 " + Count(static_cast<int64_t>(r.steps.size())) + " steps \xC2\xB7 " + DurCell(r.kernel_ns);
    h += "<option value=\"" + std::to_string(i) + "\">" + Esc(label) + "</option>\n";
  }
  h += "</select></div>\n<div id=\"ts-request-detail\"></div>\n";
  if (request_steps_.size() >= o_.max_request_steps)
    h += "<p class=\"note\">Steps of the listed requests are kept up to " +
         Count(static_cast<int64_t>(o_.max_request_steps)) +
         "; later requests' steps past that are named but not detailed here.</p>\n";
  h += "</section>\n";
}

// The requests as the page's script reads them: the join's, with the listed rows and their steps only.
json Renderer::RequestsData() const {
  views::RequestsDoc page = *requests_;
  page.rows.clear();
  page.steps.clear();
  for (const views::RequestRowDoc* r : request_rows_) page.rows.push_back(*r);
  for (const views::ServedStepDoc* st : request_steps_) page.steps.push_back(*st);
  json out = views::ToJson(page);
  out["rows_in_report"] = request_rows_.size();
  out["steps_in_report"] = request_steps_.size();
  return out;
}

}  // namespace twinscope::report
