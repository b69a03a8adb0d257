// Loads an HTML report in headless Chromium, waits for its first render, and writes a full-page PNG;
// prints the page's errors and console errors (exit 1 if any). For looking at reports from GPU runs,
// which have no browser: bring report.html back and run this here.
//   report_screenshot REPORT.html OUT.png [WIDTH]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "chromium.h"

int main(int argc, char** argv) {
  using namespace twinscope::testing_report;
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s REPORT.html OUT.png [WIDTH]\n", argv[0]);
    return 2;
  }
  Browser b;
  if (!b.Start(argc > 3 ? std::atoi(argv[3]) : 1400, 1000)) {
    std::fprintf(stderr, "chromium: %s\n%s\n", b.error().c_str(), b.LogTail().c_str());
    return 1;
  }
  if (!b.Navigate(FileUrl(argv[1]))) {
    std::fprintf(stderr, "%s\n", b.error().c_str());
    return 1;
  }
  nlohmann::json r = b.Evaluate(
      "(window.tsReady || Promise.resolve({})).then((t) => { const e = document.getElementById('ts-errors'); "
      "return {t, errors: e && Number(e.getAttribute('data-count')) ? e.innerText : ''}; })");
  if (!r.is_object()) {
    std::fprintf(stderr, "%s\n", b.error().c_str());
    return 1;
  }
  if (!b.Screenshot(argv[2])) {
    std::fprintf(stderr, "%s\n", b.error().c_str());
    return 1;
  }
  std::printf("%s: first render %s\n", argv[2], r["t"].dump().c_str());
  bool bad = !r["errors"].get<std::string>().empty() || !b.console_errors().empty();
  if (!r["errors"].get<std::string>().empty()) std::printf("page errors: %s\n", r["errors"].get<std::string>().c_str());
  for (const auto& e : b.console_errors()) std::printf("console: %s\n", e.c_str());
  return bad ? 1 : 0;
}
