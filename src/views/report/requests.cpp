// The "Requests" section of a serving run's report (docs/join.md, "Requests") and its bounded JSON copy.
#include <cstdio>
#include <map>
#include <set>

#include "views/report/html.h"
#include "views/report/renderer.h"

namespace twinscope::report {
namespace {

std::string Micros(const json& j, std::string_view key) {
  const json& v = At(j, key);
  return v.is_number() ? Duration(v.get<double>() * 1000.0) : "&ndash;";
}

// A request's arrival as milliseconds after `first_us` (both the server's CLOCK_REALTIME microseconds).
std::string ArrivalCell(const json& r, int64_t first_us) {
  const json& v = At(r, "arrival_unix_us");
  if (first_us < 0 || !v.is_number_integer() || v.get<int64_t>() < first_us) return "&ndash;";
  const int64_t us = v.get<int64_t>() - first_us;
  char frac[8];
  std::snprintf(frac, sizeof frac, ".%03d", static_cast<int>(us % 1000));
  return Count(us / 1000) + frac + " ms";
}

}  // namespace

void Renderer::PrepareRequests() {
  const json& rq = At(join_, "requests");
  if (!rq.is_object()) return;
  requests_ = &rq;
  const json& rows = At(rq, "rows");
  if (rows.is_array()) {
    for (const auto& r : rows) {
      if (!r.is_object()) continue;
      if (request_rows_.size() < o_.max_request_rows) request_rows_.push_back(&r);
      // The first arrival of all the join's rows, so that the report's own bound does not move it.
      const json& a = At(r, "arrival_unix_us");
      if (a.is_number_integer() && a.get<int64_t>() >= 0 &&
          (first_arrival_us_ < 0 || a.get<int64_t>() < first_arrival_us_))
        first_arrival_us_ = a.get<int64_t>();
    }
  }
  std::map<int64_t, const json*> by_step;
  for (const auto& st : At(rq, "steps"))
    if (st.is_object() && Has(st, "step")) by_step.emplace(Int(st, "step"), &st);
  // The listed requests' steps, in their order, while the bound lasts.
  std::set<int64_t> kept;
  for (const json* r : request_rows_) {
    for (const auto& v : At(*r, "steps")) {
      if (!v.is_number_integer() || kept.size() >= o_.max_request_steps) continue;
      auto it = by_step.find(v.get<int64_t>());
      if (it != by_step.end() && kept.insert(it->first).second) request_steps_.push_back(it->second);
    }
  }
  for (size_t i = 0; i < request_rows_.size(); ++i) {
    size_t pictures = 0;
    for (const auto& v : At(*request_rows_[i], "steps")) {
      auto it = v.is_number_integer() ? by_step.find(v.get<int64_t>()) : by_step.end();
      if (it == by_step.end() || !kept.count(it->first)) continue;
      for (const auto& t : At(*it->second, "target_launches"))
        if (t.is_array() && t.size() == 3 && t[2].is_number_integer() && detail_ids_.count(t[2].get<int64_t>()))
          ++pictures;
    }
    request_pictures_[static_cast<int64_t>(i)] = pictures;
  }
}

void Renderer::Requests(std::string& h) {
  if (!requests_) return;
  const json& rq = *requests_;
  const std::string trace = Str(At(rq, "source"), "trace");
  h += "<section id=\"requests\">\n<h2>Requests</h2>\n<p class=\"note\">Each request the server handled, from "
       "its request trace <code>" +
       Esc(trace) +
       "</code>: when it arrived (after the first request, on the server's clock), the steps it was in, the "
       "primary's GPU kernel time in those steps (shared with the other requests of each step; <em>share</em> "
       "splits each step's time by the tokens it fed), the target kernel's launches there and how many the shadow "
       "matched. Pick a request for its steps and the block pictures of its target launches.</p>\n";
  for (const auto& w : At(rq, "warnings"))
    if (w.is_string()) h += "<p class=\"warn\">" + Esc(w.get<std::string>()) + ".</p>\n";
  const int64_t total = Int(rq, "total", static_cast<int64_t>(request_rows_.size()));
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
    const json& r = *request_rows_[i];
    const int64_t status = Int(r, "status"), launches = Int(r, "target_launches"), exact = Int(r, "shadow_exact");
    const std::string steps = Count(Int(r, "prefill_steps")) + " + " + Count(Int(r, "decode_steps"));
    h += "<tr><td><a href=\"#requests\" class=\"ts-req\" data-request=\"" + std::to_string(i) + "\">" +
         Esc(Str(r, "id")) + "</a></td><td class=\"num" + (status == 200 ? "" : " bad") + "\">" +
         Cell(At(r, "status")) + "</td><td class=\"num\">" + Cell(At(r, "prompt_tokens")) + "</td><td class=\"num\">" +
         Cell(At(r, "completion_tokens")) + "</td><td class=\"num\">" + ArrivalCell(r, first_arrival_us_) +
         "</td><td class=\"num\">" + Micros(r, "first_token_us") + "</td><td class=\"num\">" + Micros(r, "done_us") +
         "</td><td class=\"num\" title=\"prefill + decode\">" + steps + "</td><td class=\"num\">" +
         DurCell(r, "kernel_ns") + "</td><td class=\"num\">" + DurCell(r, "kernel_share_ns") +
         "</td><td class=\"num\">" + Count(launches) + "</td><td class=\"num" + (exact < launches ? " warn" : "") +
         "\">" + Count(exact) + " (" + Percent(exact, launches) + ")</td><td class=\"num\">" +
         Count(static_cast<int64_t>(request_pictures_[static_cast<int64_t>(i)])) + "</td></tr>\n";
  }
  h += "</tbody></table></div>\n";
  if (total > static_cast<int64_t>(request_rows_.size()))
    h += "<p class=\"note\">The first " + Count(static_cast<int64_t>(request_rows_.size())) + " of " + Count(total) +
         " requests (the rest are in the join: <code>twinscope stats DIR --json</code>, \"requests\").</p>\n";
  h += "<div class=\"controls\"><label for=\"ts-request-select\">request</label> <select id=\"ts-request-select\">\n";
  for (size_t i = 0; i < request_rows_.size(); ++i) {
    const json& r = *request_rows_[i];
    std::string label = Str(r, "id") + " \xC2\xB7 " + Count(static_cast<int64_t>(At(r, "steps").size())) +
                        " steps \xC2\xB7 " + Duration(Num(r, "kernel_ns"));
    h += "<option value=\"" + std::to_string(i) + "\">" + Esc(label) + "</option>\n";
  }
  h += "</select></div>\n<div id=\"ts-request-detail\"></div>\n";
  if (request_steps_.size() >= o_.max_request_steps)
    h += "<p class=\"note\">Steps of the listed requests are kept up to " +
         Count(static_cast<int64_t>(o_.max_request_steps)) +
         "; later requests' steps past that are named but not detailed here.</p>\n";
  h += "</section>\n";
}

json Renderer::RequestsData() const {
  json out = json::object();
  for (auto it = requests_->begin(); it != requests_->end(); ++it)
    if (it.key() != "rows" && it.key() != "steps") out[it.key()] = it.value();
  json rows = json::array(), steps = json::array();
  for (const json* r : request_rows_) rows.push_back(*r);
  for (const json* st : request_steps_) steps.push_back(*st);
  out["rows"] = std::move(rows);
  out["steps"] = std::move(steps);
  out["rows_in_report"] = request_rows_.size();
  out["steps_in_report"] = request_steps_.size();
  return out;
}

}  // namespace twinscope::report
