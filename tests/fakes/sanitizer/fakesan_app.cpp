// A scripted "CUDA program" for the fake Sanitizer: reads a script (file named
// by argv[1]) and plays it through fakesan.h, with real NVTX v3 calls (so
// NVTX_INJECTION64_PATH reaches the probe's NVTX injection as in a real
// program). One command per line; '#' starts a comment:
//   mode normal|silent|fail           (before init)
//   init                              (implicit before the first other command)
//   module <alias> <cubin path>       unload <alias>
//   stream <alias>                    destroy_stream <alias>
//   push <name>                       pop
//   launch <module> <kernel> <gx,gy,gz> <bx,by,bz> [stream=<alias>] [seed=N]
//          [sms=N] [split=1] [drop=K] [start=N] [spacing=N] [duration=N] [repeat=N]
//   graph  <module> <kernel> <grid> <block> [same options]   (a graph kernel node)
//   sync                              stream_sync <alias>
//   destroy_context
// Exits 2 on a bad script, 3 if the fake refuses a command.
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fakesan.h"

namespace {

bool ParseDim(const std::string& s, uint32_t d[3]) {
  return std::sscanf(s.c_str(), "%u,%u,%u", &d[0], &d[1], &d[2]) == 3;
}

int Fail(int line, const std::string& why) {
  std::fprintf(stderr, "fakesan_app: script line %d: %s\n", line, why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fakesan_app <script>\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "fakesan_app: cannot read %s\n", argv[1]);
    return 2;
  }
  std::map<std::string, uintptr_t> modules, streams;
  streams["0"] = 0;
  bool initialized = false;
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
    if (cmd == "mode") {
      if (w.size() != 2) return Fail(lineno, "mode needs one argument");
      fakesan_set_mode(w[1] == "silent" ? FAKESAN_SILENT : w[1] == "fail" ? FAKESAN_SUBSCRIBE_FAILS : FAKESAN_NORMAL);
      continue;
    }
    if (!initialized) {
      if (fakesan_init() != 0) return 3;
      initialized = true;
      if (cmd == "init") continue;
    }
    if (cmd == "init") {
      continue;
    } else if (cmd == "module" && w.size() == 3) {
      uintptr_t m = fakesan_load_module_file(w[2].c_str());
      if (!m) return Fail(lineno, "cannot read cubin " + w[2]);
      modules[w[1]] = m;
    } else if (cmd == "unload" && w.size() == 2) {
      fakesan_unload_module(modules.at(w[1]));
    } else if (cmd == "stream" && w.size() == 2) {
      streams[w[1]] = fakesan_create_stream();
    } else if (cmd == "destroy_stream" && w.size() == 2) {
      fakesan_destroy_stream(streams.at(w[1]));
    } else if (cmd == "push" && w.size() == 2) {
      nvtxRangePushA(w[1].c_str());
    } else if (cmd == "pop") {
      nvtxRangePop();
    } else if ((cmd == "launch" || cmd == "graph") && w.size() >= 5) {
      uint32_t g[3], b[3];
      if (!ParseDim(w[3], g) || !ParseDim(w[4], b)) return Fail(lineno, "dims must look like 1000,1,1");
      FakesanPlan plan{};
      uintptr_t stream = 0;
      long repeat = 1;
      for (size_t i = 5; i < w.size(); ++i) {
        auto eq = w[i].find('=');
        if (eq == std::string::npos) return Fail(lineno, "option without '=': " + w[i]);
        std::string k = w[i].substr(0, eq), v = w[i].substr(eq + 1);
        unsigned long long n = std::strtoull(v.c_str(), nullptr, 10);
        if (k == "stream")
          stream = streams.at(v);
        else if (k == "seed")
          plan.shuffle_seed = uint32_t(n);
        else if (k == "sms")
          plan.num_sms = uint32_t(n);
        else if (k == "split")
          plan.split_exit_warps = uint32_t(n);
        else if (k == "drop")
          plan.drop_exit_every = uint32_t(n);
        else if (k == "start")
          plan.start_ns = n;
        else if (k == "spacing")
          plan.spacing_ns = n;
        else if (k == "duration")
          plan.duration_ns = n;
        else if (k == "repeat")
          repeat = long(n);
        else
          return Fail(lineno, "unknown option " + k);
      }
      auto mod = modules.find(w[1]);
      if (mod == modules.end()) return Fail(lineno, "unknown module " + w[1]);
      for (long r = 0; r < repeat; ++r) {
        int rc = cmd == "launch"
                     ? fakesan_launch(mod->second, w[2].c_str(), g[0], g[1], g[2], b[0], b[1], b[2], stream, &plan)
                     : fakesan_graph_node_launch(mod->second, w[2].c_str(), g[0], g[1], g[2], b[0], b[1], b[2], stream,
                                                 &plan);
        if (rc != 0) return Fail(lineno, "the fake refused the launch of " + w[2]) + 1;
      }
    } else if (cmd == "sync") {
      fakesan_ctx_sync();
    } else if (cmd == "stream_sync" && w.size() == 2) {
      fakesan_stream_sync(streams.at(w[1]));
    } else if (cmd == "destroy_context") {
      fakesan_destroy_context();
    } else {
      return Fail(lineno, "unknown or malformed command: " + text);
    }
  }
  if (!initialized && fakesan_init() != 0) return 3;
  return 0;
}
