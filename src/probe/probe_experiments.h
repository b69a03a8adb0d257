// The coexistence experiments of seed 000 (the matrix measured on the H200 is
// in docs/design.md): the order in which one process calls CUPTI and the
// Compute Sanitizer before its first kernel; and, for CUPTI 13.5's
// multi-subscriber mode, two CUPTI clients (v2 + v2, v2 + legacy v1 in both
// orders) and a v2 client with the Sanitizer in both orders. Shared by `twinscope probe`
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
  bool two_cupti_clients = false;  // the second CUPTI columns apply
};

const std::vector<Experiment>& Experiments();
const Experiment* FindExperiment(const std::string& id);

}  // namespace twinscope::probe
