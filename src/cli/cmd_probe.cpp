// `twinscope probe`: which combinations of CUPTI and the Compute Sanitizer
// work in one process on this machine's stack (src/probe).
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/env_names.h"
#include "base/log.h"
#include "cli/command.h"
#include "cli/run_child.h"
#include "cuptilib/cupti_library.h"
#include "probe/probe.h"
#include "probe/probe_experiments.h"

namespace twinscope::cli {
namespace {

std::string DefaultChild() {
  std::string env = EnvString(env::kProbeChild);
  if (!env.empty()) return env;
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "twinscope_probe_child";
  std::string path(self, size_t(n));
  return path.substr(0, path.rfind('/') + 1) + "twinscope_probe_child";
}

CommandRegistration probe_command(
    "probe",
    "Test on this GPU stack whether CUPTI and the Compute Sanitizer can share one process (seed 000's experiments)",
    [](CLI::App* sub) -> CommandRun {
      auto options = std::make_shared<probe::ProbeOptions>();
      auto json_path = std::make_shared<std::string>();
      options->child_path = DefaultChild();
      sub->add_option("--json", *json_path, "Also write the results as JSON to FILE");
      sub->add_option("--launches", options->launches, "Test kernel launches per experiment")
          ->check(CLI::PositiveNumber);
      sub->add_option("--timeout", options->timeout_s, "Seconds before an experiment is killed")
          ->check(CLI::PositiveNumber);
      sub->add_option("--child", options->child_path, "The twinscope_probe_child program (default: next to twinscope)");
      std::string ids;
      for (const auto& e : probe::Experiments()) ids += (ids.empty() ? "" : ", ") + e.id;
      sub->add_option("--experiment", options->only, "Run only these experiments (repeatable): " + ids);
      return [options, json_path]() -> int {
        // The children use the newest libcupti found, as `record` does.
        cuptilib::SearchOptions search;
        if (std::string site = WheelSiteDir(); !site.empty()) search.site_dirs.push_back(site);  // the wheel's
        if (auto choice = cuptilib::Choose(search); choice.ok()) options->cupti_library = choice->chosen.path;
        auto report = probe::RunProbe(*options);
        if (!report.ok()) {
          std::fprintf(stderr, "twinscope probe: %s\n", report.status().message().c_str());
          return 2;
        }
        std::fputs(report->sanitizer_line.c_str(), stderr);  // which Sanitizer API, its version (and a warning)
        if (report->gpu) std::fputs(probe::FormatTable(*report).c_str(), stdout);
        if (!json_path->empty()) {
          std::ofstream out(*json_path);
          out << probe::ToJson(*report).dump(2) << "\n";
          if (!out) {
            std::fprintf(stderr, "twinscope probe: cannot write %s\n", json_path->c_str());
            return 2;
          }
        }
        // Exit codes (README, "Exit codes"): 0 every experiment ran to the end, 1 no usable
        // GPU, 2 the probe could not start, 3 an experiment did not run to the end.
        const int code = probe::ProbeExitCode(*report);
        if (!report->missing_library.empty() || !report->gpu)
          std::fprintf(stderr, "twinscope probe: %s\n", report->summary.c_str());
        else if (code != 0)
          std::fprintf(stderr,
                       "twinscope probe: not every experiment ran to the end (the FAILED rows above): the summary "
                       "stands on those that did; exit code 3\n");
        return code;
      };
    });

}  // namespace
}  // namespace twinscope::cli
