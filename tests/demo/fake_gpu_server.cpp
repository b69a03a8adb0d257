// twinscope-demo-server for CI, with a "GPU" made of the fake CUPTI and the
// fake Sanitizer (tests/fakes): the real server (server_main.h) whose cpu
// engine is the CPU engine plus, per step, the launches the GPU engine makes
// that the demo's join looks at: inside the step's NVTX range (real NVTX
// calls, so the collector's injection sees them), for each layer the cache
// kernel (one block per token, min(kv_heads x head_dim, 512) threads) and an
// rms_norm kernel. Decode steps run as one CUDA graph per padded batch (as the
// GPU engine replays them; eagerly with --enforce-eager), prefill steps
// eagerly. As the primary (TWINSCOPE_ROLE=primary) they go through the fake
// CUPTI, the injection loaded as the driver would; as the shadow, through the
// fake Sanitizer over real cubins; with no role, nowhere. The fake CUPTI is
// flushed after every step unless FAKE_GPU_STEP_FLUSH=0. Used by
// demo_e2e_test through TWINSCOPE_DEMO_SERVER.
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "fakecupti.h"
#include "fakesan.h"
#include "server/server_main.h"

namespace twinscope::demo {
namespace {

// The cache kernel of tests/blocks/data/target_kernels.cu (vLLM's name; the demo's own is in namespace tsdemo).
constexpr const char* kCacheKernel = "_ZN4vllm30reshape_and_cache_flash_kernelIffEEvPKT_PT0_PKlii";
constexpr const char* kNormKernel = "rms_norm_kernel";  // tests/blocks/data/other_kernels.cu

enum class Side { kNone, kPrimary, kShadow };

class FakeGpuEngine : public Engine {
 public:
  FakeGpuEngine(std::unique_ptr<Engine> cpu, Side side, uintptr_t cache_module, uintptr_t norm_module)
      : cpu_(std::move(cpu)), side_(side), cache_module_(cache_module), norm_module_(norm_module) {
    const ModelShape& m = cpu_->info().model;
    layers_ = static_cast<unsigned>(m.layers);
    cache_threads_ = static_cast<unsigned>(std::min(m.kv_heads * m.head_dim, 512));
    for (int g : cpu_->info().graph_sizes) graph_sizes_[g] = nullptr;
    if (side_ == Side::kShadow) stream_ = fakesan_create_stream();
  }
  const EngineInfo& info() const override { return cpu_->info(); }

  Status Run(const EngineStep& step, std::vector<int32_t>* tokens) override {
    nvtxRangePushA(step.name.c_str());
    const unsigned grid = static_cast<unsigned>(step.padded);
    Status s = Status::Ok();
    if (side_ == Side::kPrimary) {
      auto graph = graph_sizes_.find(step.padded);
      if (step.kind == StepKind::kDecode && graph != graph_sizes_.end()) {
        if (!graph->second) graph->second = Capture(grid);
        fakecupti_graph_launch(graph->second, nullptr, 0);
      } else {
        for (unsigned l = 0; l < layers_; ++l) {
          fakecupti_launch_kernel(kCacheKernel, grid, 1, 1, cache_threads_, 1, 1);
          fakecupti_launch_kernel(kNormKernel, grid, 1, 1, 128, 1, 1);
        }
      }
      // A flush per step hands the collector every record at once; FAKE_GPU_STEP_FLUSH=0 leaves delivery to the
      // collector's own buffering and flushes, as on a GPU.
      if (flush_each_step_) fakecupti_flush();
    } else if (side_ == Side::kShadow) {
      auto graph = graph_sizes_.find(step.padded);
      const bool as_graph = step.kind == StepKind::kDecode && graph != graph_sizes_.end();
      if (as_graph && !graph->second) {
        fakesan_graph_instantiate();
        graph->second = reinterpret_cast<CUgraphExec>(uintptr_t{1});  // instantiated (the fake keeps no handle)
      }
      auto launch = as_graph ? fakesan_graph_node_launch : fakesan_launch;
      if (as_graph) fakesan_graph_begin(stream_);
      for (unsigned l = 0; l < layers_ && s.ok(); ++l) {
        if (launch(cache_module_, kCacheKernel, grid, 1, 1, cache_threads_, 1, 1, stream_, nullptr) != 0 ||
            launch(norm_module_, kNormKernel, grid, 1, 1, 128, 1, 1, stream_, nullptr) != 0)
          s = Status::Error("the fake Sanitizer refused a launch");
      }
      if (as_graph) fakesan_graph_end(stream_);
      fakesan_stream_sync(stream_);
    }
    if (s.ok()) s = cpu_->Run(step, tokens);
    nvtxRangePop();
    return s;
  }

 private:
  CUgraphExec Capture(unsigned grid) {
    CUgraph g = fakecupti_graph_create();
    for (unsigned l = 0; l < layers_; ++l) {
      fakecupti_graph_add_kernel(g, kCacheKernel, grid, 1, 1, cache_threads_, 1, 1);
      fakecupti_graph_add_kernel(g, kNormKernel, grid, 1, 1, 128, 1, 1);
    }
    return fakecupti_graph_instantiate(g, 1);
  }

  std::unique_ptr<Engine> cpu_;
  Side side_;
  uintptr_t cache_module_, norm_module_;
  unsigned layers_ = 0, cache_threads_ = 0;
  uintptr_t stream_ = 0;  // the shadow's stream
  const bool flush_each_step_ = [] {
    const char* v = std::getenv("FAKE_GPU_STEP_FLUSH");
    return !v || std::string(v) != "0";
  }();
  std::map<int, CUgraphExec> graph_sizes_;  // captured (instantiated) on first use
};

// Starts the fake driver of this process's side, as the real driver would start the injected collector.
StatusOr<Side> StartFakeDriver(uintptr_t* cache_module, uintptr_t* norm_module) {
  const char* role = std::getenv("TWINSCOPE_ROLE");
  const std::string r = role ? role : "";
  if (r == "primary") {
    const char* inj = std::getenv("CUDA_INJECTION64_PATH");
    if (!inj) return Status::Error("fake GPU: TWINSCOPE_ROLE=primary without CUDA_INJECTION64_PATH");
    void* lib = dlopen(inj, RTLD_NOW | RTLD_LOCAL);
    auto init = lib ? reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection")) : nullptr;
    if (!init || init() != 1) return Status::Error(std::string("fake GPU: cannot initialise ") + inj);
    fakecupti_create_context(0);
    return Side::kPrimary;
  }
  if (r == "shadow") {
    if (fakesan_init() != 0) return Status::Error("fake GPU: fakesan_init failed");
    *cache_module = fakesan_load_module_file(TWINSCOPE_TEST_TARGET_CUBIN);
    *norm_module = fakesan_load_module_file(TWINSCOPE_TEST_OTHER_CUBIN);
    if (!*cache_module || !*norm_module) return Status::Error("fake GPU: cannot load the test cubins");
    return Side::kShadow;
  }
  return Side::kNone;
}

}  // namespace
}  // namespace twinscope::demo

int main(int argc, char** argv) {
  using namespace twinscope::demo;
  auto fake = [](const EngineConfig& c) -> twinscope::StatusOr<std::unique_ptr<Engine>> {
    auto cpu = CreateCpuEngine(c);
    if (!cpu.ok()) return cpu.status();
    uintptr_t cache = 0, norm = 0;
    auto side = StartFakeDriver(&cache, &norm);
    if (!side.ok()) return side.status();
    return std::unique_ptr<Engine>(std::make_unique<FakeGpuEngine>(std::move(*cpu), *side, cache, norm));
  };
  return DemoServerMain(argc, argv, {{"cpu", fake}});
}
