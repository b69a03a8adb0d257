// Checks a shadow trace of blocks_workload (scripts/gpu_blocks.sh) against the
// workload's expectations: every traced launch has exactly grid-size blocks
// with enter and exit, exit >= enter, arrival orders a permutation, SM ids
// below the SM count; only the selected kernels have records; nothing
// overflowed or went missing. With --primary, also checks that every shadow
// launch key is found in the CUPTI collector's trace of the same program.
// Prints one JSON object; exit 0 if every check passed.
//   blocks_trace_check <shadow.tsc> <expect.json> [--primary <primary.tsc>]
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

std::unique_ptr<TraceReader> Load(const std::string& path, Sink* sink, std::string* error) {
  auto r = TraceReader::Open(path, error);
  if (!r) return nullptr;
  ReadReport rep = r->Read(*sink);
  if (!rep.ok()) {
    *error = rep.message;
    return nullptr;
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 5 && std::string(argv[3]) == "--primary")) {
    std::fprintf(stderr, "usage: blocks_trace_check <shadow.tsc> <expect.json> [--primary <primary.tsc>]\n");
    return 2;
  }
  nlohmann::json out;
  std::vector<std::string> failures;
  std::ifstream ef(argv[2]);
  nlohmann::json expect = nlohmann::json::parse(ef, nullptr, false);
  if (expect.is_discarded()) {
    std::fprintf(stderr, "blocks_trace_check: cannot read %s\n", argv[2]);
    return 2;
  }
  Sink s;
  std::string error;
  auto reader = Load(argv[1], &s, &error);
  if (!reader) {
    std::fprintf(stderr, "blocks_trace_check: %s\n", error.c_str());
    return 2;
  }
  const nlohmann::json& status = reader->last_status();
  const nlohmann::json counters = status.value("counters", nlohmann::json::object());
  auto counter = [&](const char* n) { return counters.value(n, uint64_t{0}); };
  const uint32_t sms = expect["sms"];

  std::vector<uint32_t> plain_grids;
  size_t grid3d = 0, graph = 0, unexpected = 0, bad_launches = 0;
  uint64_t blocks_checked = 0;
  std::set<std::string> names;
  for (const LaunchRecord& l : s.launches) {
    const std::string name(reader->String(l.kernel));
    names.insert(name);
    const bool target = name.find("reshape_and_cache_flash_kernel") != std::string::npos;
    const bool g3 = name.find("grid3d_kernel") != std::string::npos;
    if (!target && !g3) {
      ++unexpected;
      continue;
    }
    if (g3) ++grid3d;
    if (target && (l.flags & kFlagGraph)) ++graph;
    if (target && !(l.flags & kFlagGraph)) plain_grids.push_back(l.grid.x);
    const uint64_t n = uint64_t{l.grid.x} * l.grid.y * l.grid.z;
    const auto& b = s.blocks[l.seq];
    const bool ok = blocks_gpu::CompleteBlocks(l, b, sms);
    blocks_checked += b.size();
    if (!ok) {
      if (++bad_launches <= 5)
        failures.push_back("launch seq " + std::to_string(l.seq) + " of " + name + " (grid " + std::to_string(n) +
                           "): " + std::to_string(b.size()) +
                           " blocks, not exactly one complete "
                           "record per block with a permutation of orders and valid SMs");
    }
  }
  // Graph replays of the target come either as graph kernel-node callbacks
  // (flagged) or as plain launches after the workload's own ones.
  std::vector<uint32_t> want_grids = expect["reshape_grids"].get<std::vector<uint32_t>>();
  const size_t replays = expect["graph_replays"].get<size_t>();
  const size_t got_total = plain_grids.size() + graph, want_total = want_grids.size() + replays;
  if (got_total != want_total)
    failures.push_back("target launches: " + std::to_string(got_total) + " traced, " + std::to_string(want_total) +
                       " expected (" + std::to_string(graph) + " as graph nodes)");
  if (plain_grids.size() < want_grids.size() || !std::equal(want_grids.begin(), want_grids.end(), plain_grids.begin()))
    failures.push_back("target launches: grids not as launched");
  if (grid3d != expect["grid3d_launches"].get<size_t>())
    failures.push_back("grid3d launches: " + std::to_string(grid3d));
  if (unexpected) failures.push_back(std::to_string(unexpected) + " launch records of unselected kernels");
  for (const char* c : {counters::kBlocksOverflow, counters::kBlocksMissing, counters::kBlocksIncomplete,
                        counters::kBlocksLost, counters::kLaunchesNoBuffer, counters::kSanitizerErrors,
                        counters::kLaunchesSelectedUnpatched, counters::kWriterDropped})
    if (counter(c) != 0) failures.push_back(std::string(c) + " = " + std::to_string(counter(c)));
  if (counter(counters::kModulesPatched) != 1)
    failures.push_back("modules_patched = " + std::to_string(counter(counters::kModulesPatched)) +
                       " (only the target module should be)");
  if (status.value("tool_state", std::string()) != "ok")
    failures.push_back("tool_state = " + status.value("tool_state", std::string("?")));

  out["launches"] = s.launches.size();
  out["blocks_checked"] = blocks_checked;
  out["bad_launches"] = bad_launches;
  out["graph_target_launches"] = graph;
  out["graph_mode"] = replays == 0                       ? "none launched"
                      : graph == replays                 ? "graph node callbacks"
                      : plain_grids.size() == want_total ? "plain launch callbacks"
                                                         : "missing";
  out["kernel_names"] = names;
  out["counters"] = counters;

  if (argc == 5) {
    Sink p;
    auto primary = Load(argv[4], &p, &error);
    if (!primary) {
      failures.push_back("primary trace: " + error);
    } else {
      std::multiset<std::pair<uint64_t, std::string>> keys;
      for (const LaunchRecord& l : p.launches) keys.insert({l.key.hash, std::string(primary->String(l.kernel))});
      size_t matched = 0;
      for (const LaunchRecord& l : s.launches)
        if (keys.count({l.key.hash, std::string(reader->String(l.kernel))})) ++matched;
      out["keys_matched"] = matched;
      out["keys_total"] = s.launches.size();
      out["primary_launches"] = p.launches.size();
      if (matched != s.launches.size())
        failures.push_back("launch keys: " + std::to_string(matched) + " of " + std::to_string(s.launches.size()) +
                           " shadow launches found in the primary trace");
    }
  }
  out["failures"] = failures;
  out["pass"] = failures.empty();
  std::printf("%s\n", out.dump().c_str());
  return failures.empty() ? 0 : 1;
}
