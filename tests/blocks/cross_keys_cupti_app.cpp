// The CUPTI twin of fakesan_app: plays the SAME script (fakesan_app.cpp's
// format) through the fake CUPTI (tests/fakes/cupti) with libtwinscope_cupti.so
// loaded from CUDA_INJECTION64_PATH as the driver would, and real NVTX calls.
// Lines that only concern the Sanitizer side (mode, module, unload,
// destroy_context) are accepted and ignored; `graph` lines are refused (a
// CUPTI graph launch has no one-line equivalent). Exit 2 on a bad script.
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fakecupti.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cross_keys_cupti_app <script>\n");
    return 2;
  }
  const char* inj = std::getenv("CUDA_INJECTION64_PATH");
  if (!inj) {
    std::fprintf(stderr, "CUDA_INJECTION64_PATH is not set\n");
    return 2;
  }
  void* lib = dlopen(inj, RTLD_NOW | RTLD_LOCAL);
  auto init = lib ? reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection")) : nullptr;
  if (!init || init() != 1) {
    std::fprintf(stderr, "cannot initialise %s: %s\n", inj, lib ? "InitializeInjection failed" : dlerror());
    return 3;
  }
  fakecupti_create_context(0);
  std::ifstream in(argv[1]);
  std::map<std::string, CUstream> streams{{"0", nullptr}};
  std::string text;
  int lineno = 0;
  while (std::getline(in, text)) {
    ++lineno;
    if (auto hash = text.find('#'); hash != std::string::npos) text.resize(hash);
    std::istringstream ls(text);
    std::vector<std::string> w;
    for (std::string t; ls >> t;) w.push_back(t);
    if (w.empty()) continue;
    const std::string& cmd = w[0];
    if (cmd == "mode" || cmd == "init" || cmd == "module" || cmd == "unload" || cmd == "destroy_context" ||
        cmd == "destroy_stream") {
      continue;
    } else if (cmd == "stream" && w.size() == 2) {
      streams[w[1]] = fakecupti_create_stream();
    } else if (cmd == "push" && w.size() == 2) {
      nvtxRangePushA(w[1].c_str());
    } else if (cmd == "pop") {
      nvtxRangePop();
    } else if (cmd == "sync" || cmd == "stream_sync") {
      fakecupti_flush();
    } else if (cmd == "launch" && w.size() >= 5) {
      FakeLaunch l{};
      l.name = w[2].c_str();
      if (std::sscanf(w[3].c_str(), "%u,%u,%u", &l.grid[0], &l.grid[1], &l.grid[2]) != 3 ||
          std::sscanf(w[4].c_str(), "%u,%u,%u", &l.block[0], &l.block[1], &l.block[2]) != 3) {
        std::fprintf(stderr, "line %d: bad dims\n", lineno);
        return 2;
      }
      l.api = FAKE_API_RUNTIME;
      long repeat = 1;
      for (size_t i = 5; i < w.size(); ++i) {
        if (w[i].rfind("stream=", 0) == 0) l.stream = streams.at(w[i].substr(7));
        if (w[i].rfind("repeat=", 0) == 0) repeat = std::atol(w[i].c_str() + 7);
      }
      for (long r = 0; r < repeat; ++r) fakecupti_launch(&l);
    } else {
      std::fprintf(stderr, "line %d: unsupported here: %s\n", lineno, text.c_str());
      return 2;
    }
  }
  fakecupti_flush();
  return 0;
}
