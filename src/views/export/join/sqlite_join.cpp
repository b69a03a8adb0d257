// SQLite database of a joined run (docs/sqlite-schema.md, "Joined runs"):
// the model's launches (both sides), matches, drift, steps and why-slow, the
// primary's kernel records (streamed from the primary trace), the shadow's
// block records (streamed from the shadow trace), each tied to its launch,
// and a serving run's requests and steps.
// One transaction; indexes and views after the rows.
#include "views/export/join/join_export.h"

#ifdef TWINSCOPE_HAVE_SQLITE

#include <cmath>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "join/join_views.h"
#include "launchkey/launch_key.h"
#include "views/export/join/block_detail.h"
#include "views/export/sqlite_db.h"
#include "views/export/sqlite_ranks.h"
#include "views/export/timeline_scan.h"

namespace twinscope::exporters {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE summary (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE strings (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE kernels (id INTEGER PRIMARY KEY, )sql" TWINSCOPE_SQLITE_KERNEL_COLUMNS
                                R"sql(, launch_id INTEGER, top_range TEXT);
CREATE TABLE launches (
  id INTEGER PRIMARY KEY, side TEXT NOT NULL, seq INTEGER, kernel TEXT, demangled TEXT,
  key_path TEXT, key_ordinal INTEGER, key_hash INTEGER,
  grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, block_x INTEGER, block_y INTEGER, block_z INTEGER,
  cpu_ns INTEGER, stream INTEGER, device INTEGER, graph INTEGER,
  start_ns INTEGER, end_ns INTEGER, duration_ns INTEGER, overlapped INTEGER,
  blocks_expected INTEGER, blocks_seen INTEGER, blocks_working INTEGER, sms_used INTEGER,
  blocks_per_sm_min INTEGER, blocks_per_sm_median INTEGER, blocks_per_sm_max INTEGER,
  inversions INTEGER, kendall_tau REAL, straggler_block INTEGER, straggler_sm INTEGER,
  first_enter_ns INTEGER, last_exit_ns INTEGER, span_ns INTEGER, tail_ns INTEGER, block_p50_ns INTEGER,
  match_id INTEGER);
CREATE TABLE matches (
  id INTEGER PRIMARY KEY, shadow_launch INTEGER NOT NULL, primary_launch INTEGER NOT NULL, kind TEXT NOT NULL,
  shape_differs INTEGER NOT NULL, ambiguous INTEGER NOT NULL, top_range TEXT, region INTEGER);
CREATE TABLE divergences (
  id INTEGER PRIMARY KEY, shadow_launches INTEGER, primary_launches INTEGER, diverged INTEGER, other_shape INTEGER,
  inserted INTEGER, deleted INTEGER, other_kernels INTEGER, positions INTEGER,
  first_seq INTEGER, last_seq INTEGER, shadow_from TEXT, shadow_to TEXT,
  first_primary INTEGER, last_primary INTEGER, primary_from TEXT, primary_to TEXT);
CREATE TABLE divergence_reasons (code TEXT, text TEXT, remedy TEXT);
CREATE TABLE instance_pairs (
  id INTEGER PRIMARY KEY, primary_instance INTEGER, shadow_instance INTEGER, primary_name TEXT, shadow_name TEXT,
  primary_launches INTEGER, shadow_launches INTEGER, class TEXT NOT NULL, bounded INTEGER NOT NULL);
CREATE TABLE blocks (
  launch_id INTEGER, launch_seq INTEGER, enter_ns INTEGER, exit_ns INTEGER, duration_ns INTEGER,
  rel_enter_ns INTEGER, rel_exit_ns INTEGER, block_linear INTEGER, block_order INTEGER,
  x INTEGER, y INTEGER, z INTEGER, sm INTEGER);
CREATE TABLE drift (range TEXT, exact INTEGER, time_only INTEGER, unmatched INTEGER, shape_differs INTEGER,
  diverged INTEGER);
CREATE TABLE steps (range TEXT, kernels INTEGER, kernel_ns INTEGER, target_ns INTEGER);
CREATE TABLE why_slow_groups (
  id INTEGER PRIMARY KEY, kernel TEXT, grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
  block_x INTEGER, block_y INTEGER, block_z INTEGER, launches INTEGER, median_duration_ns INTEGER,
  reference_match INTEGER);
CREATE TABLE why_slow (
  group_id INTEGER, match_id INTEGER, duration_ns INTEGER, ratio REAL, verdicts TEXT, text TEXT);
CREATE TABLE requests (
  id INTEGER PRIMARY KEY, request TEXT NOT NULL, status INTEGER, finish_reason TEXT, error TEXT,
  prompt_tokens INTEGER, completion_tokens INTEGER, max_tokens INTEGER,
  queued_us INTEGER, first_token_us INTEGER, done_us INTEGER, prefill_step INTEGER,
  first_step INTEGER, last_step INTEGER, steps INTEGER, prefill_steps INTEGER, decode_steps INTEGER,
  steps_without_kernels INTEGER, kernels INTEGER, kernel_ns INTEGER, kernel_share_ns INTEGER,
  targets INTEGER, target_ns INTEGER, target_launches INTEGER, shadow_exact INTEGER, shadow_time_only INTEGER,
  start_ns INTEGER, end_ns INTEGER, arrival_unix_us INTEGER, arrival_ns INTEGER);
CREATE TABLE served_steps (
  step INTEGER PRIMARY KEY, kind TEXT, batch INTEGER, padded INTEGER, tokens INTEGER, range TEXT,
  kernels INTEGER, kernel_ns INTEGER, targets INTEGER, target_ns INTEGER, start_ns INTEGER, end_ns INTEGER,
  target_launches INTEGER, shadow_exact INTEGER, shadow_time_only INTEGER);
CREATE TABLE request_steps (request_id INTEGER NOT NULL, position INTEGER NOT NULL, step INTEGER NOT NULL);
CREATE TABLE step_launches (step INTEGER NOT NULL, position INTEGER NOT NULL, launch_id INTEGER NOT NULL,
  match_id INTEGER);
)sql" TWINSCOPE_SQLITE_RANK_TABLES;

constexpr const char* kIndexesAndViews = R"sql(
CREATE INDEX kernels_start ON kernels(start_ns);
CREATE INDEX kernels_launch ON kernels(launch_id);
CREATE INDEX kernels_name ON kernels(name_id);
CREATE INDEX launches_seq ON launches(side, seq);
CREATE INDEX launches_key ON launches(key_hash);
CREATE INDEX matches_primary ON matches(primary_launch);
CREATE INDEX matches_shadow ON matches(shadow_launch);
CREATE INDEX blocks_launch ON blocks(launch_id);
CREATE INDEX blocks_sm ON blocks(sm);
CREATE INDEX why_slow_match ON why_slow(match_id);
CREATE INDEX request_steps_request ON request_steps(request_id, position);
CREATE INDEX request_steps_step ON request_steps(step);
CREATE INDEX step_launches_step ON step_launches(step, position);
CREATE VIEW kernels_named AS
  SELECT k.*, COALESCE(d.value, n.value) AS name, n.value AS mangled_name, p.value AS key_path
  FROM kernels k LEFT JOIN strings n ON n.id = k.name_id LEFT JOIN strings d ON d.id = k.demangled_id
  LEFT JOIN strings p ON p.id = k.key_path_id;
CREATE VIEW matched_launches AS
  SELECT m.id AS match_id, m.kind, m.shape_differs, m.ambiguous, m.top_range,
         COALESCE(p.demangled, p.kernel) AS kernel, s.key_path, s.key_ordinal,
         p.id AS primary_launch, p.start_ns, p.end_ns, p.duration_ns, p.stream, p.overlapped,
         s.id AS shadow_launch, s.seq AS shadow_seq, s.blocks_expected, s.blocks_seen, s.blocks_working,
         s.sms_used, s.blocks_per_sm_min, s.blocks_per_sm_median, s.blocks_per_sm_max, s.kendall_tau,
         s.straggler_block, s.straggler_sm, s.span_ns, s.tail_ns,
         CASE WHEN s.span_ns > 0 THEN 1.0 * s.tail_ns / s.span_ns END AS tail_share
  FROM matches m JOIN launches p ON p.id = m.primary_launch JOIN launches s ON s.id = m.shadow_launch;
CREATE VIEW blocks_on_primary AS
  SELECT b.*, m.id AS match_id,
         p.start_ns + CAST((b.enter_ns - s.first_enter_ns) * 1.0 * p.duration_ns / s.span_ns AS INTEGER)
           AS primary_enter_ns,
         p.start_ns + CAST((b.exit_ns - s.first_enter_ns) * 1.0 * p.duration_ns / s.span_ns AS INTEGER)
           AS primary_exit_ns
  FROM blocks b JOIN launches s ON s.id = b.launch_id JOIN matches m ON m.shadow_launch = s.id
  JOIN launches p ON p.id = m.primary_launch
  WHERE s.span_ns > 0 AND p.duration_ns IS NOT NULL AND b.duration_ns IS NOT NULL;
CREATE VIEW request_launches AS
  SELECT r.id AS request_id, r.request, rs.position AS step_position, rs.step, st.kind AS step_kind,
         sl.position AS launch_position, sl.launch_id AS primary_launch, COALESCE(p.demangled, p.kernel) AS kernel,
         p.key_path, p.key_ordinal, p.grid_x, p.grid_y, p.grid_z, p.block_x, p.block_y, p.block_z,
         p.start_ns, p.end_ns, p.duration_ns, p.overlapped, sl.match_id, m.kind AS match_kind,
         s.id AS shadow_launch, s.seq AS shadow_seq, s.blocks_expected, s.blocks_seen, s.blocks_working,
         s.sms_used, s.straggler_block, s.straggler_sm, s.span_ns, s.tail_ns
  FROM requests r JOIN request_steps rs ON rs.request_id = r.id LEFT JOIN served_steps st ON st.step = rs.step
  JOIN step_launches sl ON sl.step = rs.step JOIN launches p ON p.id = sl.launch_id
  LEFT JOIN matches m ON m.id = sl.match_id LEFT JOIN launches s ON s.id = m.shadow_launch;
)sql";

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// The primary's kernel records, each tied to the target launch it is, with the top-level range of its key
// path (TopLevelRange: a '/' inside a range's name does not cut it).
class KernelSink : public RecordSink {
 public:
  KernelSink(Db& db, const join::JoinedModel& m, const std::unordered_map<StringId, std::string>& strings)
      : stmt_(db.Insert("kernels", kKernelColumnCount + 3)), strings_(strings) {
    for (size_t i = 0; i < m.primary.size(); ++i)
      if (m.primary[i].have_kernel) launch_of_.emplace(SpotOf(m.primary[i]), i);
  }
  void OnKernel(const KernelRecord& r) override {
    const bool v = ValidSpan(r.start_ns, r.end_ns, r.flags);
    if (!v) ++invalid;
    auto it = v ? launch_of_.find(SpotOf(r)) : launch_of_.end();
    const std::string* top = TopRange(r.key.path);
    Row row = stmt_.Bind();
    row.I(id_++);
    Row& bound = BindKernel(row, r, v).Opt(it != launch_of_.end(), it != launch_of_.end() ? it->second : 0);
    (top ? bound.Text(*top) : bound.Null()).Insert();
  }
  uint64_t invalid = 0;

 private:
  // The top-level range of path string `id`; nullptr for no path (0) or an id the trace never named.
  const std::string* TopRange(StringId id) {
    if (id == 0) return nullptr;
    auto cached = top_of_.find(id);
    if (cached != top_of_.end()) return &cached->second;
    auto s = strings_.find(id);
    if (s == strings_.end()) return nullptr;
    return &top_of_.emplace(id, std::string(TopLevelRange(s->second))).first->second;
  }

  Statement stmt_;
  uint64_t id_ = 0;
  std::unordered_map<KernelSpot, size_t, KernelSpotHash> launch_of_;  // -> launches.id
  const std::unordered_map<StringId, std::string>& strings_;
  std::unordered_map<StringId, std::string> top_of_;
};

// The shadow launches whose blocks the `blocks` table holds unless every block is asked for
// (docs/sqlite-schema.md, "Bounds"): those the views picture (DetailSeqs), every launch "why slow" names and
// its group's reference, and the first kBlocksPerShape launches of each kernel and shape, in seq order.
constexpr size_t kBlocksPerShape = 100;
constexpr size_t kBlocksDetail = 32;

std::unordered_set<uint64_t> BlockSeqs(const join::JoinedModel& m) {
  std::unordered_set<uint64_t> keep;
  for (uint64_t seq : join::DetailSeqs(m, kBlocksDetail)) keep.insert(seq);
  auto add_match = [&](size_t match) {
    if (match < m.matches.size() && m.matches[match].shadow < m.shadow.size())
      keep.insert(m.shadow[m.matches[match].shadow].seq);
  };
  for (const auto& g : m.groups) {
    add_match(g.reference);
    for (const auto& sl : g.slow) add_match(sl.match);
  }
  std::map<std::tuple<std::string, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>, size_t> per_shape;
  for (const auto& s : m.shadow) {
    size_t& n = per_shape[{s.kernel, s.grid.x, s.grid.y, s.grid.z, s.block.x, s.block.y, s.block.z}];
    if (n++ < kBlocksPerShape) keep.insert(s.seq);
  }
  return keep;
}

// The shadow's block records, each tied to its launch (times also relative
// to the launch's first block entry); within the bound above unless the options ask for all.
class BlockSink : public RecordSink {
 public:
  BlockSink(Db& db, const join::JoinedModel& m) : stmt_(db.Insert("blocks", 13)), all_(m.options.sqlite_all_blocks) {
    const std::unordered_set<uint64_t> keep = all_ ? std::unordered_set<uint64_t>{} : BlockSeqs(m);
    for (size_t j = 0; j < m.shadow.size(); ++j) {
      const bool kept = all_ || keep.count(m.shadow[j].seq);
      launches_.emplace(m.shadow[j].seq, Launch{m.primary.size() + j, m.shadow[j].blocks.first_enter_ns, kept});
      if (kept) ++launches_kept;
    }
    launches_left_out = m.shadow.size() - launches_kept;
  }
  void OnBlock(const BlockRecord& r) override {
    const bool v = ValidSpan(r.enter_ns, r.exit_ns);
    if (!v) ++invalid;
    auto it = launches_.find(r.launch_seq);
    const bool known = it != launches_.end();
    if (known && !it->second.kept) {
      ++left_out;
      return;
    }
    const uint64_t t0 = known ? it->second.first_enter : 0;
    Row row = stmt_.Bind();
    row.Opt(known, known ? it->second.id : 0).I(r.launch_seq).Span(r.enter_ns, r.exit_ns, v);
    row.Opt(v && known && t0, r.enter_ns - t0).Opt(v && known && t0, r.exit_ns - t0);
    BindBlockPlace(row, r).Insert();
    ++blocks;
  }
  // The bound, for `meta` (key blocks_bound) and the warning that says what is left out.
  std::string BoundJson() const {
    return nlohmann::json{{"all", all_},
                          {"per_shape", kBlocksPerShape},
                          {"launches_with_blocks", launches_kept},
                          {"launches_left_out", launches_left_out},
                          {"blocks_written", blocks},
                          {"blocks_left_out", left_out}}
        .dump();
  }
  uint64_t invalid = 0, blocks = 0, left_out = 0, launches_kept = 0, launches_left_out = 0;

 private:
  struct Launch {
    uint64_t id = 0, first_enter = 0;  // launches.id, its first block's entry
    bool kept = false;
  };
  Statement stmt_;
  bool all_ = false;
  std::unordered_map<uint64_t, Launch> launches_;  // by seq
};

// The per-request views of a serving run (join/requests.h): its requests,
// its steps, the steps of each request and the target launches of each step.
// Nothing without a request trace: the tables stay empty.
void WriteRequests(Db& db, const join::JoinedModel& m) {
  const join::RequestTable& t = m.requests;
  if (!t.present) return;
  auto known = [](Row& row, int64_t v) -> Row& { return row.Opt(v >= 0, static_cast<uint64_t>(v)); };  // -1: NULL
  auto text_or_null = [](Row& row, const std::string& v) -> Row& { return v.empty() ? row.Null() : row.Text(v); };
  Statement req = db.Insert("requests", 30);
  Statement req_step = db.Insert("request_steps", 3);
  for (size_t i = 0; i < t.requests.size(); ++i) {
    const join::ServedRequest& r = t.requests[i];
    Row row = req.Bind();
    row.I(i).Text(r.id).I(r.status);
    text_or_null(row, r.finish_reason);
    text_or_null(row, r.error);
    for (int64_t v :
         {r.prompt_tokens, r.completion_tokens, r.max_tokens, r.queued_us, r.first_token_us, r.done_us, r.prefill_step})
      known(row, v);
    const bool any = !r.steps.empty();
    row.Opt(any, any ? r.steps.front() : 0).Opt(any, any ? r.steps.back() : 0).I(r.steps.size());
    row.I(r.prefill_steps).I(r.decode_steps).I(r.steps_without_kernels);
    row.I(r.kernels).I(r.kernel_ns).I(r.kernel_share_ns).I(r.targets).I(r.target_ns).I(r.target_launches);
    row.I(r.shadow_exact).I(r.shadow_time_only);
    row.Opt(r.first_start_ns != 0, r.first_start_ns).Opt(r.last_end_ns != 0, r.last_end_ns);
    known(row, r.arrival_unix_us).Opt(r.arrival_ns != 0, r.arrival_ns).Insert();
    for (size_t k = 0; k < r.steps.size(); ++k) req_step.Bind().I(i).I(k).I(r.steps[k]).Insert();
  }
  Statement step = db.Insert("served_steps", 15);
  Statement step_launch = db.Insert("step_launches", 4);
  for (const join::ServedStep& s : t.steps) {
    Row row = step.Bind();
    row.I(s.index);
    text_or_null(row, s.kind);
    for (int64_t v : {s.batch, s.padded, s.tokens}) known(row, v);
    text_or_null(row, s.range);
    row.I(s.kernels).I(s.kernel_ns).I(s.targets).I(s.target_ns);
    row.Opt(s.first_start_ns != 0, s.first_start_ns).Opt(s.last_end_ns != 0, s.last_end_ns);
    row.I(s.target_launches.size()).I(s.shadow_exact).I(s.shadow_time_only).Insert();
    for (size_t k = 0; k < s.target_launches.size(); ++k) {
      const int64_t match = k < s.target_matches.size() ? s.target_matches[k] : -1;
      Row sl = step_launch.Bind();
      known(sl.I(s.index).I(k).I(s.target_launches[k]), match).Insert();
    }
  }
}

void WriteModel(Db& db, const join::JoinedModel& m) {
  const size_t P = m.primary.size();
  std::vector<int64_t> match_of_primary(P, -1), match_of_shadow(m.shadow.size(), -1);
  for (size_t i = 0; i < m.matches.size(); ++i) {
    match_of_primary[m.matches[i].primary] = static_cast<int64_t>(i);
    match_of_shadow[m.matches[i].shadow] = static_cast<int64_t>(i);
  }
  Statement launch = db.Insert("launches", 39);
  for (size_t i = 0; i < P; ++i) {
    const join::PrimaryLaunch& p = m.primary[i];
    Row row = launch.Bind();
    row.I(i).Text("primary").Null().Text(p.kernel);
    if (p.demangled.empty()) {
      row.Null();
    } else {
      row.Text(p.demangled);
    }
    row.Text(p.path).I(p.ordinal).I(p.hash).Dims(p.grid).Dims(p.block);
    row.Opt(p.cpu_ns != 0, p.cpu_ns).I(p.stream).I(p.device).I(p.graph);
    row.Opt(p.have_kernel, p.start_ns).Opt(p.have_kernel, p.end_ns).Opt(p.have_kernel, p.end_ns - p.start_ns);
    row.I(p.overlapped);
    for (int k = 0; k < 16; ++k) row.Null();
    row.Opt(match_of_primary[i] >= 0, static_cast<uint64_t>(match_of_primary[i])).Insert();
  }
  for (size_t j = 0; j < m.shadow.size(); ++j) {
    const join::ShadowLaunch& s = m.shadow[j];
    const auto& b = s.blocks;
    Row row = launch.Bind();
    row.I(P + j).Text("shadow").I(s.seq).Text(s.kernel).Null();
    row.Text(s.path).I(s.ordinal).I(s.hash).Dims(s.grid).Dims(s.block);
    row.I(s.cpu_ns).I(s.stream).Null().Null();
    row.Null().Null().Null().Null();
    row.I(b.blocks_expected).I(b.blocks_seen).I(s.blocks_working).I(b.sms_used);
    row.I(b.blocks_per_sm_min).I(b.blocks_per_sm_median).I(b.blocks_per_sm_max);
    if (std::isnan(b.kendall_tau)) {
      row.I(b.inversions).Null();
    } else {
      row.I(b.inversions).Real(b.kendall_tau);
    }
    const bool have = b.blocks_seen > b.invalid_times;
    row.Opt(have, b.straggler.block_linear).Opt(have, b.straggler.sm);
    row.Opt(have, b.first_enter_ns).Opt(have, b.last_exit_ns).I(b.span_ns).I(b.tail_ns).I(b.block_duration_p50_ns);
    row.Opt(match_of_shadow[j] >= 0, static_cast<uint64_t>(match_of_shadow[j])).Insert();
  }

  Statement match = db.Insert("matches", 8);
  for (size_t i = 0; i < m.matches.size(); ++i) {
    const join::Match& mt = m.matches[i];
    match.Bind()
        .I(i)
        .I(P + mt.shadow)
        .I(mt.primary)
        .Text(join::MatchKindName(mt.kind))
        .I(mt.shape_differs)
        .I(mt.ambiguous)
        .Text(std::string(TopLevelRange(m.shadow[mt.shadow].path)))
        .Opt(mt.region >= 0, static_cast<uint64_t>(mt.region < 0 ? 0 : mt.region))
        .Insert();
  }
  Statement div = db.Insert("divergences", 17);
  for (size_t i = 0; i < m.divergences.size(); ++i) {
    const join::DivergenceRegion& d = m.divergences[i];
    const bool sh = d.shadow_launches > 0, pr = d.primary_launches > 0;
    div.Bind()
        .I(i)
        .I(d.shadow_launches)
        .I(d.primary_launches)
        .I(d.diverged)
        .I(d.other_shape)
        .I(d.inserted)
        .I(d.deleted)
        .I(d.other_kernels)
        .I(d.positions)
        .Opt(sh, d.first_seq)
        .Opt(sh, d.last_seq)
        .Text(d.shadow_from)
        .Text(d.shadow_to)
        .Opt(pr, d.first_primary)
        .Opt(pr, d.last_primary)
        .Text(d.primary_from)
        .Text(d.primary_to)
        .Insert();
  }
  Statement reason = db.Insert("divergence_reasons", 3);
  for (const auto& r : m.reasons) reason.Bind().Text(r.code).Text(r.text).Text(r.remedy).Insert();
  // Which range instance of the primary the alignment paired with which of the shadow's (docs/join.md).
  Statement inst = db.Insert("instance_pairs", 9);
  for (size_t i = 0; i < m.instances.size(); ++i) {
    const join::InstancePair& r = m.instances[i];
    inst.Bind()
        .I(i)
        .Opt(r.primary >= 0, static_cast<uint64_t>(r.primary < 0 ? 0 : r.primary))
        .Opt(r.shadow >= 0, static_cast<uint64_t>(r.shadow < 0 ? 0 : r.shadow))
        .Text(r.primary_name)
        .Text(r.shadow_name)
        .I(r.primary_launches)
        .I(r.shadow_launches)
        .Text(r.cls)
        .I(r.bounded)
        .Insert();
  }
  Statement drift = db.Insert("drift", 6);
  for (const auto& d : m.drift)
    drift.Bind().Text(d.range).I(d.exact).I(d.time_only).I(d.unmatched).I(d.shape_differs).I(d.diverged).Insert();
  Statement step = db.Insert("steps", 4);
  for (const auto& s : m.steps) step.Bind().Text(s.range).I(s.kernels).I(s.kernel_ns).I(s.target_ns).Insert();
  Statement group = db.Insert("why_slow_groups", 11);
  Statement slow = db.Insert("why_slow", 6);
  for (size_t g = 0; g < m.groups.size(); ++g) {
    const join::ShapeGroup& sg = m.groups[g];
    group.Bind()
        .I(g)
        .Text(sg.kernel)
        .Dims(sg.grid)
        .Dims(sg.block)
        .I(sg.launches)
        .I(sg.median_dur_ns)
        .I(sg.reference)
        .Insert();
    for (const auto& sl : sg.slow) {
      slow.Bind()
          .I(g)
          .I(sl.match)
          .I(sl.dur_ns)
          .Real(sl.ratio)
          .Text(Joined(join::VerdictNames(sl.verdicts)))
          .Text(sl.text)
          .Insert();
    }
  }

  const join::Summary& s = m.summary;
  Statement sum = db.Insert("summary", 2);
  for (const auto& [name, value] :
       std::vector<std::pair<const char*, uint64_t>>{{"shadow_launches", s.shadow_launches},
                                                     {"exact", s.exact},
                                                     {"diverged", s.diverged},
                                                     {"diverged_shape", s.diverged_shape},
                                                     {"divergence_regions", m.divergences.size()},
                                                     {"in_divergence", s.in_divergence},
                                                     {"ambiguous", s.ambiguous},
                                                     {"time_only", s.time_only},
                                                     {"unmatched_shadow", s.unmatched_shadow},
                                                     {"primary_target_launches", s.primary_target_launches},
                                                     {"primary_target_unmatched", s.primary_target_unmatched},
                                                     {"primary_target_without_kernel", s.primary_target_without_kernel},
                                                     {"time_only_evaluated", s.time_only_evaluated},
                                                     {"time_only_agree", s.time_only_agree},
                                                     {"overlapped_primary_kernels", s.overlapped_primary_kernels}}) {
    sum.Bind().Text(name).I(value).Insert();
  }
}

// The two steps of the SQLite view (join_export.h, JoinSqlite).
class JoinSqliteDb : public JoinSqlite {
 public:
  explicit JoinSqliteDb(const join::JoinedRun& run, const std::string& out)
      : run_(run), m_(run.model), db_(out, kSchema), blocks_(db_, m_), shadow_(blocks_) {
    WriteModel(db_, m_);
    WriteRequests(db_, m_);
    KernelSink kernels(db_, m_, run.primary.strings);
    const Status replayed = run.primary.Replay(kernels);
    if (!replayed.ok()) replay_error_ = "the kernels table is empty: " + replayed.message();
    kernels_invalid_ = kernels.invalid;
  }
  RecordSink& ShadowSink() override { return shadow_; }

  StatusOr<ExportResult> Finish(const join::ShadowDetail& shadow) override {
    if (!shadow_.error.empty()) return Status::Error(shadow_.error);
    ExportResult result;
    try {
      const join::JoinedModel& m = m_;
      const ReadReport& prep = run_.primary.report;
      const ReadReport& srep = shadow.report;
      result.report = prep;
      result.records = prep.records + srep.records;
      Statement str = db_.Insert("strings", 2);
      for (const auto& [id, value] : run_.primary.strings) str.Bind().I(id).Text(value).Insert();
      Statement meta = db_.Insert("meta", 2);
      auto put = [&](const char* key, const std::string& value) { meta.Bind().Text(key).Text(value).Insert(); };
      put("format", "twinscope-join-sqlite");
      put("version", "1");
      put("primary", m.primary_path);
      put("shadow", m.shadow_path);
      put("primary_header", MetaJson(run_.primary.header));
      put("shadow_header", MetaJson(shadow.header));
      put("primary_read_end", ReadEndName(prep.end));
      put("shadow_read_end", ReadEndName(srep.end));
      put("concurrent", m.options.concurrent ? "1" : "0");
      put("primary_t0_ns", std::to_string(m.primary_t0_ns));
      put("target_kernels", MetaJson(m.summary.target_kernels));
      put("warnings", MetaJson(m.warnings));
      if (m.requests.present) {
        const join::RequestTable& t = m.requests;
        put("requests", MetaJson({{"trace", t.trace_path},
                                  {"schedule", t.schedule_path},
                                  {"lines", t.lines},
                                  {"bad_lines", t.bad_lines},
                                  {"first_bad", t.first_bad},
                                  {"requests_left_out", t.requests_left_out},
                                  {"schedule_steps", t.schedule_steps},
                                  {"schedule_bad_lines", t.schedule_bad_lines},
                                  {"steps_without_kernels", t.steps_without_kernels},
                                  {"primary_steps_without_request", t.primary_steps_without_request},
                                  {"warnings", t.warnings}}));
      }
      put("block_times",
          "blocks.enter_ns/exit_ns are the shadow's GPU clock, stretched by instrumentation; blocks_on_primary scales "
          "them onto the primary kernel's interval");
      put("blocks_bound", blocks_.BoundJson());
      db_.Commit(kIndexesAndViews);
      result.written = db_.rows();
      if (kernels_invalid_)
        result.warnings.push_back(
            std::to_string(kernels_invalid_) +
            " primary kernels have invalid timestamps (invalid_timestamp = 1 / duration_ns NULL)");
      if (blocks_.invalid)
        result.warnings.push_back(std::to_string(blocks_.invalid) +
                                  " shadow blocks have invalid times (duration_ns NULL)");
      if (blocks_.left_out)
        result.warnings.push_back("join.sqlite: the blocks of " + std::to_string(blocks_.launches_left_out) + " of " +
                                  std::to_string(m.shadow.size()) + " shadow launches left out (" +
                                  std::to_string(blocks_.left_out) +
                                  " block records; their summaries are in `launches`, the bound in meta.blocks_bound): "
                                  "--sqlite-blocks all writes every block");
      if (!replay_error_.empty()) result.warnings.push_back(replay_error_);
      AddReadWarnings(prep, &result.warnings);
      std::vector<std::string> shadow_warnings;
      AddReadWarnings(srep, &shadow_warnings);
      for (const auto& w : shadow_warnings) result.warnings.push_back("shadow: " + w);
    } catch (const std::exception& e) {
      return Status::Error(e.what());
    }
    return result;
  }

 private:
  const join::JoinedRun& run_;
  const join::JoinedModel& m_;
  // The blocks table in the detail pass of another reader: its first error is kept for Finish, not thrown there.
  struct CatchingSink : RecordSink {
    explicit CatchingSink(BlockSink& b) : blocks(b) {}
    void OnBlock(const BlockRecord& r) override {
      if (!error.empty()) return;
      try {
        blocks.OnBlock(r);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    BlockSink& blocks;
    std::string error;
  };
  Db db_;
  BlockSink blocks_;
  CatchingSink shadow_;
  uint64_t kernels_invalid_ = 0;
  std::string replay_error_;  // the primary could not be read again (a primary over the join's bound)
};

}  // namespace

StatusOr<std::unique_ptr<JoinSqlite>> JoinSqlite::Start(const join::JoinedRun& run, const std::string& out) {
  try {
    return std::unique_ptr<JoinSqlite>(new JoinSqliteDb(run, out));
  } catch (const std::exception& e) {
    return Status::Error(e.what());
  }
}

StatusOr<ExportResult> ExportJoinSqlite(join::JoinedRun* run, const std::string& out,
                                        const std::vector<uint64_t>& seqs) {
  auto db = JoinSqlite::Start(*run, out);
  if (!db.ok()) return db.status();
  join::ShadowDetail read = join::ReadDetail(run, seqs, &(*db)->ShadowSink());
  if (!run->detail_error.empty()) return Status::Error("shadow: " + run->detail_error);
  return (*db)->Finish(read);
}

}  // namespace twinscope::exporters

#else  // !TWINSCOPE_HAVE_SQLITE

namespace twinscope::exporters {

StatusOr<std::unique_ptr<JoinSqlite>> JoinSqlite::Start(const join::JoinedRun&, const std::string&) {
  return SqliteMissing("");
}

StatusOr<ExportResult> ExportJoinSqlite(join::JoinedRun*, const std::string&, const std::vector<uint64_t>&) {
  return SqliteMissing("");
}

}  // namespace twinscope::exporters

#endif
