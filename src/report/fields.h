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
// A "why slow" verdict as the page names it ("fewer_blocks" -> "fewer blocks").
std::string VerdictLabel(const std::string& v);

inline constexpr const char* kStretchNote =
    "Shadow times are stretched by the block probe's instrumentation (docs/block-probe.md): compare them "
    "within one launch (as shares of its span), never with the primary's durations.";

// Keys of a "loss" object that count work done rather than work lost.
bool IsContextKey(const std::string& k);
// Counters of the shadow's block probe (docs/block-probe.md, "Nothing is lost silently"): those that
// count work done rather than work lost.
bool IsProbeContextKey(const std::string& k);
// How far one range of the join's "drift" drifted: its launches matched by time only, unmatched, or
// with another shape.
int64_t DriftOf(const json& d);

}  // namespace twinscope::report
