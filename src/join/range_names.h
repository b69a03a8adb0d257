// Range paths made comparable across processes for the join's alignment
// (docs/join.md, "Range names that survive processes"): numbers a framework
// assigns per process are replaced, and range instance numbers dropped, in the
// tokens the alignment compares. The stored launch keys are never changed
// (docs/launch-key.md).
#pragma once

#include <regex>
#include <string>
#include <vector>

namespace twinscope::join {

// Environment variable with more patterns, separated by newlines (as many
// `--normalize-range REGEX` options): in each match every digit run becomes "N".
inline constexpr char kNormalizeRangeEnv[] = "TWINSCOPE_NORMALIZE_RANGE";

class RangeNormalizer {
 public:
  // `patterns`: user regular expressions (ECMAScript). A pattern that does not
  // compile is skipped and named in *error ("" if all compiled).
  explicit RangeNormalizer(const std::vector<std::string>& patterns = {}, std::string* error = nullptr);

  // The path with, in each element: XLA's `unique_hlo_op_id=NNN` and
  // `program_id=NNN`, hex pointers `0x...`, `pid=NNN` / `pid:NNN` / `pid NNN`
  // and the serving engines' `prefill|decode|mixed step NNN` numbers replaced by
  // N; the user's patterns applied; each element's instance number `#k`
  // removed (not a `#k` right after a space: that is the name's own, as in
  // `batch #3`).
  std::string Normalize(const std::string& path) const;

 private:
  std::vector<std::regex> user_;
};

// Patterns from kNormalizeRangeEnv (empty if unset).
std::vector<std::string> NormalizePatternsFromEnv();

}  // namespace twinscope::join
