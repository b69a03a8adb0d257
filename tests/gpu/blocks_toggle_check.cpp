// Checks a shadow trace of blocks_toggle_workload (scripts/gpu_blocks_toggle.sh),
// taken in toggle mode with TWINSCOPE_EVERY=N: every traced launch has exactly
// grid-size complete blocks; the traced launches are exactly the matching
// launches 0, N, 2N, ... (catch-ups flagged and counted); no block record
// without its traced launch; no loss counter set. Then what the graph replays
// say about patching and graphs: were the replays at multiples of N traced
// completely for the exec instantiated while the module was unpatched (U)
// and the one instantiated while it was patched (P), and did P's other
// replays run at native speed (patch state of the graph launch) or slowly
// (patch state of its instantiation)? Prints one JSON object; exit 0 if
// every check passed.
//   blocks_toggle_check <shadow.tsc> <expect.json>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "block_check.h"
#include "twinscope/counters.h"
#include "twinscope/trace_reader.h"

using namespace twinscope;

namespace {

using Sink = blocks_gpu::BlockSink;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: blocks_toggle_check <shadow.tsc> <expect.json>\n");
    return 2;
  }
  std::ifstream ef(argv[2]);
  nlohmann::json expect = nlohmann::json::parse(ef, nullptr, false);
  if (expect.is_discarded()) {
    std::fprintf(stderr, "blocks_toggle_check: cannot read %s\n", argv[2]);
    return 2;
  }
  std::string error;
  auto reader = TraceReader::Open(argv[1], &error);
  if (!reader) {
    std::fprintf(stderr, "blocks_toggle_check: %s\n", error.c_str());
    return 2;
  }
  Sink s;
  ReadReport rep = reader->Read(s);
  std::vector<std::string> failures;
  if (!rep.ok()) failures.push_back("trace read: " + rep.message);
  const nlohmann::json& status = reader->last_status();
  const nlohmann::json counters = status.value("counters", nlohmann::json::object());
  auto counter = [&](const char* n) { return counters.value(n, uint64_t{0}); };
  const uint32_t every = expect["every"], sms = expect["sms"];
  const uint64_t matching = expect["matching"];

  if (reader->header().value("sampling", nlohmann::json::object()).value("patch", "") != "toggle")
    failures.push_back("the trace was not taken in toggle mode");
  if (counter(counters::kLaunchesMatching) != matching)
    failures.push_back("launches_matching = " + std::to_string(counter(counters::kLaunchesMatching)) +
                       ", the workload made " + std::to_string(matching) + " (do captured launches reach the probe?)");

  // Per traced launch: complete, and at the expected place.
  std::set<uint64_t> traced_index;
  std::set<uint64_t> seqs;
  size_t bad = 0, catch_ups = 0, off_schedule = 0;
  uint64_t blocks_checked = 0;
  for (const LaunchRecord& l : s.launches) {
    seqs.insert(l.seq);
    traced_index.insert(l.sample_index);
    const auto& b = s.blocks[l.seq];
    blocks_checked += b.size();
    if (!blocks_gpu::CompleteBlocks(l, b, sms) && ++bad <= 5)
      failures.push_back("traced launch " + std::to_string(l.sample_index) +
                         (l.flags & kFlagGraph ? " (graph node)" : "") + ": " + std::to_string(b.size()) +
                         " block records for " + std::to_string(uint64_t{l.grid.x} * l.grid.y * l.grid.z) + " blocks");
    if (l.flags & kFlagSampleCatchUp) ++catch_ups;
    if (l.sample_index % every != 0 && !(l.flags & kFlagSampleCatchUp)) ++off_schedule;
  }
  size_t orphan = 0;
  for (const auto& [seq, b] : s.blocks)
    if (!seqs.count(seq)) orphan += b.size();
  if (orphan) failures.push_back(std::to_string(orphan) + " block records of launches that were not traced");
  if (off_schedule)
    failures.push_back(std::to_string(off_schedule) + " traced launches neither at a multiple of N nor catch-ups");
  // Every multiple of N in the eager and two-stream phases is traced (no misses there).
  size_t missed_eager = 0;
  for (const char* phase : {"eager", "streams"})
    for (uint64_t i = expect[phase][0]; i <= expect[phase][1].get<uint64_t>(); ++i)
      if (i % every == 0 && !traced_index.count(i)) ++missed_eager;
  if (missed_eager)
    failures.push_back(std::to_string(missed_eager) + " multiples of N not traced in the eager/two-stream phases");
  for (const char* c :
       {counters::kBlocksOverflow, counters::kBlocksMissing, counters::kBlocksIncomplete, counters::kBlocksLost,
        counters::kLaunchesNoBuffer, counters::kSanitizerErrors, counters::kLaunchesSelectedUnpatched,
        counters::kWriterDropped, counters::kModulesPatchFailed, counters::kModulesPinnedUnpatched})
    if (counter(c) != 0) failures.push_back(std::string(c) + " = " + std::to_string(counter(c)));
  if (status.value("tool_state", std::string()) != "ok")
    failures.push_back("tool_state = " + status.value("tool_state", std::string("?")));

  // Graphs: replays at multiples of N traced and complete, per exec; the others' times.
  nlohmann::json graphs;
  std::map<char, std::vector<double>> native_us, sampled_us;
  std::map<char, int> sampled_ok, sampled_n;
  std::map<uint64_t, const LaunchRecord*> by_index;
  for (const LaunchRecord& l : s.launches) by_index[l.sample_index] = &l;
  for (const auto& r : expect["replays"]) {
    const char exec = r["exec"].get<std::string>()[0];
    const uint64_t i = r["index"];
    if (i % every == 0) {
      ++sampled_n[exec];
      sampled_us[exec].push_back(r["us"]);
      auto it = by_index.find(i);
      if (it != by_index.end() && blocks_gpu::CompleteBlocks(*it->second, s.blocks[it->second->seq], sms))
        ++sampled_ok[exec];
    } else {
      native_us[exec].push_back(r["us"]);
    }
  }
  for (char e : {'U', 'P'}) {
    const std::string k(1, e);
    graphs[k] = {{"sampled_replays", sampled_n[e]},
                 {"sampled_complete", sampled_ok[e]},
                 {"sampled_us_median", Median(sampled_us[e])},
                 {"other_us_median", Median(native_us[e])}};
    if (sampled_ok[e] != sampled_n[e])
      failures.push_back("graph exec " + k + ": " + std::to_string(sampled_ok[e]) + " of " +
                         std::to_string(sampled_n[e]) + " sampled replays traced with all blocks");
  }
  // Graph execs pin target modules patched (docs/block-probe.md, "Graphs and toggling"): both execs
  // run patched, sampled replays with blocks, the others on the off buffer.
  const double u = Median(native_us['U']), p = Median(native_us['P']);
  const uint64_t pinned = counter(counters::kModulesPinnedByGraph);
  std::string finding = "modules pinned patched by graph execs: " + std::to_string(pinned) +
                        ", pinned unpatched: " + std::to_string(counter(counters::kModulesPinnedUnpatched)) +
                        "; unsampled replays us (median): U " + std::to_string(u) + ", P " + std::to_string(p);
  if (pinned == 0) failures.push_back("no module pinned patched though the workload instantiated graphs");
  graphs["finding"] = finding;

  nlohmann::json out;
  out["launches_traced"] = s.launches.size();
  out["blocks_checked"] = blocks_checked;
  out["bad_launches"] = bad;
  out["catch_ups"] = catch_ups;
  out["graphs"] = graphs;
  out["counters"] = counters;
  out["failures"] = failures;
  out["pass"] = failures.empty();
  std::printf("%s\n", out.dump().c_str());
  return failures.empty() ? 0 : 1;
}
