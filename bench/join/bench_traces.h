// What the join benchmarks share to write their synthetic twins: a writer that never drops, a launch with its
// kernel record, and a stopwatch.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "format/trace_writer.h"

namespace twinscope::bench {

// A trace writer at `path`; exits with `tool`'s message if it cannot open. The benchmarks write faster than
// any collector, so its buffer is large enough never to drop (the memory benchmark checks).
inline std::unique_ptr<TraceWriter> OpenTrace(const char* tool, const std::string& path, const nlohmann::json& header) {
  WriterOptions o;
  o.path = path;
  o.max_buffered_bytes = 1ull << 30;
  std::string error;
  auto w = TraceWriter::Open(o, header, &error);
  if (!w) {
    std::fprintf(stderr, "%s: %s\n", tool, error.c_str());
    std::exit(1);
  }
  return w;
}

// Launch `i` (5 us apart) of `kernel` with key `key`, and its kernel record (3 us later, 2-5 us long).
inline void AppendLaunchAndKernel(TraceWriter* w, uint64_t i, const LaunchKey& key, StringId kernel, Dim3 grid,
                                  Dim3 block) {
  LaunchRecord l{};
  l.seq = i;
  l.cpu_ns = 1'000'000 + i * 5'000;
  l.key = key;
  l.correlation_id = static_cast<uint32_t>(i + 1);
  l.kernel = kernel;
  l.grid = grid;
  l.block = block;
  w->Append(l);
  KernelRecord k{};
  k.start_ns = l.cpu_ns + 3'000;
  k.end_ns = k.start_ns + 2'000 + (i * 7919) % 3'000;
  k.key = l.key;
  k.correlation_id = l.correlation_id;
  k.name = l.kernel;
  k.grid = grid;
  k.block = block;
  w->Append(k);
}

inline double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace twinscope::bench
