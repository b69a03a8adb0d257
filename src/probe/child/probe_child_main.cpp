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

  int devices = 0;
  std::string error;
  if (CudaDeviceCount(&devices, &error) != 0 || devices == 0) {
    out["no_gpu"] = error.empty() ? "cudaGetDeviceCount found 0 devices" : error;
    std::printf("%s\n", out.dump().c_str());
    return 3;
  }
  nlohmann::json steps = nlohmann::json::array();
  for (const std::string& op : exp->ops) {
    Step s = MakeStep(op);
    int code = s.run();
    steps.push_back(
        {{"call", s.call}, {"code", code}, {"name", s.sanitizer ? SanResultName(code) : CuptiResultName(code)}});
  }
  out["steps"] = steps;
  if (LaunchTestKernels(launches, &error) != 0) out["error"] = error;
  CuptiFlush();
  out["cupti_kernel_records"] = CuptiKernelRecords();
  out["cupti_launch_callbacks"] = CuptiLaunchCallbacks();
  out["sanitizer_launch_callbacks"] = SanLaunchCallbacks();
  std::printf("%s\n", out.dump().c_str());
  std::fflush(stdout);
  return 0;
}
