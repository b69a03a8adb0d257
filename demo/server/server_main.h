// The demo server's command line and run, shared by twinscope-demo-server
// (server/main.cpp, with the GPU engine) and test builds that bring an engine
// of their own (tests/demo's fake-GPU server). CUDA-free.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/status.h"
#include "common/engine.h"

namespace twinscope::demo {

// What the command line asks of an engine.
struct EngineConfig {
  ModelShape model;
  int device = 0;
  double memory_fraction = 0.3;
  int block_size = 16;
  int max_batch = 64;
  int max_step_tokens = 8192;
  int max_model_len = 4096;
  bool enforce_eager = false;
  int cpu_step_us = 2000;
  int64_t cpu_kv_blocks = 16384;
};

using EngineFactory = std::function<StatusOr<std::unique_ptr<Engine>>(const EngineConfig&)>;
// By --engine name. "cpu" is the CPU engine unless the map names another.
using EngineFactories = std::map<std::string, EngineFactory>;

// The CPU engine (server/cpu_engine.h) for `config`.
StatusOr<std::unique_ptr<Engine>> CreateCpuEngine(const EngineConfig& config);

// Parses the options (docs/demo-server.md), serves until stopped; the exit code.
int DemoServerMain(int argc, char** argv, EngineFactories engines);

}  // namespace twinscope::demo
