// The coexistence experiments of seed 000 (shared/FACTS.md has the matrix
// measured on the H200): the order in which one process calls CUPTI and the
// Compute Sanitizer before its first kernel. Shared by `twinscope probe`
// (src/probe/probe.cpp) and the child that runs each one in its own process.
#pragma once

#include <string>
#include <vector>

namespace twinscope::probe {

struct Experiment {
  std::string id;
  std::string order;             // human-readable order of calls
  std::vector<std::string> ops;  // san_subscribe, cupti_activity_register, ... (probe_child_main.cpp)
  bool uses_sanitizer;
  bool uses_cupti;
};

const std::vector<Experiment>& Experiments();
const Experiment* FindExperiment(const std::string& id);

}  // namespace twinscope::probe
