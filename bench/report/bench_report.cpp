// The HTML report for a run of issue 8's size: 1M primary kernels and 100k shadow launches with 10M
// blocks, of which what reaches the report is bounded: the 2,000 slowest launch rows, 32 detailed
// launches of 65,536 blocks, 1,000 steps. Measures the render (C++), the file's size by part, and
// headless Chromium's time from navigation to the page's first complete render (tsReady), against an
// empty page loaded by the same browser in the same run; then draws every detailed launch once.
//   twinscope_bench_report [--reps N] [--out DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "chromium.h"
#include "sample_join.h"
#include "views/report/report.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace twinscope;
  int reps = 5;
  std::string out = std::filesystem::temp_directory_path().string() + "/twinscope-bench-report";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--out") && i + 1 < argc)
      out = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--reps N] [--out DIR]\n", argv[0]);
      return 2;
    }
  }
  std::filesystem::create_directories(out);

  testing_report::SampleJoinOptions o;
  o.launches = 2000;
  o.launches_total = 1000000;
  o.detail_launches = 32;
  o.blocks = 65536;
  o.steps = 1000;
  o.hostile_names = false;
  auto t0 = Clock::now();
  json join = testing_report::MakeSampleJoin(o);
  auto t1 = Clock::now();
  size_t join_bytes = join.dump().size();
  std::printf(
      "join (bounded, as the report gets it): %zu launches, %zu detailed x %u blocks, %zu steps; %.1f MB as JSON "
      "(built in %.0f ms)\n",
      o.launches, o.detail_launches, o.blocks, o.steps, join_bytes / 1e6, Ms(t0, t1));

  std::vector<double> render_ms;
  ReportInfo info;
  std::string html;
  for (int r = 0; r < reps; ++r) {
    auto a = Clock::now();
    StatusOr<std::string> h = RenderReport(join, {}, &info);
    auto b = Clock::now();
    if (!h.ok()) {
      std::fprintf(stderr, "%s\n", h.status().message().c_str());
      return 1;
    }
    render_ms.push_back(Ms(a, b));
    html = std::move(*h);
  }
  std::string path = out + "/report-issue-size.html", empty = out + "/empty.html";
  std::ofstream(path, std::ios::binary) << html;
  std::ofstream(empty) << "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>empty</title></head>"
                          "<body><p>empty</p></body></html>\n";
  std::printf("render (C++, RenderReport): median %.0f ms of %d\n", Median(render_ms), reps);
  std::printf(
      "report: %.2f MB (%zu bytes): block detail %.2f MB (%s, %llu blocks, %.2f bytes/block), data JSON %.2f MB, "
      "Chart.js %s, rest %.2f MB\n",
      info.bytes / 1e6, info.bytes, info.block_bytes / 1e6, info.deflated ? "deflated" : "raw",
      static_cast<unsigned long long>(info.detail_blocks),
      info.detail_blocks ? double(info.block_bytes) / double(info.detail_blocks) : 0.0, info.data_bytes / 1e6,
      info.charts ? "inlined" : "missing", (info.bytes - info.block_bytes - info.data_bytes) / 1e6);

  testing_report::Browser browser;
  auto s0 = Clock::now();
  if (!browser.Start()) {
    std::fprintf(stderr, "chromium: %s\n%s\n", browser.error().c_str(), browser.LogTail().c_str());
    return 1;
  }
  std::printf("chromium %s started in %.0f ms (not counted below)\n", testing_report::ChromiumPath().c_str(),
              Ms(s0, Clock::now()));
  std::vector<double> base_ms, load_ms, ready_ms, page_ready_ms, dom_ms, base_cpu, ready_cpu;
  json timings;
  for (int r = 0; r < reps; ++r) {
    double c = browser.CpuSeconds();
    auto a = Clock::now();
    if (!browser.Navigate(testing_report::FileUrl(empty))) {
      std::fprintf(stderr, "%s\n", browser.error().c_str());
      return 1;
    }
    base_ms.push_back(Ms(a, Clock::now()));
    base_cpu.push_back(1000 * (browser.CpuSeconds() - c));
    c = browser.CpuSeconds();
    a = Clock::now();
    if (!browser.Navigate(testing_report::FileUrl(path))) {
      std::fprintf(stderr, "%s\n", browser.error().c_str());
      return 1;
    }
    load_ms.push_back(Ms(a, Clock::now()));
    json t = browser.Evaluate(
        "window.tsReady.then((t) => ({t, ready: performance.now(), "
        "dom: performance.getEntriesByType('navigation')[0].domInteractive, "
        "errors: Number(document.getElementById('ts-errors').getAttribute('data-count'))}))");
    auto b = Clock::now();
    if (!t.is_object() || t["errors"] != 0) {
      std::fprintf(stderr, "the report did not render cleanly: %s %s\n", browser.error().c_str(), t.dump().c_str());
      return 1;
    }
    ready_ms.push_back(Ms(a, b));
    ready_cpu.push_back(1000 * (browser.CpuSeconds() - c));
    page_ready_ms.push_back(t["ready"].get<double>());
    dom_ms.push_back(t["dom"].get<double>());
    timings = t["t"];
  }
  std::ifstream loadavg("/proc/loadavg");
  std::string load;
  std::getline(loadavg, load);
  std::printf("\nheadless Chromium, %d loads each, alternating, medians (ms); machine: %u cores, load average %s\n",
              reps, std::thread::hardware_concurrency(), load.c_str());
  std::printf("  %-46s %8.0f\n", "empty page: navigate -> load event (baseline)", Median(base_ms));
  std::printf("  %-46s %8.0f\n", "report: navigate -> load event", Median(load_ms));
  std::printf("  %-46s %8.0f\n", "report: navigate -> first render done", Median(ready_ms));
  std::printf("  %-46s %8.0f\n", "empty page: Chromium CPU time (all processes)", Median(base_cpu));
  std::printf("  %-46s %8.0f\n", "report: Chromium CPU time to first render", Median(ready_cpu));
  std::printf("  %-46s %8.0f\n", "report: first render done, page clock", Median(page_ready_ms));
  std::printf("  %-46s %8.0f\n", "report: HTML parsed (domInteractive)", Median(dom_ms));
  std::printf("  last load's phases (ms from script start): %s\n", timings.dump().c_str());

  json st = browser.Evaluate("window.tsSelftest()", 300);
  if (!st.is_object()) {
    std::fprintf(stderr, "selftest: %s\n", browser.error().c_str());
    return 1;
  }
  std::vector<double> per;
  for (const auto& l : st["launches"]) per.push_back(l["ms"].get<double>());
  std::printf(
      "every detailed launch drawn once (decode + heatmap + order + reference): %zu launches, median %.0f ms, "
      "max %.0f ms; all %d table rows rendered in %.0f ms\n",
      per.size(), Median(per), per.empty() ? 0.0 : *std::max_element(per.begin(), per.end()), st["rows"].get<int>(),
      st["rows_ms"].get<double>());
  for (const auto& e : browser.console_errors()) std::printf("console error: %s\n", e.c_str());
  std::printf("report left at %s\n", path.c_str());
  return browser.console_errors().empty() ? 0 : 1;
}
