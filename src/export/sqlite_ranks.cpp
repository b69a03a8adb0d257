// The rank comparison's SQLite tables (export/sqlite_ranks.h, docs/sqlite-schema.md "Ranks").
#include "export/sqlite_ranks.h"

#include "export/export.h"

#ifdef TWINSCOPE_HAVE_SQLITE

#include <stdexcept>

#include "export/sqlite_db.h"

namespace twinscope::exporters {

void WriteRankTables(Db& db, const procs::RankComparison& c, const std::vector<RankOwner>& owners,
                     const std::string& source) {
  const size_t n = c.ranks.size();
  auto at = [](const std::vector<uint64_t>& v, size_t i) { return i < v.size() ? v[i] : 0; };
  auto present = [&](const procs::RankStepRow& s, size_t r) {
    return at(s.kernels, r) > 0 || at(s.kernel_ns, r) > 0 || at(s.span_ns, r) > 0;
  };
  Statement rank = db.Insert("ranks", 8);
  for (size_t r = 0; r < n; ++r) {
    uint64_t steps = 0;
    for (const auto& s : c.steps) steps += present(s, r);
    const RankOwner o = r < owners.size() ? owners[r] : RankOwner{};
    Row row = rank.Bind();
    row.I(static_cast<uint64_t>(c.ranks[r])).Opt(o.pid != 0, static_cast<uint64_t>(o.pid));
    row.Opt(o.process_id != 0, o.process_id);
    if (o.pair.empty())
      row.Null();
    else
      row.Text(o.pair);
    row.I(steps).I(at(c.slowest_in, r)).I(at(c.stands_out_in, r)).I(at(c.waited_in, r)).Insert();
  }
  Statement step = db.Insert("rank_step", 11);
  Statement finding = db.Insert("rank_finding", 5);
  for (size_t si = 0; si < c.steps.size(); ++si) {
    const procs::RankStepRow& s = c.steps[si];
    for (size_t r = 0; r < n; ++r) {
      if (!present(s, r)) continue;
      const bool slowest = r == s.slowest;
      Row row = step.Bind();
      row.I(si).Text(s.range).I(static_cast<uint64_t>(c.ranks[r])).I(at(s.kernels, r)).I(at(s.kernel_ns, r));
      row.I(at(s.span_ns, r)).I(slowest).I(slowest && s.stands_out);
      if (slowest)
        row.Real(s.ratio);
      else
        row.Null();
      row.I(r == s.span_slowest).I(s.waited && r == s.span_slowest).Insert();
    }
    if (s.stands_out && s.slowest < n)
      finding.Bind()
          .I(si)
          .Text(s.range)
          .I(static_cast<uint64_t>(c.ranks[s.slowest]))
          .Real(s.ratio)
          .Text(s.text)
          .Insert();
  }
  Statement meta = db.Insert("meta", 2);
  meta.Bind()
      .Text("ranks")
      .Text(MetaJson({{"source", source},
                      {"ranks", c.ranks},
                      {"steps", c.steps.size()},
                      {"steps_standing_out", c.steps_standing_out},
                      {"min_ratio", c.min_ratio}}))
      .Insert();
}

Status AddRankTables(const std::string& path, const procs::RankComparison& c, const std::vector<RankOwner>& owners,
                     const std::string& source) {
  try {
    Db db(path, Db::kExisting, TWINSCOPE_SQLITE_RANK_TABLES);
    WriteRankTables(db, c, owners, source);
    db.Commit("");
  } catch (const std::exception& e) {
    return Status::Error(path + ": the rank tables: " + e.what());
  }
  return Status::Ok();
}

}  // namespace twinscope::exporters

#else  // !TWINSCOPE_HAVE_SQLITE

namespace twinscope::exporters {

void WriteRankTables(Db&, const procs::RankComparison&, const std::vector<RankOwner>&, const std::string&) {}

Status AddRankTables(const std::string&, const procs::RankComparison&, const std::vector<RankOwner>&,
                     const std::string&) {
  return SqliteMissing("");
}

}  // namespace twinscope::exporters

#endif
