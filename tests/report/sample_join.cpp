// Synthetic joined models for the report (sample_join.h). Blocks come from a greedy scheduler: each
// block in dispatch order takes the SM slot that frees first; the slow kinds bend that picture the
// way docs/join.md's verdicts describe (one long block, half the SMs, shuffled dispatch, most blocks
// returning at once).
#include "sample_join.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "stats/block_stats.h"

namespace twinscope::testing_report {
namespace {

using nlohmann::json;

struct Block {
  int64_t block, sm, enter, exit, order;
};

struct Picture {
  std::vector<Block> blocks;
  json shadow;  // the launch's "shadow" object, computed from the blocks
};

int64_t Median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + (v.size() - 1) / 2, v.end());
  return v[(v.size() - 1) / 2];
}

// The launch's shadow summary; a working block ran at least a quarter of the reference's block time.
json ShadowOf(const std::vector<Block>& blocks, uint32_t grid, uint64_t seq, int64_t ref_block_ns) {
  size_t n = blocks.size();
  std::vector<int64_t> exits, durs;
  std::vector<uint64_t> order_by_block(grid, 0);
  std::map<int64_t, int64_t> per_sm;
  int64_t last_exit = 0;
  const Block* strag = nullptr;
  for (const Block& b : blocks) {
    exits.push_back(b.exit);
    durs.push_back(b.exit - b.enter);
    order_by_block[b.block] = static_cast<uint64_t>(b.order);
    ++per_sm[b.sm];
    if (!strag || b.exit > strag->exit) strag = &b;
    last_exit = std::max(last_exit, b.exit);
  }
  int64_t p50 = Median(durs), working = 0;
  for (int64_t d : durs) working += d * 4 >= ref_block_ns ? 1 : 0;
  std::vector<int64_t> counts;
  for (auto& [sm, c] : per_sm) counts.push_back(c);
  std::sort(counts.begin(), counts.end());
  stats::RankCorrelation order = stats::CorrelateWithPosition(std::move(order_by_block));
  return {{"seq", seq},
          {"grid", {grid, 1, 1}},
          {"blocks_expected", grid},
          {"blocks_seen", n},
          {"blocks_working", working},
          {"sms_used", per_sm.size()},
          {"blocks_per_sm", {counts.front(), counts[(counts.size() - 1) / 2], counts.back()}},
          {"inversions", order.discordant},
          {"kendall_tau", order.kendall_tau},
          {"straggler", {{"block", strag->block}, {"sm", strag->sm}, {"exit_ns", strag->exit}}},
          {"tail_ns", last_exit - Median(exits)},
          {"span_ns", last_exit},
          {"block_p50_ns", p50}};
}

Picture Simulate(const std::string& kind, uint32_t grid, uint32_t sms, uint32_t slots, int64_t base_ns, uint64_t seq,
                 std::mt19937_64& rng) {
  std::uniform_real_distribution<double> jitter(0.85, 1.15);
  std::vector<int64_t> dispatch(grid);
  for (uint32_t i = 0; i < grid; ++i) dispatch[i] = i;
  if (kind == "reordered") {
    // Chunks of 32 blocks dispatched in shuffled order.
    std::vector<std::vector<int64_t>> chunks;
    for (uint32_t i = 0; i < grid; i += 32)
      chunks.emplace_back(dispatch.begin() + i, dispatch.begin() + std::min<uint32_t>(grid, i + 32));
    std::shuffle(chunks.begin(), chunks.end(), rng);
    dispatch.clear();
    for (auto& c : chunks) dispatch.insert(dispatch.end(), c.begin(), c.end());
  }
  uint32_t used = kind == "fewer_sms" ? std::max(1u, sms / 2) : sms;
  using Slot = std::pair<int64_t, int64_t>;  // free at, sm
  std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> free;
  for (uint32_t s = 0; s < slots; ++s)
    for (uint32_t sm = 0; sm < used; ++sm) free.push({static_cast<int64_t>(s * 40 + sm * 3), sm});
  int64_t straggler_block = static_cast<int64_t>(grid) * 7 / 10;
  std::vector<Block> blocks;
  blocks.reserve(grid);
  for (int64_t b : dispatch) {
    auto [at, sm] = free.top();
    free.pop();
    double d = base_ns * jitter(rng);
    if (kind == "fewer_blocks" && b % 10 < 7) d = base_ns * 0.04;  // padding blocks return at once
    if (kind == "straggler" && b == straggler_block) d = base_ns * (grid / double(used * slots)) * 1.6 + base_ns * 6;
    int64_t enter = at + 20 + static_cast<int64_t>(rng() % 30);
    int64_t exit = enter + static_cast<int64_t>(d);
    blocks.push_back({b, sm, enter, exit, 0});
    free.push({exit, sm});
  }
  // Times relative to the first entry; order = rank by entry.
  int64_t t0 = blocks.front().enter;
  for (const Block& b : blocks) t0 = std::min(t0, b.enter);
  std::vector<size_t> idx(blocks.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return blocks[a].enter != blocks[b].enter ? blocks[a].enter < blocks[b].enter : blocks[a].block < blocks[b].block;
  });
  for (size_t r = 0; r < idx.size(); ++r) blocks[idx[r]].order = static_cast<int64_t>(r);
  for (Block& b : blocks) {
    b.enter -= t0;
    b.exit -= t0;
  }
  Picture p;
  p.shadow = ShadowOf(blocks, grid, seq, base_ns);
  p.blocks = std::move(blocks);
  return p;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string Sentence(const std::string& kind, const json& slow, const json& ref) {
  char buf[400];
  const json& s = slow;
  if (kind == "straggler") {
    std::snprintf(buf, sizeof buf,
                  "Block %lld on SM %lld held the launch up: the tail is %.0f%% of the span (reference: %.0f%%).",
                  static_cast<long long>(s["straggler"]["block"].get<int64_t>()),
                  static_cast<long long>(s["straggler"]["sm"].get<int64_t>()),
                  100.0 * s["tail_ns"].get<double>() / s["span_ns"].get<double>(),
                  100.0 * ref["tail_ns"].get<double>() / ref["span_ns"].get<double>());
  } else if (kind == "fewer_sms") {
    std::snprintf(buf, sizeof buf, "The blocks ran on %lld SMs against the reference's %lld.",
                  static_cast<long long>(s["sms_used"].get<int64_t>()),
                  static_cast<long long>(ref["sms_used"].get<int64_t>()));
  } else if (kind == "reordered") {
    std::snprintf(buf, sizeof buf, "Blocks arrived in another order: Kendall tau %.2f against the reference's %.2f.",
                  s["kendall_tau"].get<double>(), ref["kendall_tau"].get<double>());
  } else if (kind == "fewer_blocks") {
    std::snprintf(buf, sizeof buf, "Fewer blocks did the work: %lld working blocks against the reference's %lld.",
                  static_cast<long long>(s["blocks_working"].get<int64_t>()),
                  static_cast<long long>(ref["blocks_working"].get<int64_t>()));
  } else {
    std::snprintf(buf, sizeof buf,
                  "The block structure matches the reference: the time went elsewhere (contention, clocks, memory).");
  }
  return buf;
}

}  // namespace

json MakeSampleJoin(const SampleJoinOptions& o) {
  std::mt19937_64 rng(o.seed);
  const std::string k1 =
      "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>("
      "__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, __nv_bfloat16*, long const*, long, long, long, "
      "long, int, int, int, float const*, float const*)";
  const std::string k2 = o.hostile_names ? std::string(kHostileKernel) : "void small_kernel<int>(int*)";
  const size_t groups = (o.detail_launches + 5) / 6;
  const size_t n = std::max(o.launches, o.detail_launches);
  const int64_t base_ns = 4000;  // one block's time in the shadow's clock

  // Shapes: one per detail group (kernel 1), and one small shape of kernel 2.
  struct Shape {
    std::string kernel;
    uint32_t grid, block;
    int64_t median_ns;
  };
  std::vector<Shape> shapes;
  for (size_t g = 0; g < std::max<size_t>(groups, 1); ++g) {
    uint32_t threads = 128 + 32 * static_cast<uint32_t>(g % 12);
    uint32_t waves = (o.blocks + o.sms * o.slots_per_sm - 1) / (o.sms * o.slots_per_sm);
    shapes.push_back({k1, o.blocks, threads, static_cast<int64_t>(waves) * 1200 + 3000 + int64_t(g) * 500});
  }
  shapes.push_back({k2, 64, 128, 2500});

  // Launch kinds: the first detail_launches are the detailed ones (reference, then the slow kinds).
  std::vector<int> shape_of(n);
  std::vector<std::string> kind_of(n, "normal");
  std::vector<double> factor(n, 1.0);
  std::uniform_real_distribution<double> spread(0.9, 1.1);
  for (size_t i = 0; i < n; ++i) {
    if (i < o.detail_launches) {
      shape_of[i] = static_cast<int>(i / 6);
      size_t r = i % 6;
      kind_of[i] = r == 0 ? "reference" : kSlowKinds[r - 1];
      static const double kFactor[] = {1.0, 2.6, 1.9, 1.35, 1.6, 1.2};
      factor[i] = kFactor[r];
    } else {
      shape_of[i] = static_cast<int>(i % 5 == 4 ? shapes.size() - 1 : i % std::max<size_t>(groups, 1));
      factor[i] = spread(rng);
    }
  }
  // Detailed launches get scattered ids (time order), so the table's order differs from the id order.
  std::vector<size_t> id_of(n);
  for (size_t i = 0; i < n; ++i) id_of[i] = i;
  std::shuffle(id_of.begin(), id_of.end(), rng);

  std::vector<json> launches(n);
  std::vector<Picture> pictures(o.detail_launches);
  int64_t time_only = 0, overlapped = 0;
  for (size_t i = 0; i < n; ++i) {
    const Shape& sh = shapes[shape_of[i]];
    size_t id = id_of[i];
    int64_t dur = static_cast<int64_t>(sh.median_ns * factor[i]);
    bool time_match = kind_of[i] == "normal" && i % 97 == 13;
    bool differs = kind_of[i] == "normal" && i % 113 == 17;
    bool over = o.concurrent && i % 7 == 3;
    time_only += time_match;
    overlapped += over;
    size_t step = id * o.steps / n;
    std::string range = "step#" + std::to_string(step);
    if (o.hostile_names && step == 3) range = "step#3 </script><b>bold</b>";
    json shadow;
    if (i < o.detail_launches) {
      pictures[i] = Simulate(kind_of[i], sh.grid, o.sms, o.slots_per_sm, base_ns, id, rng);
      shadow = pictures[i].shadow;
    } else {
      uint32_t g = sh.grid;
      int64_t span = static_cast<int64_t>(((g + o.sms * o.slots_per_sm - 1) / (o.sms * o.slots_per_sm)) * base_ns *
                                          1.1 * factor[i]);
      shadow = {{"seq", id},
                {"grid", {g, 1, 1}},
                {"blocks_expected", g},
                {"blocks_seen", g},
                {"blocks_working", g},
                {"sms_used", std::min(g, o.sms)},
                {"blocks_per_sm", {g / o.sms, g / o.sms, (g + o.sms - 1) / o.sms}},
                {"inversions", static_cast<int64_t>(rng() % 400)},
                {"kendall_tau", 0.99},
                {"straggler", {{"block", g - 1 - rng() % 8}, {"sm", rng() % o.sms}, {"exit_ns", span}}},
                {"tail_ns", span / 12},
                {"span_ns", span},
                {"block_p50_ns", base_ns}};
    }
    launches[id] = {{"id", id},
                    {"kernel", sh.kernel},
                    {"match", time_match ? "time" : "exact"},
                    {"key", {{"path", range + "/decode"}, {"ordinal", i % 3}, {"hash", Hex(rng())}}},
                    {"shape_differs", differs},
                    {"ambiguous", false},
                    {"region", nullptr},
                    {"primary",
                     {{"start_ns", 0},
                      {"end_ns", dur},
                      {"dur_ns", dur},
                      {"stream", 7 + i % 2},
                      {"device", 0},
                      {"grid", {sh.grid, 1, 1}},
                      {"block", {sh.block, 1, 1}},
                      {"graph", i % 3 == 0},
                      {"have_kernel", true},
                      {"overlapped", over}}},
                    {"shadow", shadow}};
  }
  // Primary start times in id (time) order.
  int64_t t = 0;
  for (auto& l : launches) {
    t += 20000 + static_cast<int64_t>(rng() % 5000);
    int64_t dur = l["primary"]["dur_ns"];
    l["primary"]["start_ns"] = t;
    l["primary"]["end_ns"] = t + dur;
    t += dur;
  }

  // Why slow: one group per detail shape; the kernel-2 shape has no slow launches.
  json why = json::array();
  for (size_t g = 0; g < groups; ++g) {
    const Shape& sh = shapes[g];
    size_t count = 0;
    for (size_t i = 0; i < n; ++i) count += shape_of[i] == static_cast<int>(g);
    size_t ref = g * 6;
    json slow = json::array();
    for (size_t i = ref + 1; i < std::min(ref + 6, o.detail_launches); ++i) {
      const json& l = launches[id_of[i]];
      std::string kind = kind_of[i];
      slow.push_back({{"launch", id_of[i]},
                      {"dur_ns", l["primary"]["dur_ns"]},
                      {"ratio", factor[i]},
                      {"verdicts", {kind}},
                      {"text", Sentence(kind, l["shadow"], launches[id_of[ref]]["shadow"])}});
    }
    std::sort(slow.begin(), slow.end(),
              [](const json& a, const json& b) { return a["dur_ns"].get<int64_t>() > b["dur_ns"].get<int64_t>(); });
    why.push_back({{"kernel", sh.kernel},
                   {"grid", {sh.grid, 1, 1}},
                   {"block", {sh.block, 1, 1}},
                   {"launches", count},
                   {"median_dur_ns", sh.median_ns},
                   {"reference", id_of[ref]},
                   {"mad_ns", sh.median_ns / 20},
                   {"note", ""},
                   {"slow", slow}});
  }

  // Block detail: references and slow launches, group by group.
  json detail = json::array();
  for (size_t i = 0; i < o.detail_launches; ++i) {
    json rows = json::array();
    for (const Block& b : pictures[i].blocks) rows.push_back({b.block, b.sm, b.enter, b.exit, b.order});
    detail.push_back({{"launch", id_of[i]}, {"blocks", std::move(rows)}});
  }

  // Steps and drift, per top-level range.
  json steps = json::array(), drift = json::array();
  std::vector<int64_t> exact_in(o.steps, 0), time_in(o.steps, 0), differs_in(o.steps, 0), target_ns(o.steps, 0),
      kernels_in(o.steps, 0), targets_in(o.steps, 0);
  for (const auto& l : launches) {
    size_t step = l["id"].get<size_t>() * o.steps / n;
    (l["match"] == "time" ? time_in : exact_in)[step]++;
    differs_in[step] += l["shape_differs"].get<bool>();
    target_ns[step] += l["primary"]["dur_ns"].get<int64_t>();
    targets_in[step]++;
  }
  int64_t unmatched = 0;
  for (size_t s = 0; s < o.steps; ++s) {
    std::string range = "step#" + std::to_string(s);
    if (o.hostile_names && s == 3) range = "step#3 </script><b>bold</b>";
    int64_t um = s % 23 == 11 ? 1 : 0;
    unmatched += um;
    kernels_in[s] = 180 + static_cast<int64_t>(rng() % 40);
    int64_t other = target_ns[s] * 2 + 20000 + static_cast<int64_t>(rng() % 15000) + (s % 10 == 9 ? 30000 : 0);
    steps.push_back({{"range", range},
                     {"kernels", kernels_in[s]},
                     {"kernel_ns", other + target_ns[s]},
                     {"targets", targets_in[s]},
                     {"target_ns", target_ns[s]}});
    drift.push_back({{"range", range},
                     {"exact", exact_in[s]},
                     {"diverged", 0},
                     {"time_only", time_in[s]},
                     {"unmatched", um},
                     {"shape_differs", differs_in[s]}});
  }

  int64_t exact = static_cast<int64_t>(n) - time_only;
  json loss_primary = {{"have_counters", true},
                       {"launches_seen", 48210},
                       {"kernel_records", 48210},
                       {"kernel_records_in_file", 48210},
                       {"missing", 0},
                       {"invalid_timestamps", 2},
                       {"copy_invalid_timestamps", 0},
                       {"invalid_timestamps_in_file", 2},
                       {"cupti_dropped", 0},
                       {"writer_dropped", 0},
                       {"key_fallbacks", 0},
                       {"no_launch_key", 0}};
  // The findings stats takes from the counter table (stats::LossFindings): the two invalid timestamps.
  loss_primary["findings"] = json::array({{{"name", "kernel_records_invalid_timestamp"},
                                           {"value", 2},
                                           {"severity", "data_loss"},
                                           {"text",
                                            "2 kernel records with invalid timestamps "
                                            "(kernel_records_invalid_timestamp)"}}});
  json loss_shadow = loss_primary;
  loss_shadow["findings"] = json::array();
  loss_shadow["invalid_timestamps"] = 0;
  loss_shadow["invalid_timestamps_in_file"] = 0;
  loss_shadow["kernel_records"] = 0;
  loss_shadow["kernel_records_in_file"] = 0;
  json names = json::array({k1});
  if (o.hostile_names) names.push_back(k2);
  return {
      {"format", "twinscope-join"},
      {"version", 1},
      {"primary",
       {{"path", "run/primary.tsc"},
        {"pid", 41211},
        {"command_line", o.hostile_names ? json::array({"python3", "serve.py", "--prompt", "<b>hi</b> & bye"})
                                         : json::array({"python3", "serve.py"})},
        {"read", {{"end", "complete"}, {"ok", true}, {"message", ""}}},
        {"kernels", 48210},
        {"launches", 48210},
        {"loss", loss_primary}}},
      {"shadow",
       {{"path", "run/shadow.tsc"},
        {"pid", 41240},
        {"read", {{"end", "complete"}, {"ok", true}, {"message", ""}}},
        {"launches_traced", n + unmatched},
        {"blocks", static_cast<uint64_t>(n) * o.blocks},
        {"patterns", {"reshape_and_cache"}},
        {"sampling", {{"every", 2}, {"max_launches", 0}}},
        {"probe_counters",
         {{"launches_seen", 2 * n},
          {"launches_matching", 2 * n},
          {"launches_traced", n + unmatched},
          {"launches_skipped_by_sampling", n},
          {"blocks_expected", static_cast<uint64_t>(n) * o.blocks},
          {"blocks_recorded", static_cast<uint64_t>(n) * o.blocks},
          {"blocks_overflow", 0},
          {"writer_dropped_records", 0}}},
        {"loss", loss_shadow}}},
      {"options", {{"concurrent", o.concurrent}}},
      {"summary",
       {{"shadow_launches", static_cast<int64_t>(n) + unmatched},
        {"exact", exact},
        {"diverged", 0},
        {"diverged_shape", 0},
        {"time_only", time_only},
        {"unmatched_shadow", unmatched},
        {"primary_target_launches", 2 * static_cast<int64_t>(n)},
        {"primary_target_unmatched", std::max<int64_t>(0, static_cast<int64_t>(n) - unmatched)},
        {"time_only_accuracy", {{"evaluated", exact}, {"agree", exact - exact / 40}}},
        {"overlapped_primary_kernels", overlapped},
        {"primary_target_without_kernel", 0},
        {"shadow_without_blocks", 0},
        {"divergence_regions", 0},
        {"in_divergence", 0},
        {"primary_in_divergence", 0},
        {"ambiguous", 0},
        {"ambiguous_regions", 0},
        {"alignment",
         {{"identical", true},
          {"anchors", 0},
          {"segments", 0},
          {"capped_segments", 0},
          {"capped_launches", 0},
          {"max_d", 0},
          {"shadow_sampled", true}}},
        {"target_kernels", names}}},
      {"divergences", json::array()},
      {"reasons", json::array()},
      {"warnings", json::array()},
      {"drift", drift},
      {"drift_total", drift.size()},
      {"steps", steps},
      {"steps_total", steps.size()},
      {"launches", launches},
      {"launches_total", o.launches_total ? o.launches_total : n},
      {"why_slow", why},
      {"block_detail", detail},
  };
}

}  // namespace twinscope::testing_report
