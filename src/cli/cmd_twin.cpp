// twinscope twin: run one command as a primary (CUPTI collector) and a shadow
// (block probe), then join them launch by launch (src/twin, src/join).
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "cli/cli_text.h"
#include "cli/command.h"
#include "cli/join_outputs.h"
#include "cli/record_common.h"
#include "cli/run_child.h"
#include "twin/twin_runner.h"

namespace twinscope::cli {
namespace {

struct TwinFlags {
  std::vector<std::string> kernels;
  long long every = 0;
  long long max_launches = 0;
  std::string out = "twinscope-twin";
  bool concurrent = false;
  int shadow_device = -1;
  size_t top = 10;
  std::vector<std::string> command;
};

void ReportSide(const char* side, const twin::ChildExit& e) {
  if (!e.started) {
    std::fprintf(stderr, "twinscope twin: the %s could not run: %s\n", side, e.error.c_str());
  } else if (e.term_signal) {
    std::fprintf(stderr, "twinscope twin: the %s was killed by %s after %.1fs\n", side,
                 SignalName(e.term_signal).c_str(), e.elapsed_s);
  } else {
    std::fprintf(stderr, "twinscope twin: the %s exited with code %d after %.1fs\n", side, e.exit_code, e.elapsed_s);
  }
}

// When the pattern matched nothing: the kernels the primary launched most.
void SuggestKernels(const std::string& primary_trace, const std::vector<std::string>& patterns) {
  std::string list;
  for (const auto& p : patterns) list += (list.empty() ? "'" : ", '") + p + "'";
  std::fprintf(stderr, "twinscope twin: the kernel pattern %s matched no launched kernel: the shadow traced nothing\n",
               list.c_str());
  auto s = stats::ComputeTraceStats(primary_trace);
  if (!s.ok() || s->kernels.empty()) return;
  auto kernels = s->kernels;
  std::stable_sort(kernels.begin(), kernels.end(), [](auto& a, auto& b) { return a.count > b.count; });
  std::fprintf(stderr, "  the kernels launched most (give a substring of one with --kernel):\n");
  for (size_t i = 0; i < kernels.size() && i < 10; ++i)
    std::fprintf(stderr, "    %10s  %s\n", FormatCount(kernels[i].count).c_str(), kernels[i].name.c_str());
}

bool FileExists(const std::string& p) { return access(p.c_str(), R_OK) == 0; }

CommandRegistration kTwin(
    "twin",
    "Run a program twice, a primary (CUPTI) and a shadow (block probe), and join them launch by launch",
    [](CLI::App* sub) -> CommandRun {
      auto f = std::make_shared<TwinFlags>();
      sub->add_option("--kernel", f->kernels,
                      "Kernel to trace blocks of (substring of the mangled or demangled name; 're:' prefix for a "
                      "regex); repeat for more")
          ->required()
          ->allow_extra_args(false)  // one pattern per --kernel: a '--' after it still starts the command
          ->check(CLI::Validator(CheckKernelPattern, "PATTERN"));
      sub->add_option("--every", f->every, "Shadow: trace every Nth matching launch")->check(CLI::PositiveNumber);
      sub->add_option("--max-launches", f->max_launches, "Shadow: stop tracing after N launches")
          ->check(CLI::PositiveNumber);
      sub->add_option("-o,--output", f->out, "Folder for primary.tsc, shadow.tsc and the joined views")
          ->capture_default_str();
      sub->add_flag("--concurrent", f->concurrent,
                    "Run both at once (live input); the join flags primary kernels that ran while the shadow had "
                    "GPU work. Default: the primary alone first, then the shadow");
      sub->add_option("--shadow-device", f->shadow_device, "Run the shadow on this GPU (CUDA_VISIBLE_DEVICES)")
          ->check(CLI::NonNegativeNumber);
      sub->add_option("--top", f->top, "Slowest matched launches to print")->capture_default_str();
      sub->add_option("command", f->command, "The program and its arguments, after '--'")->required();
      sub->footer("Example: twinscope twin --kernel reshape_and_cache_flash -o run -- python infer.py");
      return [f]() {
        auto primary_lib = FindCollectorLibrary("libtwinscope_cupti.so");
        auto shadow_lib = FindCollectorLibrary("libtwinscope_blocks.so");
        for (auto* l : {&primary_lib, &shadow_lib}) {
          if (!l->ok()) {
            std::fprintf(stderr, "twinscope twin: %s\n", l->status().message().c_str());
            return 1;
          }
        }
        twin::TwinRequest r;
        r.command = f->command;
        r.out_dir = AbsolutePath(f->out);
        r.primary_library = *primary_lib;
        r.shadow_library = *shadow_lib;
        r.shadow_env = BlocksEnv(f->kernels, f->every, f->max_launches);
        r.concurrent = f->concurrent;
        r.shadow_device = f->shadow_device;
        r.progress = isatty(STDERR_FILENO);
        std::fprintf(stderr, "twinscope twin: %s, results in %s\n",
                     f->concurrent ? "primary and shadow at once" : "primary first, then the shadow",
                     r.out_dir.c_str());
        twin::TwinOutcome o = twin::RunTwin(r);
        if (!o.error.empty()) {
          std::fprintf(stderr, "twinscope twin: %s\n", o.error.c_str());
          return 1;
        }
        ReportSide("primary", o.primary);
        if (o.shadow_skipped) {
          std::fprintf(stderr, "twinscope twin: stopped by a signal: the shadow was not started\n");
        } else {
          ReportSide("shadow", o.shadow);
        }
        const int code = o.primary.exit_code;
        nlohmann::json twin_json = {{"concurrent", f->concurrent},
                                    {"primary_exit", o.primary.exit_code},
                                    {"shadow_exit", o.shadow.exit_code},
                                    {"primary_elapsed_s", o.primary.elapsed_s},
                                    {"shadow_elapsed_s", o.shadow.elapsed_s},
                                    {"shadow_start_realtime_ns", o.shadow.start_realtime_ns},
                                    {"shadow_end_realtime_ns", o.shadow.end_realtime_ns},
                                    {"command", f->command},
                                    {"kernels", f->kernels}};
        std::ofstream(r.out_dir + "/twin.json") << twin_json.dump(2) << "\n";
        if (!FileExists(o.primary_trace)) {
          std::fprintf(stderr,
                       "twinscope twin: the primary wrote no trace (%s): nothing to join. Did the program make CUDA "
                       "calls? Look for 'twinscope:' messages above\n",
                       o.primary_trace.c_str());
          return code ? code : 1;
        }
        if (!FileExists(o.shadow_trace)) {
          std::fprintf(stderr, "twinscope twin: the shadow wrote no trace (%s): nothing to join; the primary's trace "
                               "is complete on its own\n",
                       o.shadow_trace.c_str());
          return code;
        }
        if (o.shadow.term_signal || (o.shadow.exit_code && !o.primary.exit_code)) {
          std::fprintf(stderr, "twinscope twin: the shadow did not finish cleanly: joining with what it left\n");
        }
        JoinOutputRequest jr;
        jr.primary = o.primary_trace;
        jr.shadow = o.shadow_trace;
        jr.out_dir = r.out_dir;
        jr.options = TwinOptions(r.out_dir);
        jr.top = f->top;
        if (JoinAndReport(jr) != 0) return code ? code : 1;
        auto shadow_stats = stats::ComputeTraceStats(o.shadow_trace);
        if (shadow_stats.ok() && shadow_stats->counts["launch"] == 0) SuggestKernels(o.primary_trace, f->kernels);
        return code;
      };
    });

}  // namespace
}  // namespace twinscope::cli
