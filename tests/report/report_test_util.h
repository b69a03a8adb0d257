// What the report's tests share: a render that must succeed and readers of the page it gives.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "views/report/report.h"

namespace twinscope::testing_report {

// The report of `join`; a failed render fails the test and yields "".
inline std::string Render(const nlohmann::json& join, const ReportOptions& o = {}, ReportInfo* info = nullptr) {
  StatusOr<std::string> html = RenderReport(join, o, info);
  EXPECT_TRUE(html.ok()) << html.status().message();
  return html.ok() ? *html : std::string();
}

// The text of the element that starts with `open` (up to its "</script>").
inline std::string ScriptText(const std::string& html, const std::string& open) {
  size_t at = html.find(open);
  if (at == std::string::npos) return "";
  at += open.size();
  return html.substr(at, html.find("</script>", at) - at);
}

// The page's embedded data (its "ts-data" script); not JSON fails the test.
inline nlohmann::json EmbeddedData(const std::string& html) {
  std::string text = ScriptText(html, "<script type=\"application/json\" id=\"ts-data\">");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "embedded data is not JSON";
  return j;
}

// How many times `needle` occurs in `s` (overlapping occurrences counted).
inline size_t Occurrences(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace twinscope::testing_report
