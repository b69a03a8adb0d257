// The serving engines' sizing flags (those that shape batches and capacity) and `twin --serve`'s rule that
// a sizing flag given to one side only reaches the other side too (docs/sequential-serving.md, "The same
// capacity on both sides"; the table: docs/engines.md, "Sizing flags"). CUDA-free, no printing.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace twinscope::twin {

enum class SizingKind {
  kValue,   // --flag V or --flag=V
  kList,    // --flag V1 V2 ... (argparse nargs="+"), or --flag=V
  kSwitch,  // --flag (on) and, where the engine has one, --no-flag (off)
};

struct SizingFlag {
  std::vector<std::string> names;      // the first is the flag's own name, the rest aliases
  std::vector<std::string> off_names;  // switches only: the names that turn it off
  SizingKind kind = SizingKind::kValue;
  // A share of the GPU's memory (the KV cache is sized from it): two servers at once on one GPU cannot
  // both take the same share, so it is not copied between them then.
  bool memory_share = false;
  std::string what;  // what it sizes, for the docs' table
};

struct EngineSizing {
  std::string engine;        // "transformers", "vllm", "sglang", "demo"
  std::string command;       // how the server is started ("transformers serve")
  std::string checked;       // the version and source the names were checked against
  bool underscores = false;  // the engine also takes --max_num_seqs for --max-num-seqs (vLLM)
  std::vector<SizingFlag> flags;
};

// Every engine's table.
const std::vector<EngineSizing>& SizingTables();
// One engine's table; null for another name.
const EngineSizing* FindSizingTable(const std::string& engine);

// Which engine a server command runs: "transformers" (`transformers serve`), "vllm" (`vllm serve`,
// `-m vllm.entrypoints.openai.api_server`), "sglang" (`-m sglang.launch_server`, `sglang serve`), "demo"
// (twinscope-demo-server); else `adapter` (--engine-adapter NAME) when it names a table; else "".
// `why` (may be null) says how it was found.
std::string DetectServingEngine(const std::vector<std::string>& command, const std::string& adapter, std::string* why);

// One sizing flag as it occurs in a list of arguments.
struct SizingSetting {
  const SizingFlag* flag = nullptr;
  std::vector<std::string> words;  // the words as given ("--cb-num-blocks", "512" or "--cb-num-blocks=512")
  std::string value;               // "512"; a list's values joined by spaces; a switch's "on" / "off"
  bool missing_value = false;      // a value flag with nothing after it
};

// The sizing flags in `args`, in order (every occurrence; the last one of a flag is the one that counts).
std::vector<SizingSetting> FindSizingSettings(const EngineSizing& table, const std::vector<std::string>& args);

// What AlignSizingFlags did with one flag.
struct SizingDecision {
  std::string flag;    // its own name
  std::string action;  // "copied", "differs", "not copied" (a memory share, both at once on one GPU)
  std::string from;    // "primary" or "shadow": the side that was given it ("" for "differs")
  std::string primary_value, shadow_value;  // what each side runs with ("" : the engine's default)
  std::string message;                      // one line for stderr, without the "twinscope twin: " prefix
};

struct SizingAlignment {
  std::string engine;  // "" : no table for this server
  std::string engine_why;
  std::vector<std::string> primary_args, shadow_args;  // the extra arguments of each side, after copying
  std::vector<SizingDecision> decisions;
  // With no table: the words of the sides' extra args that are a sizing flag of some engine (said once:
  // nothing is copied for a server twinscope does not know).
  std::vector<std::string> unknown_engine_flags;
  std::string unknown_engine_message;  // "" when there is nothing to say
  // The setting each side ends with, flag by flag ({"--cb-num-blocks": "512"}), from the command and its
  // extra args: what twin.json records.
  nlohmann::json ToJson() const;
  nlohmann::json primary_settings = nlohmann::json::object(), shadow_settings = nlohmann::json::object();
};

// The rule. For each sizing flag of the engine given in one side's extra args only: when the other side
// would run with another value (the command's, or the engine's default), the flag is appended to the other
// side's extra args as it was given ("copied"), except a memory share when `both_on_one_gpu` (the servers
// run at once on one GPU): then it is left ("not copied"). A flag both sides' extra args set to different
// values is kept as given ("differs", a warning: the shadow's capacity differs, and its adapter stops
// forcing when the shadow's is smaller). A side's value is the last occurrence in the command followed by
// its extra args, as the engines' parsers take it. `primary_ran` (`twin --replay DIR`: the primary is a
// saved run's): nothing is copied to the primary; a flag given to the shadow only that the primary ran
// without is a difference ("differs").
SizingAlignment AlignSizingFlags(const std::string& engine, const std::vector<std::string>& command,
                                 const std::vector<std::string>& primary_args,
                                 const std::vector<std::string>& shadow_args, bool both_on_one_gpu,
                                 bool primary_ran = false);

}  // namespace twinscope::twin
