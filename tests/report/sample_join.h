// Synthetic joined models (docs/join.md's JSON, with every key join.json has) for the report's tests, its
// benchmark and the sample report tool: launches of target kernels, steps, drift, loss, "why slow" groups
// and block detail whose blocks come from a small scheduler simulation with a known answer per slow launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace twinscope::testing_report {

struct SampleJoinOptions {
  size_t launches = 240;        // matched launches in "launches" (at least detail_launches)
  size_t launches_total = 0;    // "launches_total"; 0: the same as launches
  size_t detail_launches = 12;  // launches with block detail: groups of reference + 5 slow kinds
  uint32_t blocks = 4096;       // grid size (blocks) of the detailed launches' shapes
  uint32_t sms = 132;
  uint32_t slots_per_sm = 8;  // blocks an SM runs at once in the simulation
  size_t steps = 60;
  bool hostile_names = true;  // names with < & " ' </script> <!-- and invalid UTF-8, as traces may hold
  bool concurrent = false;
  uint64_t seed = 1;
};

// The five slow kinds of the detailed launches, in group order after the reference.
inline constexpr const char* kSlowKinds[] = {"straggler", "fewer_sms", "reordered", "fewer_blocks", "none"};

nlohmann::json MakeSampleJoin(const SampleJoinOptions& options = {});

// A small sample (60 launches, 6 with the blocks of 512-block grids on 16 SMs, 12 steps): quick pages for tests.
inline SampleJoinOptions SmallSampleJoin() {
  SampleJoinOptions o;
  o.launches = 60;
  o.detail_launches = 6;
  o.blocks = 512;
  o.sms = 16;
  o.steps = 12;
  return o;
}

// A kernel name that holds every sequence the report must escape.
inline constexpr const char* kHostileKernel =
    "evil<int>::k</script><script>window.tsPwned=1</script>&amp;\"quoted\" 'single' <!-- \xff\xfe end";

}  // namespace twinscope::testing_report
