// The report's CSS, JS and (where configured) Chart.js, embedded at build time by embed_assets.cmake.
#pragma once

#include <cstddef>
#include <string_view>

namespace twinscope::report_assets {

extern const char kReportCss[];
extern const size_t kReportCssSize;
extern const char kGuardJs[];  // runs first: records errors into the page for readers and tests
extern const size_t kGuardJsSize;
extern const char kReportJs[];
extern const size_t kReportJsSize;
extern const char kChartJs[];  // empty when built without Chart.js
extern const size_t kChartJsSize;
extern const char kChartJsVersion[];

inline std::string_view Css() { return {kReportCss, kReportCssSize}; }
inline std::string_view GuardJs() { return {kGuardJs, kGuardJsSize}; }
inline std::string_view ReportJs() { return {kReportJs, kReportJsSize}; }
inline std::string_view ChartJs() { return {kChartJs, kChartJsSize}; }

}  // namespace twinscope::report_assets
