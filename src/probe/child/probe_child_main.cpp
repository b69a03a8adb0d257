// twinscope_probe_child: runs ONE coexistence experiment of seed 000 in this
// process and prints its outcome as one JSON line on stdout (read by
// src/probe/probe.cpp). Usage: twinscope_probe_child <experiment> [launches].
// Exit codes: 0 ran; 2 bad usage; 3 no usable GPU (the JSON says why).
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "probe/child/sides.h"
#include "probe/probe_experiments.h"

using namespace twinscope::probe_child;

namespace {

struct Step {
  const char* call;
  std::function<int()> run;
  bool sanitizer;  // which API's result names apply
};

Step MakeStep(const std::string& op) {
  if (op == "san_subscribe") return {"sanitizerSubscribe", SanSubscribe, true};
  if (op == "san_unsubscribe") return {"sanitizerUnsubscribe", SanUnsubscribe, true};
  if (op == "cupti_activity_register") return {"cuptiActivityRegisterCallbacks", CuptiActivityRegister, false};
  if (op == "cupti_activity_enable")
    return {"cuptiActivityEnable(CONCURRENT_KERNEL)", CuptiActivityEnableKernel, false};
  if (op == "cupti_subscribe") return {"cuptiSubscribe", CuptiSubscribe, false};
  if (op == "cupti_unsubscribe") return {"cuptiUnsubscribe", CuptiUnsubscribe, false};
  if (op == "cupti_finalize") return {"cuptiFinalize", CuptiFinalize, false};
  if (op == "cupti_v2_a") return {"cuptiSubscribe_v2(multi) A + activity", [] { return CuptiV2Client(0); }, false};
  if (op == "cupti_v2_b") return {"cuptiSubscribe_v2(multi) B + activity", [] { return CuptiV2Client(1); }, false};
  return {nullptr, nullptr, false};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: twinscope_probe_child <experiment> [launches]\n");
    return 2;
  }
  const twinscope::probe::Experiment* exp = twinscope::probe::FindExperiment(argv[1]);
  if (!exp) {
    std::fprintf(stderr, "twinscope_probe_child: unknown experiment '%s'\n", argv[1]);
    return 2;
  }
  const int launches = argc > 2 ? std::atoi(argv[2]) : 10;
  nlohmann::json out = {{"experiment", exp->id}, {"launches", launches}};

  uint32_t cupti_version = 0;
  if (exp->uses_cupti) {
    out["cupti_library"] = CuptiLibrary(&cupti_version);
    out["cupti_version"] = cupti_version;
  }
  int devices = 0;
  std::string error;
  if (CudaDeviceCount(&devices, &error) != 0 || devices == 0) {
    out["no_gpu"] = error.empty() ? "cudaGetDeviceCount found 0 devices" : error;
    std::printf("%s\n", out.dump().c_str());
    return 3;
  }
  // The CUPTI clients in the order the experiment starts them (the table's
  // first and second CUPTI columns).
  std::vector<CuptiClient> clients;
  auto add_client = [&](CuptiClient c) {
    for (CuptiClient k : clients)
      if (k == c) return;
    clients.push_back(c);
  };
  nlohmann::json steps = nlohmann::json::array();
  for (const std::string& op : exp->ops) {
    if (op == "cupti_v2_a") add_client(CuptiClient::kV2A);
    if (op == "cupti_v2_b") add_client(CuptiClient::kV2B);
    if (op.rfind("cupti_activity", 0) == 0 || op == "cupti_subscribe") add_client(CuptiClient::kLegacy);
    Step s = MakeStep(op);
    int code = s.run();
    steps.push_back(
        {{"call", s.call}, {"code", code}, {"name", s.sanitizer ? SanResultName(code) : CuptiResultName(code)}});
  }
  out["steps"] = steps;
  if (LaunchTestKernels(launches, &error) != 0) out["error"] = error;
  CuptiFlush();
  if (clients.empty()) clients.push_back(CuptiClient::kLegacy);
  out["cupti_kernel_records"] = CuptiKernelRecords(clients[0]);
  out["cupti_launch_callbacks"] = CuptiLaunchCallbacks(clients[0]);
  if (clients.size() > 1) {
    out["cupti2_kernel_records"] = CuptiKernelRecords(clients[1]);
    out["cupti2_launch_callbacks"] = CuptiLaunchCallbacks(clients[1]);
  }
  out["sanitizer_launch_callbacks"] = SanLaunchCallbacks();
  std::printf("%s\n", out.dump().c_str());
  std::fflush(stdout);
  return 0;
}
