// twinscope join: match a primary and a shadow trace launch by launch and
// write the joined views. The model lives in src/join.
#include <sys/stat.h>

#include "cli/command.h"
#include "cli/join_outputs.h"
#include "cli/run_pairs.h"

namespace twinscope::cli {
namespace {

struct JoinFlags {
  std::string primary, shadow, out;
  std::string requests, schedule;
  bool concurrent = false;
  size_t top = 10;
  std::vector<std::string> normalize_range;
  std::string sqlite_blocks = "bounded";
  procs::PairingOptions pairing;
};

CommandRegistration kJoin(
    "join", "Match a primary trace (record) and a shadow trace (blocks) launch by launch; write the joined views",
    [](CLI::App* sub) -> CommandRun {
      auto f = std::make_shared<JoinFlags>();
      sub->add_option("primary", f->primary,
                      "Primary trace (twinscope record), or its run folder or a twin folder (its main trace: "
                      "the top process's, else the one with the most launches)")
          ->required()
          ->check(CLI::ExistingPath);
      sub->add_option("shadow", f->shadow, "Shadow trace (twinscope blocks), or its run folder or a twin folder")
          ->required()
          ->check(CLI::ExistingPath);
      sub->add_option("-o,--output", f->out, "Folder for join.json, the report and the other views")->required();
      sub->add_flag("--concurrent", f->concurrent,
                    "The two ran at the same time: flag primary kernels that ran while the shadow had GPU work");
      sub->add_option("--requests", f->requests,
                      "A serving run's request trace (twinscope-demo-server --trace-requests): per-request views")
          ->check(CLI::ExistingFile);
      sub->add_option("--schedule", f->schedule, "and its step schedule (--schedule-out): each step's batch")
          ->check(CLI::ExistingFile);
      sub->add_option("--normalize-range", f->normalize_range,
                      "Regular expression: in range names, the digits of each match are ignored when the two runs' "
                      "launches are aligned (numbers a framework assigns per process); repeatable; see docs/join.md")
          ->allow_extra_args(false);
      sub->add_option("--sqlite-blocks", f->sqlite_blocks,
                      "join.sqlite's blocks table: 'bounded' (the launches the views and why slow name, and the "
                      "first 100 of each kernel and shape; docs/sqlite-schema.md) or 'all' (every shadow block)")
          ->check(CLI::IsMember({"bounded", "all"}))
          ->capture_default_str();
      sub->add_option("--top", f->top, "Slowest matched launches to print")->capture_default_str();
      AddPairingFlags(sub, &f->pairing);
      sub->footer("Example: twinscope join run/primary run/shadow -o run");
      return [f]() {
        if (mkdir(f->out.c_str(), 0755) != 0 && errno != EEXIST) {
          std::fprintf(stderr, "twinscope join: cannot make folder %s: %s\n", f->out.c_str(), std::strerror(errno));
          return 1;
        }
        // Two runs of several processes each: pair them and join each pair (docs/processes.md).
        auto pside = SideOf(f->primary, "primary");
        auto sside = SideOf(f->shadow, "shadow");
        if (pside.ok() && sside.ok() && (pside->WithGpuWork() > 1 || sside->WithGpuWork() > 1)) {
          RunJoinRequest rr;
          rr.out_dir = f->out;
          rr.options.concurrent = f->concurrent;
          rr.options.requests = {f->requests, f->schedule};
          rr.options.normalize_range = f->normalize_range;
          rr.options.sqlite_all_blocks = f->sqlite_blocks == "all";
          rr.pairing = f->pairing;
          rr.top = f->top;
          return JoinRunPairs(*pside, *sside, rr);
        }
        auto primary = MainTraceOf(f->primary, "primary", "twinscope join");
        auto shadow = MainTraceOf(f->shadow, "shadow", "twinscope join");
        for (auto* t : {&primary, &shadow}) {
          if (!t->ok()) {
            std::fprintf(stderr, "twinscope join: %s\n", t->status().message().c_str());
            return 1;
          }
        }
        JoinOutputRequest r;
        r.primary = *primary;
        r.shadow = *shadow;
        r.out_dir = f->out;
        r.options.concurrent = f->concurrent;
        r.options.requests = {f->requests, f->schedule};
        r.options.normalize_range = f->normalize_range;
        r.options.sqlite_all_blocks = f->sqlite_blocks == "all";
        r.top = f->top;
        return JoinAndReport(r);
      };
    });

}  // namespace
}  // namespace twinscope::cli
