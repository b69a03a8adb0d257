// Helpers for format tests: write a small trace with known records.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "format/header.h"
#include "format/trace_writer.h"
#include "twinscope/trace_reader.h"

namespace twinscope::test {

inline std::string TempPath(const std::string& name) {
  return std::string(::testing::TempDir()) + "/" + name + "_" + std::to_string(::getpid()) + ".tsc";
}

// Collects everything a reader delivers.
struct CollectSink : RecordSink {
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> memcpys;
  std::vector<LaunchRecord> launches;
  std::vector<BlockRecord> blocks;
  std::vector<NvtxRecord> nvtx;
  int statuses = 0;
  int summaries = 0;
  void OnKernel(const KernelRecord& r) override { kernels.push_back(r); }
  void OnMemcpy(const MemcpyRecord& r) override { memcpys.push_back(r); }
  void OnLaunch(const LaunchRecord& r) override { launches.push_back(r); }
  void OnBlock(const BlockRecord& r) override { blocks.push_back(r); }
  void OnNvtx(const NvtxRecord& r) override { nvtx.push_back(r); }
  void OnStatus(const nlohmann::json&, bool summary) override { summary ? ++summaries : ++statuses; }
};

inline KernelRecord MakeKernel(uint64_t i, StringId name) {
  KernelRecord k{};
  k.start_ns = 1000 + i * 10;
  k.end_ns = k.start_ns + 5 + i % 7;
  k.correlation_id = static_cast<uint32_t>(i);
  k.grid = {static_cast<uint32_t>(i % 100 + 1), 1, 1};
  k.block = {128, 1, 1};
  k.name = name;
  return k;
}

// Writes `n` kernels (small chunks so there are many) and returns the path.
inline std::string WriteSampleTrace(const std::string& name, uint64_t n, size_t chunk_bytes = 4096) {
  WriterOptions o;
  o.path = TempPath(name);
  o.chunk_bytes = chunk_bytes;
  std::string err;
  auto w = TraceWriter::Open(o, BaseHeader("primary"), &err);
  if (!w) return "";
  StringId a = w->Intern("kernel_a");
  StringId b = w->Intern("kernel_b");
  for (uint64_t i = 0; i < n; ++i) w->Append(MakeKernel(i, i % 2 ? a : b));
  w->AddCounter("launches_seen", n);
  w->Close();
  return o.path;
}

}  // namespace twinscope::test
