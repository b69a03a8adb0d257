#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "format/trace_writer.h"
#include "sample_trace.h"
#include "views/export/export.h"

namespace twinscope::exporters {
namespace {

using nlohmann::json;

json Load(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f);  // throws (fails the test) on invalid JSON
}

class ChromeExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    trace_ = testing::TempPath(".tsc");
    out_ = testing::TempPath(".json");
  }
  void TearDown() override {
    std::remove(trace_.c_str());
    std::remove(out_.c_str());
  }
  std::string trace_, out_;
};

std::vector<json> Events(const json& doc, const std::string& ph, const std::string& cat = "") {
  std::vector<json> v;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == ph && (cat.empty() || e.value("cat", "") == cat)) v.push_back(e);
  return v;
}

TEST_F(ChromeExportTest, PrimaryTraceStructureAndValues) {
  testing::WritePrimaryTrace(trace_);
  auto r = ExportChrome(trace_, out_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->report.end, ReadEnd::kComplete);
  EXPECT_EQ(r->skipped_invalid, 1u);  // the kernel with an invalid timestamp
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("1 records with invalid timestamps"), std::string::npos);

  json doc = Load(out_);
  EXPECT_EQ(doc["otherData"]["base_ns"], 900);
  EXPECT_EQ(doc["otherData"]["skipped_invalid_timestamps"], 1);
  EXPECT_EQ(doc["otherData"]["twinscope_header"]["role"], "primary");
  EXPECT_EQ(doc["otherData"]["status"]["counters"]["launches_seen"], 5);
  EXPECT_EQ(r->written, doc["traceEvents"].size());

  // Track names.
  std::map<std::pair<int64_t, int64_t>, std::string> names;
  for (const auto& m : Events(doc, "M")) {
    if (m["name"] == "process_name") names[{m["pid"], -1}] = m["args"]["name"];
    if (m["name"] == "thread_name") names[{m["pid"], m["tid"]}] = m["args"]["name"];
  }
  EXPECT_EQ(names[std::make_pair(int64_t{4242}, int64_t{-1})], "./app (primary)");
  EXPECT_EQ(names[std::make_pair(int64_t{4242}, int64_t{4242})], "main thread 4242");
  EXPECT_EQ(names[std::make_pair(int64_t{4242}, int64_t{4243})], "thread 4243");
  EXPECT_EQ(names[std::make_pair(int64_t{1000000000}, int64_t{-1})], "GPU 0 (Fake GPU)");
  EXPECT_EQ(names[std::make_pair(int64_t{1000000000}, int64_t{7})], "stream 7");
  EXPECT_EQ(names[std::make_pair(int64_t{1000000000}, int64_t{8})], "stream 8");

  // Kernels: three valid ones on GPU 0 / stream 7, ts relative to 900 ns, in us.
  auto kernels = Events(doc, "X", "kernel");
  ASSERT_EQ(kernels.size(), 3u);
  const json& gemm = kernels[0];
  EXPECT_EQ(gemm["name"], "gemm()");
  EXPECT_EQ(gemm["pid"], 1000000000);
  EXPECT_EQ(gemm["tid"], 7);
  EXPECT_DOUBLE_EQ(gemm["ts"].get<double>(), 4.1);
  EXPECT_DOUBLE_EQ(gemm["dur"].get<double>(), 1.0);
  EXPECT_EQ(gemm["args"]["mangled"], "_Z4gemmv");
  EXPECT_EQ(gemm["args"]["grid"], json({128, 2, 1}));
  EXPECT_EQ(gemm["args"]["correlation"], 1);
  EXPECT_EQ(gemm["args"]["key_path"], "step#0");
  EXPECT_EQ(gemm["args"]["key_hash"], "000000001234abcd");
  EXPECT_EQ(kernels[1]["args"]["graph_id"], 9);

  auto copies = Events(doc, "X", "memcpy");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0]["name"], "Memcpy HtoD");
  EXPECT_EQ(copies[0]["args"]["bytes"], 4096);
  EXPECT_DOUBLE_EQ(copies[0]["dur"].get<double>(), 0.3);
  ASSERT_EQ(Events(doc, "X", "memset").size(), 1u);

  // API calls on CPU thread tracks.
  auto apis = Events(doc, "X", "cuda_runtime");
  ASSERT_EQ(apis.size(), 3u);
  EXPECT_EQ(apis[0]["name"], "cudaLaunchKernel");
  EXPECT_EQ(apis[0]["pid"], 4242);
  EXPECT_EQ(apis[0]["tid"], 4242);
  EXPECT_EQ(apis[2]["tid"], 4243);
  EXPECT_DOUBLE_EQ(apis[0]["ts"].get<double>(), 0.1);

  // NVTX: push/pop as X, start/end as b/e, mark as instant.
  auto nvtx = Events(doc, "X", "nvtx");
  ASSERT_EQ(nvtx.size(), 1u);
  EXPECT_EQ(nvtx[0]["name"], "step");
  EXPECT_DOUBLE_EQ(nvtx[0]["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(nvtx[0]["dur"].get<double>(), 8.1);
  ASSERT_EQ(Events(doc, "b", "nvtx").size(), 1u);
  ASSERT_EQ(Events(doc, "e", "nvtx").size(), 1u);
  EXPECT_EQ(Events(doc, "b", "nvtx")[0]["id"], 11);
  ASSERT_EQ(Events(doc, "i", "nvtx").size(), 1u);
  EXPECT_EQ(Events(doc, "i", "launch").size(), 4u);

  // Flows: one per GPU activity whose correlation id has an API call:
  // corr 1 (kernel), 2 (memcpy), 3 (two graph kernels). The memset (corr 5)
  // and the invalid kernel (corr 4) have none.
  auto starts = Events(doc, "s", "flow");
  auto ends = Events(doc, "f", "flow");
  ASSERT_EQ(starts.size(), 4u);
  ASSERT_EQ(ends.size(), 4u);
  std::set<uint64_t> start_ids, end_ids;
  for (const auto& s : starts) start_ids.insert(s["id"].get<uint64_t>());
  for (const auto& e : ends) {
    end_ids.insert(e["id"].get<uint64_t>());
    EXPECT_EQ(e["bp"], "e");
    EXPECT_EQ(e["pid"], 1000000000);
  }
  EXPECT_EQ(start_ids, end_ids);
  EXPECT_EQ(start_ids, (std::set<uint64_t>{1u << 16, 2u << 16, 3u << 16, (3u << 16) | 1}));
  // Each flow point lies inside the slice it binds to.
  for (const auto& s : starts) {
    double ts = s["ts"];
    bool inside = false;
    for (const auto& a : apis)
      inside |=
          a["tid"] == s["tid"] && a["ts"].get<double>() <= ts && ts <= a["ts"].get<double>() + a["dur"].get<double>();
    EXPECT_TRUE(inside) << s.dump();
  }
}

TEST_F(ChromeExportTest, ShadowTraceHasPerSmTracks) {
  testing::WriteShadowTrace(trace_);
  auto r = ExportChrome(trace_, out_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  json doc = Load(out_);
  std::set<std::string> threads;
  std::string blocks_process;
  for (const auto& m : Events(doc, "M")) {
    if (m["pid"] != 1100000000) continue;
    if (m["name"] == "thread_name") threads.insert(m["args"]["name"].get<std::string>());
    if (m["name"] == "process_name") blocks_process = m["args"]["name"];
  }
  EXPECT_EQ(blocks_process, "GPU 0 thread blocks by SM");
  EXPECT_EQ(threads, (std::set<std::string>{"SM 0", "SM 1", "traced launches"}));
  auto blocks = Events(doc, "X", "block");
  ASSERT_EQ(blocks.size(), 5u);
  for (const auto& b : blocks) {
    EXPECT_EQ(b["name"], "probe_k");
    EXPECT_EQ(b["pid"], 1100000000);
    EXPECT_EQ(b["tid"], b["args"]["sm"]);
  }
  EXPECT_EQ(blocks[3]["args"]["block_linear"], 3);
  EXPECT_DOUBLE_EQ(blocks[3]["dur"].get<double>(), 1.97);
  auto spans = Events(doc, "X", "launch");
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0]["args"]["seq"], 1);
  EXPECT_EQ(spans[0]["args"]["blocks"], 4);
  EXPECT_EQ(spans[0]["args"]["blocks_expected"], 4);
  EXPECT_EQ(spans[1]["args"]["blocks"], 1);
  // Base = earliest timestamp: launch cpu_ns 101; the first block enters at 1000.
  EXPECT_EQ(doc["otherData"]["base_ns"], 101);
  EXPECT_DOUBLE_EQ(spans[0]["ts"].get<double>(), 0.899);
  EXPECT_DOUBLE_EQ(spans[0]["dur"].get<double>(), 2.0);
}

TEST_F(ChromeExportTest, CorruptTraceExportsWhatWasReadable) {
  testing::WritePrimaryTrace(trace_, 2000);
  ASSERT_TRUE(testing::CorruptChunk(trace_, 20));
  auto r = ExportChrome(trace_, out_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->report.end, ReadEnd::kCorrupt);
  EXPECT_GT(r->report.records, 0u);
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_NE(r->warnings[0].find("corrupt"), std::string::npos);
  json doc = Load(out_);  // still a complete JSON document
  EXPECT_EQ(doc["otherData"]["read_end"], "corrupt");
  EXPECT_GT(Events(doc, "X", "kernel").size(), 0u);
}

TEST_F(ChromeExportTest, Errors) {
  auto missing = ExportChrome("/nonexistent/x.tsc", out_);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/x.tsc"), std::string::npos);
  testing::WritePrimaryTrace(trace_);
  auto unwritable = ExportChrome(trace_, "/nonexistent/dir/out.json");
  ASSERT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.status().message().find("cannot write /nonexistent/dir/out.json"), std::string::npos);
}

TEST_F(ChromeExportTest, EscapesNamesAndReplacesInvalidUtf8) {
  {
    std::string error;
    WriterOptions o;
    o.path = trace_;
    auto w = TraceWriter::Open(o, {{"role", "primary"}, {"pid", 1}}, &error);
    ASSERT_TRUE(w) << error;
    KernelRecord k{};
    k.name = w->Intern(std::string("k<\"q\">\\\n\xff\xc3\xa9", 11));
    k.start_ns = 10;
    k.end_ns = 20;
    w->Append(k);
    ASSERT_TRUE(w->Close(&error));
  }
  auto r = ExportChrome(trace_, out_);
  ASSERT_TRUE(r.ok());
  json doc = Load(out_);
  auto kernels = Events(doc, "X", "kernel");
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0]["name"], "k<\"q\">\\\n?\xc3\xa9");
}

}  // namespace
}  // namespace twinscope::exporters
