// Shared by the report's sections: table cells, labels and verdicts of the join's typed document.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "views/join_doc.h"

namespace twinscope::report {

using json = nlohmann::json;

// Cells of a table: numbers with separators, strings escaped, "&ndash;" for a value the join does not have.
std::string Cell(uint64_t v);
std::string Cell(int64_t v);
std::string Cell(const std::optional<int64_t>& v);
// A value the join passes on as its writer recorded it (loss values, sampling settings): as Cell, anything
// that is not a number, a string or a bool as JSON.
std::string Cell(const json& v);
// Grid and block shapes as CUDA writes them, "(4096,1,1)": no thousands separators.
std::string Dims(const views::DimsDoc& v);
// A duration in nanoseconds for a table cell.
std::string DurCell(uint64_t ns);
// A count of the join as the page's figures take it (beyond INT64_MAX: INT64_MAX).
int64_t Signed(uint64_t v);

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
bool IsLossFinding(const views::LossFindingDoc& finding);
// How far one range of the join's "drift" drifted: its launches matched by time only, unmatched, or
// with another shape.
int64_t DriftOf(const views::DriftDoc& d);

}  // namespace twinscope::report
