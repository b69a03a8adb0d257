// Shared by the report's sections: tolerant reads of the join's JSON, table cells, labels and key sets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace twinscope::report {

using json = nlohmann::json;

// A missing key, or a key of a value that is not an object, reads as null / the default.
const json& At(const json& j, std::string_view key);
bool Has(const json& j, std::string_view key);
double Num(const json& j, std::string_view key, double def = 0);
int64_t Int(const json& j, std::string_view key, int64_t def = 0);
std::string Str(const json& j, std::string_view key, std::string def = "");
bool Bool(const json& j, std::string_view key);

// A value for a table cell: numbers with separators, strings escaped, anything else as JSON.
std::string Cell(const json& v);
// Grid and block shapes as CUDA writes them, "(4096,1,1)": no thousands separators.
std::string Dims(const json& v);
// A duration in nanoseconds for a table cell ("&ndash;" when it is not a number).
std::string DurCell(const json& j, std::string_view key);

// `s` cut to `n` characters, "..." added where it was cut.
std::string Shorten(const std::string& s, size_t n);
// A kernel name as the page's tables show it (the full name goes in a title): names of at most `max` bytes
// whole; longer ones with their template arguments and parameters elided ("void foo<...>(...)"), and if
// that is still longer than `max`, cut in the middle ("void very_lo…ng_name<...>(...)"). Mirrored by
// assets/report.js (shortName) for the rows the page builds.
inline constexpr size_t kShortKernelName = 64;
std::string ShortKernelName(const std::string& name, size_t max = kShortKernelName);
// A "why slow" verdict as the page names it ("fewer_blocks" -> "fewer blocks").
std::string VerdictLabel(const std::string& v);

inline constexpr const char* kStretchNote =
    "Shadow times are stretched by the block probe's instrumentation (docs/block-probe.md): compare them "
    "within one launch (as shares of its span), never with the primary's durations.";

// One of a trace's loss findings (the join's side.loss.findings, from stats::LossFindings) that is a loss:
// severity data_loss or error; info findings (counters a newer writer added) are shown, never counted.
bool IsLossFinding(const json& finding);
// How far one range of the join's "drift" drifted: its launches matched by time only, unmatched, or
// with another shape.
int64_t DriftOf(const json& d);

}  // namespace twinscope::report
