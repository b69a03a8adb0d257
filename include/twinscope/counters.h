// The counters a trace carries in its STATUS and SUMMARY chunks (JSON object "counters": name -> unsigned
// integer), from one table (counters.def): each counter's name, severity, collector and help. The collectors
// write them by these names; stats, join.json and every view take severities from here and keep no list of
// their own (docs/trace-format.md, "Counters").
#pragma once

#include <cstddef>
#include <string_view>

namespace twinscope::counters {

#define TWINSCOPE_COUNTER(id, name, severity, collector, help) inline constexpr char id[] = name;
#include "twinscope/counters.def"
#undef TWINSCOPE_COUNTER

// kInfo counts work done; kDataLoss: records or launches missing or wrong; kError: a call of the tool failed.
// Both kDataLoss and kError make a trace's loss verdict (stats --strict, the views' loss warnings).
enum class Severity { kInfo, kDataLoss, kError };
enum class Collector { kBoth, kCupti, kProbe };

struct CounterInfo {
  std::string_view name;
  Severity severity;
  Collector collector;
  std::string_view help;
};

inline constexpr CounterInfo kTable[] = {
#define TWINSCOPE_COUNTER(id, name, severity, collector, help) {name, Severity::severity, Collector::collector, help},
#include "twinscope/counters.def"
#undef TWINSCOPE_COUNTER
};
inline constexpr size_t kCount = sizeof(kTable) / sizeof(kTable[0]);

// The row of `name`, or null for a counter this build does not know (a newer writer): show it as info.
constexpr const CounterInfo* Find(std::string_view name) {
  for (const CounterInfo& c : kTable)
    if (c.name == name) return &c;
  return nullptr;
}
constexpr Severity SeverityOf(std::string_view name) {
  const CounterInfo* c = Find(name);
  return c ? c->severity : Severity::kInfo;
}
constexpr bool IsLoss(Severity s) { return s != Severity::kInfo; }
constexpr const char* SeverityName(Severity s) {
  return s == Severity::kDataLoss ? "data_loss" : s == Severity::kError ? "error" : "info";
}
constexpr const char* CollectorName(Collector c) {
  return c == Collector::kCupti ? "cupti" : c == Collector::kProbe ? "probe" : "both";
}

static_assert(Find(kLaunchesMatching) && SeverityOf(kLaunchesMatching) == Severity::kInfo);
static_assert(SeverityOf("a_counter_of_a_newer_writer") == Severity::kInfo);

}  // namespace twinscope::counters
