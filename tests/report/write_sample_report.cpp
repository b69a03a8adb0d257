// Writes an HTML report to look at: from a synthetic join (tests/report/sample_join.h), or from a
// join JSON file (`twinscope stats DIR --json`, DIR/join.json) with --from.
//   write_sample_report OUT.html                    small synthetic run (the browser test's)
//   write_sample_report --issue-size OUT.html        2,000 launch rows, 32 x 65,536 blocks, 1,000 steps
//   write_sample_report --from join.json OUT.html
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "sample_join.h"
#include "views/report/report.h"

int main(int argc, char** argv) {
  using namespace twinscope;
  std::string from, out;
  bool issue_size = false, hostile = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--from") && i + 1 < argc) {
      from = argv[++i];
    } else if (!std::strcmp(argv[i], "--issue-size")) {
      issue_size = true;
    } else if (!std::strcmp(argv[i], "--plain-names")) {
      hostile = false;
    } else if (argv[i][0] != '-' && out.empty()) {
      out = argv[i];
    } else {
      out.clear();
      break;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "usage: %s [--issue-size] [--plain-names] [--from join.json] OUT.html\n", argv[0]);
    return 2;
  }
  nlohmann::json join;
  if (!from.empty()) {
    std::ifstream f(from);
    if (!f) {
      std::fprintf(stderr, "%s: cannot open\n", from.c_str());
      return 1;
    }
    join = nlohmann::json::parse(f, nullptr, false);
    if (join.is_discarded()) {
      std::fprintf(stderr, "%s: not valid JSON\n", from.c_str());
      return 1;
    }
  } else {
    testing_report::SampleJoinOptions o;
    o.hostile_names = hostile;
    if (issue_size) {
      o.launches = 2000;
      o.launches_total = 1000000;
      o.detail_launches = 32;
      o.blocks = 65536;
      o.steps = 1000;
    }
    join = testing_report::MakeSampleJoin(o);
  }
  ReportInfo info;
  Status s = WriteReport(join, out, {}, &info);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  std::printf("%s: %zu bytes, %zu launch rows of %zu, %zu detailed launches (%llu blocks), charts %s\n", out.c_str(),
              info.bytes, info.launch_rows, info.launches_total, info.detail_launches,
              static_cast<unsigned long long>(info.detail_blocks), info.charts ? "inlined" : "missing");
  return 0;
}
