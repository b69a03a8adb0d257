// The engines' sizing-flag tables and the rule that gives both sides of `twin --serve` the same capacity.
#include "twin/sizing_flags.h"

#include <algorithm>
#include <cctype>

namespace twinscope::twin {

namespace {

SizingFlag Value(std::vector<std::string> names, std::string what, bool share = false) {
  SizingFlag f;
  f.names = std::move(names);
  f.kind = SizingKind::kValue;
  f.memory_share = share;
  f.what = std::move(what);
  return f;
}

SizingFlag List(std::string name, std::string what) {
  SizingFlag f = Value({std::move(name)}, std::move(what));
  f.kind = SizingKind::kList;
  return f;
}

// A switch; `negatable`: the engine also takes --no-NAME (typer's and argparse's BooleanOptionalAction).
SizingFlag Switch(const std::string& name, std::string what, bool negatable) {
  SizingFlag f = Value({name}, std::move(what));
  f.kind = SizingKind::kSwitch;
  if (negatable) f.off_names = {"--no-" + name.substr(2)};
  return f;
}

std::vector<EngineSizing> MakeTables() {
  std::vector<EngineSizing> t;
  t.push_back(
      {"transformers",
       "transformers serve",
       "transformers 5.17.0, cli/serve.py (typer: --X/--no-X for booleans)",
       false,
       {
           Switch("--continuous-batching", "continuous batching with the paged KV cache", true),
           Value({"--cb-num-blocks"}, "KV cache blocks"),
           Value({"--cb-block-size"}, "tokens per KV cache block"),
           Value({"--cb-max-batch-tokens"}, "tokens per step"),
           Value({"--cb-max-memory-percent"}, "share of GPU memory for the KV cache (without --cb-num-blocks)", true),
           Switch("--cb-use-cuda-graph", "CUDA graphs of the steps", true),
       }});
  t.push_back({"vllm",
               "vllm serve",
               "vLLM 0.34.0, engine/arg_utils.py and config/{scheduler,cache,model,compilation}.py (argparse: "
               "--no-X for booleans; --X_Y taken as --X-Y)",
               true,
               {
                   Value({"--max-num-batched-tokens"}, "tokens per step"),
                   Value({"--max-num-scheduled-tokens"}, "tokens the scheduler issues per step"),
                   Value({"--max-num-seqs"}, "requests per step (and the runner's buffers, graph sizes)"),
                   Value({"--max-num-active-seqs"}, "requests admitted to running"),
                   Value({"--block-size"}, "tokens per KV cache block"),
                   Value({"--num-gpu-blocks-override"}, "KV cache blocks"),
                   Value({"--gpu-memory-utilization", "--device-memory-utilization"},
                         "share of GPU memory (the KV cache is what is left after the weights)", true),
                   Value({"--kv-cache-memory-bytes"}, "KV cache bytes"),
                   Value({"--kv-cache-dtype"}, "bytes per cached token"),
                   Value({"--max-model-len"}, "longest prompt + reply"),
                   Value({"--long-prefill-token-threshold"}, "prompt tokens of one request per step"),
                   Value({"--scheduling-policy"}, "which waiting request goes first"),
                   Switch("--enable-chunked-prefill", "prompts split across steps", true),
                   Switch("--enable-prefix-caching", "cached prompt prefixes skipped", true),
                   Switch("--async-scheduling", "step N+1 scheduled while step N runs", true),
                   Switch("--enforce-eager", "no CUDA graphs", true),
                   List("--cudagraph-capture-sizes", "batch sizes captured as CUDA graphs"),
                   Value({"--max-cudagraph-capture-size"}, "largest batch captured as a CUDA graph"),
               }});
  t.push_back({"sglang",
               "python -m sglang.launch_server",
               "SGLang 0.5.23, srt/arg_groups/fields/{schedule,exec_,memory,model}.py and srt/server_args.py "
               "(argparse store_true: no --no-X)",
               false,
               {
                   Value({"--mem-fraction-static"}, "share of GPU memory for weights and the KV pool", true),
                   Value({"--max-total-tokens"}, "tokens in the KV pool"),
                   Value({"--max-running-requests"}, "running requests"),
                   Value({"--chunked-prefill-size"}, "tokens of a prompt chunk (-1: no chunking)"),
                   Value({"--max-prefill-tokens"}, "tokens per prefill batch"),
                   Value({"--prefill-max-requests"}, "requests per prefill batch"),
                   Value({"--page-size"}, "tokens per KV page"),
                   Value({"--kv-cache-dtype"}, "bytes per cached token"),
                   Value({"--context-length"}, "longest prompt + reply"),
                   Value({"--schedule-policy"}, "which waiting request goes first"),
                   Value({"--schedule-conservativeness"}, "how much KV room a batch keeps free"),
                   Value({"--num-continuous-decode-steps"}, "decode steps per scheduling round"),
                   Switch("--enable-mixed-chunk", "prefill chunks beside decode tokens", false),
                   Switch("--disable-overlap-schedule", "no overlapped (asynchronous) scheduling", false),
                   Switch("--disable-radix-cache", "no prefix cache", false),
                   Value({"--cuda-graph-config"}, "CUDA graph settings (JSON)"),
                   Value({"--cuda-graph-backend-decode"}, "decode CUDA graphs: full, breakable, disabled"),
                   Value({"--cuda-graph-backend-prefill"}, "prefill CUDA graphs: full, breakable, disabled"),
                   Value({"--cuda-graph-max-bs-decode"}, "largest decode batch captured"),
                   Value({"--cuda-graph-max-bs-prefill"}, "largest prefill batch captured"),
                   List("--cuda-graph-bs-decode", "decode batch sizes captured"),
                   List("--cuda-graph-bs-prefill", "prefill batch sizes captured"),
                   Switch("--disable-decode-cuda-graph", "no decode CUDA graphs", false),
                   Switch("--disable-prefill-cuda-graph", "no prefill CUDA graphs", false),
                   Switch("--disable-cuda-graph", "no CUDA graphs (deprecated in 0.5.23)", false),
               }});
  t.push_back({"demo",
               "twinscope-demo-server",
               "this tree, demo/server/server_main.cpp (CLI11)",
               false,
               {
                   Value({"--max-batch"}, "sequences per step"),
                   Value({"--max-prefill-tokens"}, "prompt tokens per prefill step"),
                   Value({"--max-model-len"}, "longest prompt + reply"),
                   Value({"--block-size"}, "tokens per KV cache block"),
                   Value({"--gpu-memory-fraction"}, "share of GPU memory (weights, buffers, KV cache)", true),
                   Value({"--cpu-kv-blocks"}, "KV cache blocks of the cpu engine"),
                   Switch("--enforce-eager", "no CUDA graphs", false),
               }});
  return t;
}

std::string Basename(const std::string& p) {
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// A word that starts another option (not a negative number).
bool IsOption(const std::string& w) {
  return w.size() > 1 && w[0] == '-' && !std::isdigit(static_cast<unsigned char>(w[1])) && w[1] != '.';
}

// The flag `name` is (on or off), or null.
const SizingFlag* Match(const EngineSizing& table, const std::string& name, bool* off) {
  for (const auto& f : table.flags) {
    if (std::find(f.names.begin(), f.names.end(), name) != f.names.end()) {
      *off = false;
      return &f;
    }
    if (std::find(f.off_names.begin(), f.off_names.end(), name) != f.off_names.end()) {
      *off = true;
      return &f;
    }
  }
  return nullptr;
}

// The last setting of `flag` in `settings`; null if none.
const SizingSetting* Last(const std::vector<SizingSetting>& settings, const SizingFlag* flag) {
  const SizingSetting* last = nullptr;
  for (const auto& s : settings)
    if (s.flag == flag) last = &s;
  return last;
}

std::vector<std::string> Concat(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> c = a;
  c.insert(c.end(), b.begin(), b.end());
  return c;
}

// "--cb-num-blocks 512" / "--enforce-eager": how the messages show a setting.
std::string Shown(const SizingSetting& s) {
  if (s.flag->kind == SizingKind::kSwitch) return s.words.front();
  std::string name = s.words.front();
  name = name.substr(0, name.find('='));
  return name + " " + s.value;
}

nlohmann::json Settings(const EngineSizing& table, const std::vector<std::string>& args) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& s : FindSizingSettings(table, args))
    if (!s.missing_value) j[s.flag->names.front()] = s.value;
  return j;
}

}  // namespace

const std::vector<EngineSizing>& SizingTables() {
  static const std::vector<EngineSizing> tables = MakeTables();
  return tables;
}

const EngineSizing* FindSizingTable(const std::string& engine) {
  for (const auto& t : SizingTables())
    if (t.engine == engine) return &t;
  return nullptr;
}

std::string DetectServingEngine(const std::vector<std::string>& command, const std::string& adapter, std::string* why) {
  auto found = [&](const char* engine, const std::string& how) {
    if (why) *why = how;
    return std::string(engine);
  };
  for (size_t i = 0; i < command.size(); ++i) {
    const std::string base = Basename(command[i]);
    const bool serve_after =
        std::find(command.begin() + static_cast<long>(i) + 1, command.end(), "serve") != command.end();
    if (base == "transformers" && serve_after) return found("transformers", "the command's `transformers serve`");
    if (base == "vllm" && serve_after) return found("vllm", "the command's `vllm serve`");
    if (StartsWith(command[i], "vllm.entrypoints.")) return found("vllm", "the command's " + command[i]);
    if (base == "sglang" && serve_after) return found("sglang", "the command's `sglang serve`");
    if (command[i] == "sglang.launch_server") return found("sglang", "the command's sglang.launch_server");
    if (base == "twinscope-demo-server") return found("demo", "the command's twinscope-demo-server");
  }
  if (FindSizingTable(adapter)) return found(adapter.c_str(), "--engine-adapter " + adapter);
  if (why) why->clear();
  return "";
}

std::vector<SizingSetting> FindSizingSettings(const EngineSizing& table, const std::vector<std::string>& args) {
  std::vector<SizingSetting> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (!StartsWith(w, "--")) continue;
    const size_t eq = w.find('=');
    std::string name = w.substr(0, eq);
    if (table.underscores) std::replace(name.begin() + 2, name.end(), '_', '-');
    bool off = false;
    const SizingFlag* f = Match(table, name, &off);
    if (!f) continue;
    SizingSetting s;
    s.flag = f;
    s.words = {w};
    if (f->kind == SizingKind::kSwitch) {
      s.value = off ? "off" : "on";
    } else if (eq != std::string::npos) {
      s.value = w.substr(eq + 1);
    } else if (f->kind == SizingKind::kValue) {
      if (i + 1 < args.size()) {
        s.value = args[++i];
        s.words.push_back(s.value);
      } else {
        s.missing_value = true;
      }
    } else {  // a list: the words up to the next option
      while (i + 1 < args.size() && !IsOption(args[i + 1])) {
        s.words.push_back(args[++i]);
        s.value += (s.value.empty() ? "" : " ") + s.words.back();
      }
      s.missing_value = s.words.size() == 1;
    }
    out.push_back(std::move(s));
  }
  return out;
}

SizingAlignment AlignSizingFlags(const std::string& engine, const std::vector<std::string>& command,
                                 const std::vector<std::string>& primary_args,
                                 const std::vector<std::string>& shadow_args, bool both_on_one_gpu, bool primary_ran) {
  SizingAlignment a;
  a.primary_args = primary_args;
  a.shadow_args = shadow_args;
  const EngineSizing* table = FindSizingTable(engine);
  if (!table) {
    // Nothing is copied for a server whose flags are not known; say which words look like sizing flags.
    for (const auto& t : SizingTables()) {
      for (const auto* side : {&primary_args, &shadow_args}) {
        const auto* other = side == &primary_args ? &shadow_args : &primary_args;
        for (const auto& s : FindSizingSettings(t, *side)) {
          const std::string name = s.words.front().substr(0, s.words.front().find('='));
          bool in_other = false;
          for (const auto& o : FindSizingSettings(t, *other)) in_other = in_other || o.flag == s.flag;
          if (!in_other && std::find(a.unknown_engine_flags.begin(), a.unknown_engine_flags.end(), name) ==
                               a.unknown_engine_flags.end())
            a.unknown_engine_flags.push_back(name);
        }
      }
    }
    if (!a.unknown_engine_flags.empty()) {
      std::string list;
      for (const auto& n : a.unknown_engine_flags) list += (list.empty() ? "" : ", ") + n;
      a.unknown_engine_message =
          list +
          " given to one side only: twinscope knows the sizing flags of transformers serve, vllm serve, "
          "sglang and twinscope-demo-server, and this server is none of them, so " +
          (a.unknown_engine_flags.size() == 1 ? "it is" : "they are") +
          " not passed to the other side; for the same capacity on both sides put it in the command after --";
    }
    return a;
  }
  a.engine = engine;
  const auto p = FindSizingSettings(*table, primary_args), s = FindSizingSettings(*table, shadow_args);
  const auto pc = FindSizingSettings(*table, Concat(command, primary_args));
  const auto sc = FindSizingSettings(*table, Concat(command, shadow_args));
  // Flags in the order the user gave them: the primary's first.
  std::vector<const SizingFlag*> order;
  for (const auto* list : {&p, &s})
    for (const auto& x : *list)
      if (std::find(order.begin(), order.end(), x.flag) == order.end()) order.push_back(x.flag);
  for (const SizingFlag* f : order) {
    const SizingSetting* lp = Last(p, f);
    const SizingSetting* ls = Last(s, f);
    if ((lp && lp->missing_value) || (ls && ls->missing_value)) continue;  // the server itself says so
    const SizingSetting* ep = Last(pc, f);
    const SizingSetting* es = Last(sc, f);
    const std::string pv = ep && !ep->missing_value ? ep->value : "";
    const std::string sv = es && !es->missing_value ? es->value : "";
    SizingDecision d;
    d.flag = f->names.front();
    if (lp && ls) {
      if (pv == sv) continue;
      d.action = "differs";
      d.primary_value = pv;
      d.shadow_value = sv;
      d.message = d.flag + " is " + pv + " for the primary and " + sv +
                  " for the shadow (each given its own): kept as given; the shadow's capacity differs from the "
                  "primary's, and where it is smaller the shadow's engine adapter stops forcing the primary's "
                  "batches (docs/engines.md, \"Capacity\")";
      a.decisions.push_back(std::move(d));
      continue;
    }
    const bool from_primary = lp != nullptr;
    const SizingSetting& given = from_primary ? *lp : *ls;
    const std::string& other_value = from_primary ? sv : pv;
    if (given.value == other_value) continue;  // the command gives the other side the same
    const char* from = from_primary ? "primary" : "shadow";
    const char* to = from_primary ? "shadow" : "primary";
    const std::string had = other_value.empty() ? "" : " (the command gives it " + other_value + ")";
    d.from = from;
    if (!from_primary && primary_ran) {
      d.action = "differs";
      d.primary_value = pv;
      d.shadow_value = sv;
      d.message = Shown(given) + " given to the shadow only, and the saved primary ran with " +
                  (pv.empty() ? std::string("the engine's default") : pv) +
                  ": kept; the shadow's capacity differs from the primary's, and where it is smaller the "
                  "shadow's engine adapter stops forcing the primary's batches (docs/engines.md, \"Capacity\")";
    } else if (f->memory_share && both_on_one_gpu) {
      d.action = "not copied";
      d.primary_value = pv;
      d.shadow_value = sv;
      d.message = Shown(given) + " given to the " + from + " only" + had + ": not passed to the " + to +
                  ", as both servers run at once on one GPU (--concurrent) and cannot each take that share; the "
                  "shadow's capacity may differ (give each side a share that fits, or --shadow-device N)";
    } else {
      auto& dest = from_primary ? a.shadow_args : a.primary_args;
      dest.insert(dest.end(), given.words.begin(), given.words.end());
      d.action = "copied";
      d.primary_value = d.shadow_value = given.value;
      d.message = Shown(given) + " given to the " + from + " only" + had + ": passed to the " + to +
                  " too, so both have the same capacity";
    }
    a.decisions.push_back(std::move(d));
  }
  a.primary_settings = Settings(*table, Concat(command, a.primary_args));
  a.shadow_settings = Settings(*table, Concat(command, a.shadow_args));
  return a;
}

nlohmann::json SizingAlignment::ToJson() const {
  nlohmann::json decided = nlohmann::json::array();
  for (const auto& d : decisions)
    decided.push_back({{"flag", d.flag},
                       {"action", d.action},
                       {"from", d.from},
                       {"primary", d.primary_value},
                       {"shadow", d.shadow_value}});
  nlohmann::json j = {{"engine", engine},           {"engine_from", engine_why},   {"primary_args", primary_args},
                      {"shadow_args", shadow_args}, {"primary", primary_settings}, {"shadow", shadow_settings},
                      {"decisions", decided}};
  if (!unknown_engine_flags.empty()) j["unknown_engine_flags"] = unknown_engine_flags;
  return j;
}

}  // namespace twinscope::twin
