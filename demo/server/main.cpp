// twinscope-demo-server: an OpenAI-compatible chat server that behaves on the
// GPU like an LLM decode server (continuous batching, paged KV cache, CUDA
// graphs per batch size, NVTX step ranges) without downloading a model. The
// example workload of `twinscope demo`; options and behaviour in
// docs/demo-server.md. This file adds the GPU engine to server_main.h.
#include "gpu/gpu_engine.h"
#include "server/server_main.h"

int main(int argc, char** argv) {
  using namespace twinscope::demo;
  auto gpu = [](const EngineConfig& c) -> twinscope::StatusOr<std::unique_ptr<Engine>> {
    GpuEngineOptions o;
    o.model = c.model;
    o.device = c.device;
    o.memory_fraction = c.memory_fraction;
    o.block_size = c.block_size;
    o.max_batch = c.max_batch;
    o.max_step_tokens = c.max_step_tokens;
    o.max_model_len = c.max_model_len;
    o.enforce_eager = c.enforce_eager;
    return CreateGpuEngine(o);
  };
  return DemoServerMain(argc, argv, {{"gpu", gpu}});
}
