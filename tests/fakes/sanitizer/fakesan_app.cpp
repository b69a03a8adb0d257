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
//          [gap_us=N]                 (sleep N us after each repeat: program time)
//   graph  <module> <kernel> <grid> <block> [same options]   (a graph kernel node)
//   graph_instantiate [<exec>]        (cudaGraphInstantiate: a new exec, named <exec> if given)
//   graph_begin <stream alias> [<exec>]   graph_end <stream alias>
//                                     (bracket a whole launch of <exec>; default: the exec instantiated
//                                      last, or none if no exec was: then nodes are not checked against it)
//   threads <n> launch|graph ...      (the launch line on n threads at once, each its own stream
//                                      if the line names stream=new)
//   capture_begin <stream alias>      capture_end <stream alias> <graph>   (cudaStreamBegin/EndCapture)
//   instantiate <graph> <exec>        graph_launch <exec> <stream alias>   (a captured graph, launched whole)
//   sleep_us <N>
//   sync                              stream_sync <alias>
//   destroy_context
// Exits 2 on a bad script, 3 if the fake refuses a command.
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
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

struct LaunchLine {
  bool graph = false;
  uintptr_t module = 0;
  std::string kernel;
  uint32_t g[3], b[3];
  FakesanPlan plan{};
  uintptr_t stream = 0;
  bool new_stream = false;  // stream=new: a stream of its own (per thread)
  long repeat = 1;
  unsigned long long gap_us = 0;
};

// Parses "launch|graph <module> <kernel> <grid> <block> [options]"; "" or an error.
std::string ParseLaunch(const std::vector<std::string>& w, size_t first,
                        const std::map<std::string, uintptr_t>& modules,
                        const std::map<std::string, uintptr_t>& streams, LaunchLine* out) {
  if (w.size() < first + 5) return "launch needs <module> <kernel> <grid> <block>";
  LaunchLine& l = *out;
  l.graph = w[first] == "graph";
  if (!ParseDim(w[first + 3], l.g) || !ParseDim(w[first + 4], l.b)) return "dims must look like 1000,1,1";
  for (size_t i = first + 5; i < w.size(); ++i) {
    auto eq = w[i].find('=');
    if (eq == std::string::npos) return "option without '=': " + w[i];
    std::string k = w[i].substr(0, eq), v = w[i].substr(eq + 1);
    unsigned long long n = std::strtoull(v.c_str(), nullptr, 10);
    if (k == "stream" && v == "new")
      l.new_stream = true;
    else if (k == "stream" && streams.count(v))
      l.stream = streams.at(v);
    else if (k == "seed")
      l.plan.shuffle_seed = uint32_t(n);
    else if (k == "sms")
      l.plan.num_sms = uint32_t(n);
    else if (k == "split")
      l.plan.split_exit_warps = uint32_t(n);
    else if (k == "drop")
      l.plan.drop_exit_every = uint32_t(n);
    else if (k == "start")
      l.plan.start_ns = n;
    else if (k == "spacing")
      l.plan.spacing_ns = n;
    else if (k == "duration")
      l.plan.duration_ns = n;
    else if (k == "repeat")
      l.repeat = long(n);
    else if (k == "gap_us")
      l.gap_us = n;
    else
      return "unknown option " + w[i];
  }
  auto mod = modules.find(w[first + 1]);
  if (mod == modules.end()) return "unknown module " + w[first + 1];
  l.module = mod->second;
  l.kernel = w[first + 2];
  return "";
}

// Plays a launch line; false if the fake refused a launch.
bool Play(const LaunchLine& l, uintptr_t stream) {
  for (long r = 0; r < l.repeat; ++r) {
    int rc = l.graph ? fakesan_graph_node_launch(l.module, l.kernel.c_str(), l.g[0], l.g[1], l.g[2], l.b[0], l.b[1],
                                                 l.b[2], stream, &l.plan)
                     : fakesan_launch(l.module, l.kernel.c_str(), l.g[0], l.g[1], l.g[2], l.b[0], l.b[1], l.b[2],
                                      stream, &l.plan);
    if (rc != 0) return false;
    if (l.gap_us) std::this_thread::sleep_for(std::chrono::microseconds(l.gap_us));
  }
  return true;
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
  std::map<std::string, uintptr_t> modules, streams, execs, graphs;
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
      LaunchLine l;
      if (std::string e = ParseLaunch(w, 0, modules, streams, &l); !e.empty()) return Fail(lineno, e);
      if (l.new_stream) l.stream = fakesan_create_stream();
      if (!Play(l, l.stream)) return Fail(lineno, "the fake refused the launch of " + l.kernel) + 1;
    } else if (cmd == "threads" && w.size() >= 7) {
      LaunchLine l;
      if (std::string e = ParseLaunch(w, 2, modules, streams, &l); !e.empty()) return Fail(lineno, e);
      const int n = std::atoi(w[1].c_str());
      std::vector<uintptr_t> own(n, l.stream);
      if (l.new_stream)
        for (auto& s : own) s = fakesan_create_stream();
      std::vector<std::thread> threads;
      std::vector<int> ok(n, 1);
      for (int t = 0; t < n; ++t)
        threads.emplace_back([&, t] {
          nvtxRangePushA("worker");
          ok[t] = Play(l, own[t]) ? 1 : 0;
          nvtxRangePop();
        });
      for (auto& t : threads) t.join();
      for (int t = 0; t < n; ++t)
        if (!ok[t]) return Fail(lineno, "the fake refused a launch of " + l.kernel) + 1;
    } else if (cmd == "graph_instantiate" && w.size() <= 2) {
      const uintptr_t e = fakesan_graph_exec_instantiate();
      if (w.size() == 2) execs[w[1]] = e;
    } else if (cmd == "graph_begin" && w.size() == 2) {
      fakesan_graph_begin(streams.at(w[1]));
    } else if (cmd == "graph_begin" && w.size() == 3) {
      if (!execs.count(w[2])) return Fail(lineno, "unknown exec " + w[2]);
      fakesan_graph_exec_begin(execs.at(w[2]), streams.at(w[1]));
    } else if (cmd == "graph_end" && w.size() == 2) {
      fakesan_graph_end(streams.at(w[1]));
    } else if (cmd == "capture_begin" && w.size() == 2) {
      fakesan_stream_begin_capture(streams.at(w[1]));
    } else if (cmd == "capture_end" && w.size() == 3) {
      graphs[w[2]] = fakesan_stream_end_capture(streams.at(w[1]));
    } else if (cmd == "instantiate" && w.size() == 3) {
      if (!graphs.count(w[1])) return Fail(lineno, "unknown graph " + w[1]);
      execs[w[2]] = fakesan_graph_instantiate_captured(graphs.at(w[1]));
    } else if (cmd == "graph_launch" && w.size() == 3) {
      if (!execs.count(w[1])) return Fail(lineno, "unknown exec " + w[1]);
      if (fakesan_graph_launch_captured(execs.at(w[1]), streams.at(w[2])) != 0)
        return Fail(lineno, "the fake refused the graph launch of " + w[1]) + 1;
    } else if (cmd == "sleep_us" && w.size() == 2) {
      std::this_thread::sleep_for(std::chrono::microseconds(std::strtoull(w[1].c_str(), nullptr, 10)));
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
