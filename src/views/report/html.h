// Escaping and number formatting for the HTML report: everything from a trace (kernel names, NVTX
// ranges, paths, messages) reaches the page through one of these.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace twinscope::report {

// Text for HTML element content and quoted attribute values: & < > " ' escaped. Invalid UTF-8 is
// replaced by U+FFFD, so a damaged name cannot swallow the markup that follows it.
std::string Esc(std::string_view text);

// JSON for a <script type="application/json"> element: invalid UTF-8 replaced, and every < > &
// (and U+2028/U+2029) written as \u escapes, so no string in it can close the element ("</script>") or
// open a comment ("<!--"); JSON.parse gives back the same strings.
std::string JsonForScript(const nlohmann::json& j);

// 1234 -> "1,234"; negative numbers keep their sign.
std::string Count(int64_t v);
// Nanoseconds for people: "850 ns", "12.3 us", "1.23 ms", "2.05 s".
std::string Duration(double ns);
// 0.4567 -> "45.7%"; "-" when the denominator is 0.
std::string Percent(double part, double whole);

}  // namespace twinscope::report
