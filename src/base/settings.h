// The TWINSCOPE_* settings (base/settings_table.h) as data, and the one way
// to read them (docs/design.md, "Settings"). Policy, the same in both
// collectors and the CLI: an unset variable gives the table's default; a set
// but invalid one (not a number, outside its range, not one of its choices)
// gives one warning on stderr naming the variable, the value, what is
// accepted and the default used instead, and the default is used: a bad
// setting never stops tracing or the program. A TWINSCOPE_* variable that the
// table does not know gets one warning naming the closest known one. CUDA-free.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/env_names.h"

namespace twinscope::settings {

enum class Type { kText, kFlag, kInt, kReal, kChoice, kList };

// Who reads a setting (a bit set).
enum Reader : unsigned {
  kCupti = 1,    // the CUPTI collector
  kBlocks = 2,   // the block probe
  kBoth = 3,     // both collectors
  kCli = 4,      // `twinscope` itself
  kProgram = 8,  // set by `twinscope` for the traced program
  kTools = 16,   // scripts/ and tests/ only
};

struct Setting {
  const char* constant;  // its name in twinscope::env (e.g. "kFlushMs")
  const char* name;      // TWINSCOPE_...
  Type type;
  unsigned readers;           // Reader bits
  const char* default_value;  // used when unset or invalid ("" = none)
  double min, max;            // Int, Real
  const char* choices;        // Choice, List: comma-separated
  const char* shown_default;  // README's default column ("" = default_value)
  const char* help;
};

std::span<const Setting> All();
const Setting* Find(std::string_view name);
const char* TypeName(Type t);
std::string ReadersText(unsigned readers);   // "cupti", "blocks", "both", "cli", ...
std::string AcceptedText(const Setting& s);  // "an integer in 64..1048576", "always or toggle", ...

// What a setting's raw text means under the policy above: the value to use
// and, when the text was rejected, the warning (else ""). Pure: for tests.
struct Parsed {
  std::string text;  // the value in effect, as text (default or given)
  bool from_environment = false;
  std::string warning;
};
Parsed Parse(const Setting& s, const char* raw);

// Typed reads of the environment, each warning once per variable and process.
// The names must be in the table (a name that is not is a programming error:
// it throws std::logic_error, which a test catches).
std::string Text(const char* name);
bool Flag(const char* name);
long long Int(const char* name);
double Real(const char* name);
std::string Choice(const char* name);             // one of the choices, or the default
std::vector<std::string> List(const char* name);  // the known items given (unknown ones warned and left out)

// Every variable of the table that `readers` reads, with the value in effect
// (typed) and, when one was rejected, {"rejected": {name: raw}}: the trace
// header's "settings".
nlohmann::json HeaderJson(unsigned readers);

// The closest known setting name to `name` (edit distance), "" if none is near.
std::string ClosestName(std::string_view name);
// Warns once per process about each TWINSCOPE_* variable of `environ` that the
// table does not know (`who` starts the line, e.g. "twinscope"). Returns the
// warnings (for tests).
std::vector<std::string> WarnUnknown(char** envp);

// README.md's configuration table (the rows of the tracer's settings and of
// the tools' ones), generated from the table; tests/base checks README.md.
std::string ReadmeTable();

// Forgets the warnings given (tests only).
void ResetWarningsForTest();

}  // namespace twinscope::settings
