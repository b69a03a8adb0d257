// twinscope record: run a program under the CUPTI collector (primary trace).
#include <set>
#include <sstream>

#include "base/env_names.h"
#include "cli/command.h"
#include "cli/record_common.h"

namespace twinscope::cli {
namespace {

// CLI11 validator for --kinds: a comma list of known activity kinds.
std::string CheckKinds(const std::string& value) {
  static const std::set<std::string> kKnown = {"kernel", "memcpy", "memset", "api", "nvtx"};
  std::stringstream ss(value);
  std::string kind;
  int n = 0;
  while (std::getline(ss, kind, ',')) {
    if (!kKnown.count(kind)) return "unknown kind '" + kind + "' (known: kernel,memcpy,memset,api,nvtx)";
    ++n;
  }
  return n ? "" : "give at least one kind (kernel,memcpy,memset,api,nvtx)";
}

struct RecordFlags {
  std::string output = "twinscope.tsc";
  std::string kinds;
  bool kernels_only = false;
  long long buffer_size_kb = 0;
  long long pool_limit = 0;
  long long flush_ms = 0;
  std::vector<std::string> command;
};

CommandRegistration kRecord(
    "record", "Run a program under the CUPTI collector and write its kernel/copy/API/NVTX trace",
    [](CLI::App* sub) -> CommandRun {
      auto f = std::make_shared<RecordFlags>();
      sub->add_option("-o,--output", f->output,
                      "Trace file (the first traced process's; the others' go to FILE.d/), or a folder (exists, or "
                      "ends with '/'): a trace per process. The previous run's traces there are replaced")
          ->capture_default_str();
      sub->add_option("--kinds", f->kinds, "Activity kinds, comma list of kernel,memcpy,memset,api,nvtx (default: all)")
          ->check(CLI::Validator(CheckKinds, "KINDS"));
      sub->add_flag("--kernels-only", f->kernels_only,
                    "Record kernels only, without the memcpy/memset activity that keeps CUDA Graph replays from "
                    "losing kernel records (see FACTS.md); for reproducing that loss");
      sub->add_option("--buffer-size", f->buffer_size_kb, "CUPTI host buffer size in KB")->check(CLI::PositiveNumber);
      sub->add_option("--device-buffer-pool-limit", f->pool_limit, "CUPTI device buffer pool limit")
          ->check(CLI::PositiveNumber);
      sub->add_option("--flush-ms", f->flush_ms, "Flush CUPTI buffers and the trace every N ms")
          ->check(CLI::PositiveNumber);
      sub->add_option("command", f->command, "The program and its arguments, after '--'")->required();
      sub->footer("Example: twinscope record -o run.tsc -- python infer.py --steps 10");
      return [f]() {
        // No GPU: said first; the program still runs, and `record` exits with its code.
        GpuUsableOrSay("twinscope record", "Running the program anyway: it can launch no GPU work to trace");
        RecordRequest r;
        r.library = "libtwinscope_cupti.so";
        r.output = f->output;
        r.command = f->command;
        r.label = "recording";
        if (!f->kinds.empty()) r.env.emplace_back(env::kKinds, f->kinds);
        if (f->kernels_only) r.env.emplace_back(env::kKernelsOnly, "1");
        if (f->buffer_size_kb) r.env.emplace_back(env::kBufferSizeKb, std::to_string(f->buffer_size_kb));
        if (f->pool_limit) r.env.emplace_back(env::kDeviceBufferPoolLimit, std::to_string(f->pool_limit));
        if (f->flush_ms) r.env.emplace_back(env::kFlushMs, std::to_string(f->flush_ms));
        for (auto& kv : PrimaryCuptiEnv(f->command)) r.env.push_back(std::move(kv));
        return RecordCommand(r);
      };
    });

}  // namespace
}  // namespace twinscope::cli
