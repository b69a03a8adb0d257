// twinscope blocks: run a program under the block probe (shadow trace).
#include "cli/command.h"
#include "cli/record_common.h"
#include "cli/run_child.h"
#include "probe/sanitizer_version.h"

namespace twinscope::cli {
namespace {

struct BlocksFlags {
  std::vector<std::string> kernels;
  BlocksSampling sampling;
  std::string output;
  std::vector<std::string> command;
};

CommandRegistration kBlocks(
    "blocks", "Run a program under the block probe: per-block SM, enter/exit time and order of chosen kernels",
    [](CLI::App* sub) -> CommandRun {
      auto f = std::make_shared<BlocksFlags>();
      sub->add_option("--kernel", f->kernels,
                      "Kernel name pattern (substring of the mangled or demangled name; 're:' prefix for a regex); "
                      "repeat for more")
          ->required()
          ->allow_extra_args(false)  // one pattern per --kernel: a '--' after it still starts the command
          ->check(CLI::Validator(CheckKernelPattern, "PATTERN"));
      AddBlocksSamplingFlags(sub, &f->sampling, "");
      sub->add_option("-o,--output", f->output,
                      "Trace file (the first traced process's; the others' go to FILE.d/), or a folder (exists, or "
                      "ends with '/'): a trace per process. The previous run's traces there are replaced")
          ->required();
      sub->add_option("command", f->command, "The program and its arguments, after '--'")->required();
      sub->footer(
          "Example: twinscope blocks --kernel reshape_and_cache --budget 5 -o shadow.tsc -- python serve.py\n"
          "Modes and their cost: docs/block-probe.md");
      return [f]() {
        GpuUsableOrSay("twinscope blocks", "Running the program anyway: it can launch no GPU work to trace");
        // The Sanitizer API the block probe will load, its version, and a warning outside the measured ones.
        if (auto lib = FindCollectorLibrary("libtwinscope_blocks.so"); lib.ok())
          std::fputs(probe::DescribeSanitizer(probe::ResolveSanitizer(*lib), "twinscope blocks").c_str(), stderr);
        RecordRequest r;
        r.library = "libtwinscope_blocks.so";
        r.output = f->output;
        r.command = f->command;
        r.label = "tracing blocks";
        r.env = BlocksEnv(f->kernels, f->sampling);
        return RecordCommand(r);
      };
    });

}  // namespace
}  // namespace twinscope::cli
