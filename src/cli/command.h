// How a subcommand of `twinscope` plugs into the CLI: each src/cli/cmd_*.cpp
// defines one static CommandRegistration. `setup` adds the subcommand's
// options to `sub` and returns the function that runs it (its return value is
// the process exit code). Keep command files thin: parse flags, call a
// library, print.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace twinscope::cli {

using CommandRun = std::function<int()>;
using CommandSetup = std::function<CommandRun(CLI::App* sub)>;

struct CommandRegistration {
  CommandRegistration(std::string name, std::string description, CommandSetup setup);
};

struct RegisteredCommand {
  std::string name;
  std::string description;
  CommandSetup setup;
};
std::vector<RegisteredCommand>& Commands();

}  // namespace twinscope::cli
