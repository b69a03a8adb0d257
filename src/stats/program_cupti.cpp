#include "stats/program_cupti.h"

namespace twinscope::stats {
namespace {

const nlohmann::json* Report(const nlohmann::json& status) {
  if (!status.is_object() || !status.contains("tool_state")) return nullptr;
  const nlohmann::json& ts = status["tool_state"];
  if (!ts.is_object() || !ts.contains("program_cupti") || !ts["program_cupti"].is_object()) return nullptr;
  const nlohmann::json& p = ts["program_cupti"];
  return p.contains("calls") && p["calls"].is_object() && !p["calls"].empty() ? &p : nullptr;
}

uint64_t Num(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number_unsigned() ? j[key].get<uint64_t>() : 0;
}

std::string Str(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// "cuptiActivityEnable -> 14, cuptiSubscribe -> 39" for the calls with `what` > 0.
std::string Calls(const nlohmann::json& p, const char* what, size_t max = 4) {
  std::string out;
  size_t n = 0, more = 0;
  for (const auto& [name, c] : p["calls"].items()) {
    if (!c.is_object() || Num(c, what) == 0) continue;
    if (n++ >= max) {
      ++more;
      continue;
    }
    out += (out.empty() ? "" : ", ") + name;
    if (c.contains("last_result")) out += " -> " + c["last_result"].dump();
  }
  if (more) out += " and " + std::to_string(more) + " more";
  return out;
}

}  // namespace

std::string ProgramCuptiSummary(const nlohmann::json& status) {
  const nlohmann::json* p = Report(status);
  if (!p) return "";
  uint64_t calls = 0;
  for (const auto& [name, c] : (*p)["calls"].items()) calls += c.is_object() ? Num(c, "calls") : 0;
  const std::string mode = Str(*p, "mode");
  std::string line = "the program's own CUPTI client: " + std::to_string(calls) + " calls to " +
                     std::to_string((*p)["calls"].size()) + " entry points, ";
  if (mode == "served")
    line += "served beside twinscope (multi-subscriber mode), " + std::to_string(Num(*p, "records_read")) +
            " records read by the program";
  else if (mode == "floor")
    line += std::to_string(Num(*p, "refused")) + " refused: " + Str(*p, "why_not_served");
  else
    line += "mode " + (mode.empty() ? std::string("unknown") : mode);
  if (uint64_t failed = Num(*p, "failed")) line += "; " + std::to_string(failed) + " failed";
  if (p->contains("timestamps") && (*p)["timestamps"].is_object()) {
    const nlohmann::json& t = (*p)["timestamps"];
    if (Str(t, "how") == "translated")
      line += "; its own timestamp clock: CUPTI refused it beside twinscope (" +
              t.value("cupti_result", nlohmann::json(0)).dump() + "), so its timestamps are translated by the guard (" +
              std::to_string(Num(t, "records_translated")) + " records, " + std::to_string(Num(t, "clock_pairs")) +
              " clock pairs)";
    else if (Str(t, "how") == "cupti")
      line += "; its own timestamp clock: set in CUPTI";
  }
  return line;
}

std::vector<std::string> ProgramCuptiProblems(const nlohmann::json& status) {
  std::vector<std::string> out;
  const nlohmann::json* p = Report(status);
  if (!p) return out;
  const std::string todo = Str(*p, "what_to_do");
  if (uint64_t refused = Num(*p, "refused"))
    out.push_back("the program's own CUPTI client (e.g. torch.profiler) got no data: " + std::to_string(refused) +
                  " of its CUPTI calls were refused (" + Calls(*p, "refused") + ") because " +
                  Str(*p, "why_not_served") + "; what to do: " + todo);
  if (uint64_t failed = Num(*p, "failed"))
    out.push_back("the program's own CUPTI client may be incomplete: " + std::to_string(failed) +
                  " of its CUPTI calls failed (" + Calls(*p, "failed") + "); what to do: " + todo);
  if (p->contains("timestamps") && (*p)["timestamps"].is_object()) {
    const nlohmann::json& t = (*p)["timestamps"];
    const uint64_t raw = Num(t, "untranslated_records") + Num(t, "records_before_clock");
    if (raw && Str(t, "how") == "translated") {
      std::string kinds;
      if (t.contains("untranslated_kinds") && t["untranslated_kinds"].is_object())
        for (const auto& [kind, n] : t["untranslated_kinds"].items())
          kinds += (kinds.empty() ? "" : ", ") + std::string("kind ") + kind + ": " + n.dump();
      if (uint64_t early = Num(t, "records_before_clock"))
        kinds += (kinds.empty() ? "" : ", ") + std::to_string(early) + " before the first clock pair";
      out.push_back("the program's own CUPTI client got " + std::to_string(raw) + (raw == 1 ? " record" : " records") +
                    " in CUPTI's clock instead of its own (" + kinds +
                    "): the guard translates only the activity kinds whose layout it knows; what to do: for those "
                    "kinds, run the program's profiler without `twinscope record`");
    }
  }
  return out;
}

}  // namespace twinscope::stats
