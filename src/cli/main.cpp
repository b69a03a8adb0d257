// twinscope: the command-line front end. Subcommands live in cmd_*.cpp and
// register themselves (command.h).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "base/settings.h"
#include "cli/command.h"

namespace twinscope::cli {

std::vector<RegisteredCommand>& Commands() {
  static std::vector<RegisteredCommand> commands;
  return commands;
}

CommandRegistration::CommandRegistration(std::string name, std::string description, CommandSetup setup) {
  Commands().push_back({std::move(name), std::move(description), std::move(setup)});
}

}  // namespace twinscope::cli

int main(int argc, char** argv) {
  using namespace twinscope::cli;
  CLI::App app{"twinscope: GPU tracing of kernels, copies and thread blocks, launch by launch"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "twinscope " TWINSCOPE_VERSION);  // project(VERSION) in CMakeLists.txt
  auto commands = Commands();
  std::sort(commands.begin(), commands.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::map<CLI::App*, CommandRun> runs;
  for (auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    runs[sub] = c.setup(sub);
  }
  // A misspelt TWINSCOPE_* variable would reach the collectors unread: named here first, with the closest known one.
  twinscope::settings::WarnUnknown(environ);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help/--version exit 0; every usage error exits 2 (CLI11's own codes vary).
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  for (auto& [sub, run] : runs) {
    if (sub->parsed()) {
      try {
        return run();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "twinscope %s: %s\n", sub->get_name().c_str(), e.what());
        return 1;
      }
    }
  }
  return 2;
}
