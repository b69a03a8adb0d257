// `twinscope probe`: parsing the children's results, the verdict on the
// FACTS.md matrix, and the real child on this machine (which has no GPU: it
// must say so and the CLI must exit non-zero).
#include "probe/probe.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "probe/probe_experiments.h"

namespace twinscope::probe {
namespace {

ExperimentResult Parse(const std::string& id, const std::string& line, int exit_code = 0) {
  const Experiment* e = FindExperiment(id);
  EXPECT_NE(e, nullptr) << id;
  ExperimentResult r;
  r.id = id;
  r.order = e ? e->order : "";
  r.uses_cupti = e && e->uses_cupti;
  r.uses_sanitizer = e && e->uses_sanitizer;
  ParseChildOutput("some noise\n" + line + "\n", exit_code, false, &r);
  return r;
}

std::string Line(const std::string& id, const std::string& steps, int rec, int cb, int san) {
  return R"({"experiment":")" + id + R"(","launches":10,"steps":[)" + steps + R"(],"cupti_kernel_records":)" +
         std::to_string(rec) + R"(,"cupti_launch_callbacks":)" + std::to_string(cb) +
         R"(,"sanitizer_launch_callbacks":)" + std::to_string(san) + "}";
}

const char kOk[] = R"({"call":"x","code":0,"name":"SUCCESS"})";
const char k39[] =
    R"J({"call":"cuptiActivityEnable(CONCURRENT_KERNEL)","code":39,"name":"CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"})J";

TEST(Probe, ExperimentsCoverSeed000) {
  for (const char* id :
       {"sanitizer_then_cupti_activity", "cupti_activity_then_sanitizer", "cupti_subscribe_then_sanitizer",
        "sanitizer_unsubscribe_then_cupti", "cupti_unsubscribe_then_sanitizer", "cupti_finalize_then_sanitizer"})
    EXPECT_NE(FindExperiment(id), nullptr) << id;
}

TEST(Probe, FactsMatrixMeansNo) {
  ProbeReport rep;
  rep.results.push_back(
      Parse("sanitizer_then_cupti_activity",
            Line("sanitizer_then_cupti_activity", std::string(kOk) + "," + k39 + "," + k39, 0, 0, 10)));
  rep.results.push_back(
      Parse("cupti_activity_then_sanitizer",
            Line("cupti_activity_then_sanitizer", std::string(kOk) + "," + kOk + "," + kOk, 10, 0, 0)));
  rep.results.push_back(Parse("sanitizer_alone", Line("sanitizer_alone", kOk, 0, 0, 10)));
  Conclude(&rep);
  EXPECT_TRUE(rep.gpu);
  EXPECT_FALSE(rep.both_in_one_process);
  EXPECT_EQ(rep.summary.rfind("NO:", 0), 0u) << rep.summary;
  EXPECT_NE(rep.summary.find("twinscope twin"), std::string::npos);
  EXPECT_TRUE(rep.results[0].SanitizerGotData());
  EXPECT_FALSE(rep.results[0].CuptiGotData());
  ASSERT_EQ(rep.results[0].steps.size(), 3u);
  EXPECT_EQ(rep.results[0].steps[1].code, 39);
  std::string table = FormatTable(rep);
  EXPECT_NE(table.find("39 CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"), std::string::npos) << table;
  auto j = ToJson(rep);
  EXPECT_EQ(j["both_in_one_process"], false);
  EXPECT_EQ(j["experiments"][0]["sanitizer_launch_callbacks"], 10);
}

TEST(Probe, BothGettingDataMeansYes) {
  ProbeReport rep;
  rep.results.push_back(Parse("cupti_subscribe_then_sanitizer",
                              Line("cupti_subscribe_then_sanitizer", std::string(kOk) + "," + kOk, 0, 10, 10)));
  Conclude(&rep);
  EXPECT_TRUE(rep.both_in_one_process);
  EXPECT_EQ(rep.summary.rfind("YES:", 0), 0u) << rep.summary;
}

TEST(Probe, SingleToolExperimentsDoNotCountAsBoth) {
  ProbeReport rep;
  rep.results.push_back(Parse("sanitizer_alone", Line("sanitizer_alone", kOk, 0, 0, 10)));
  rep.results.push_back(Parse("cupti_activity_alone", Line("cupti_activity_alone", kOk, 10, 0, 0)));
  Conclude(&rep);
  EXPECT_FALSE(rep.both_in_one_process);
  EXPECT_EQ(rep.summary.rfind("UNKNOWN:", 0), 0u) << rep.summary;
}

TEST(Probe, CrashesTimeoutsAndGarbageAreFailures) {
  ExperimentResult crash = Parse("sanitizer_alone", "", 139);
  EXPECT_FALSE(crash.ran);
  EXPECT_NE(crash.failure.find("signal 11"), std::string::npos) << crash.failure;
  ExperimentResult garbage = Parse("sanitizer_alone", "{not json", 0);
  EXPECT_FALSE(garbage.ran);
  ExperimentResult t;
  ParseChildOutput("", -1, true, &t);
  EXPECT_NE(t.failure.find("timed out"), std::string::npos);
}

// CUPTI 13.5 as FACTS.md measured it: two v2 clients both get everything; a
// legacy client beside a v2 one gets 14/39 (in either order it is the later
// one that loses); the Sanitizer still cannot share the process.
ProbeReport Cupti135Rows() {
  const std::string lib = R"("cupti_library":"/pip/nvidia/cu13/lib/libcupti.so.13","cupti_version":130500,)";
  auto line = [&](const std::string& id, const std::string& steps, int rec, int cb, int rec2, int cb2, int san) {
    std::string l = Line(id, steps, rec, cb, san);
    l.insert(1, lib);
    if (rec2 >= 0)
      l.insert(l.size() - 1, ",\"cupti2_kernel_records\":" + std::to_string(rec2) +
                                 ",\"cupti2_launch_callbacks\":" + std::to_string(cb2));
    return l;
  };
  const std::string ok = kOk,
                    r14 = R"({"call":"cuptiActivityRegisterCallbacks","code":14,"name":"CUPTI_ERROR_NOT_COMPATIBLE"})";
  const std::string r39 =
      R"J({"call":"cuptiSubscribe_v2(multi) A + activity","code":39,"name":"CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"})J";
  ProbeReport rep;
  rep.results.push_back(
      Parse("cupti_v2_two_subscribers", line("cupti_v2_two_subscribers", ok + "," + ok, 10, 10, 10, 10, 0)));
  rep.results.push_back(
      Parse("cupti_v2_then_v1", line("cupti_v2_then_v1", ok + "," + r14 + "," + r14 + "," + ok, 10, 10, 0, 0, 0)));
  rep.results.push_back(
      Parse("cupti_v1_then_v2", line("cupti_v1_then_v2", ok + "," + ok + "," + ok + "," + r39, 10, 10, 0, 0, 0)));
  rep.results.push_back(
      Parse("cupti_v2_then_sanitizer", line("cupti_v2_then_sanitizer", ok + "," + ok, 10, 10, -1, 0, 0)));
  rep.results.push_back(
      Parse("sanitizer_then_cupti_v2", line("sanitizer_then_cupti_v2", ok + "," + r39, 0, 0, -1, 0, 10)));
  return rep;
}

TEST(Probe, MultiSubscriberRowsSayCuptiClientsStack) {
  ProbeReport rep = Cupti135Rows();
  for (auto& r : rep.results) r.two_cupti_clients = FindExperiment(r.id)->two_cupti_clients;
  Conclude(&rep);
  EXPECT_TRUE(rep.cupti_clients_stack);
  EXPECT_FALSE(rep.both_in_one_process) << "v2 and the Sanitizer still do not share a process";
  EXPECT_EQ(rep.summary.rfind("NO:", 0), 0u) << rep.summary;
  EXPECT_EQ(rep.cupti_library, "/pip/nvidia/cu13/lib/libcupti.so.13");
  EXPECT_EQ(rep.cupti_version, 130500u);
  EXPECT_EQ(rep.cupti_summary.rfind("YES: two multi-subscriber (v2) CUPTI clients both got data", 0), 0u)
      << rep.cupti_summary;
  EXPECT_NE(rep.cupti_summary.find("a legacy (v1) client beside them gets none (cuptiActivityRegisterCallbacks -> 14 "
                                   "CUPTI_ERROR_NOT_COMPATIBLE)"),
            std::string::npos)
      << rep.cupti_summary;
  EXPECT_TRUE(rep.results[0].Cupti2GotData());
  EXPECT_FALSE(rep.results[1].Cupti2GotData());
  const std::string table = FormatTable(rep);
  EXPECT_NE(table.find("CUPTI 13.5 (API 130500) at /pip/nvidia/cu13/lib/libcupti.so.13"), std::string::npos) << table;
  EXPECT_NE(table.find("cupti2_rec"), std::string::npos) << table;
  EXPECT_NE(table.find("CUPTI clients: YES"), std::string::npos) << table;
  auto j = ToJson(rep);
  EXPECT_EQ(j["cupti_clients_stack"], true);
  EXPECT_EQ(j["experiments"][0]["cupti2_kernel_records"], 10);
}

TEST(Probe, WithoutMultiSubscriberModeCuptiClientsDoNotStack) {
  ProbeReport rep;
  const std::string none =
      R"J({"call":"cuptiSubscribe_v2(multi) A + activity","code":-1,"name":"NOT_IN_THIS_CUPTI (multi-subscriber mode needs CUPTI 13.5)"})J";
  std::string l = Line("cupti_v2_two_subscribers", none + "," + none, 0, 0, 0);
  l.insert(1, R"("cupti_library":"/usr/local/cuda/lib64/libcupti.so.13","cupti_version":130001,)");
  rep.results.push_back(Parse("cupti_v2_two_subscribers", l));
  Conclude(&rep);
  EXPECT_FALSE(rep.cupti_clients_stack);
  EXPECT_EQ(rep.cupti_summary.rfind("NO: two CUPTI clients cannot share a process on CUPTI 13.0 at "
                                    "/usr/local/cuda/lib64/libcupti.so.13",
                                    0),
            0u)
      << rep.cupti_summary;
  EXPECT_NE(rep.cupti_summary.find("pip install nvidia-cuda-cupti==13.5.25"), std::string::npos);
}

#ifdef FAKE_CUPTI135_LIB
// The children use the libcupti they are given (preloaded): the probe names it
// even on a machine without a GPU.
TEST(Probe, ChildrenUseTheGivenCupti) {
  ProbeOptions o;
  o.child_path = TWINSCOPE_TEST_PROBE_CHILD;
  o.launches = 3;
  o.cupti_library = FAKE_CUPTI135_LIB;
  o.only = {"cupti_v2_two_subscribers"};
  auto rep = RunProbe(o);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_FALSE(rep->gpu);
  EXPECT_EQ(rep->cupti_library, FAKE_CUPTI135_LIB);
  EXPECT_EQ(rep->cupti_version, 130500u);
}
#endif

TEST(Probe, RealChildWithoutGpuSaysSo) {
  ProbeOptions o;
  o.child_path = TWINSCOPE_TEST_PROBE_CHILD;
  o.launches = 3;
  auto rep = RunProbe(o);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_FALSE(rep->gpu)
      << "this test expects a machine without a GPU (CI); on a GPU machine use scripts/gpu_blocks.sh";
  EXPECT_NE(rep->no_gpu_reason.find("cudaGetDeviceCount"), std::string::npos) << rep->no_gpu_reason;
  EXPECT_NE(rep->summary.find("no usable NVIDIA GPU"), std::string::npos) << rep->summary;
  EXPECT_EQ(rep->results.size(), 1u) << "stops after the first child reports no GPU";
}

TEST(Probe, MissingChildIsAClearError) {
  ProbeOptions o;
  o.child_path = "/nonexistent/twinscope_probe_child";
  auto rep = RunProbe(o);
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find("--child"), std::string::npos);
  o.child_path = TWINSCOPE_TEST_PROBE_CHILD;
  o.only = {"no_such_experiment"};
  EXPECT_FALSE(RunProbe(o).ok());
}

#ifdef TWINSCOPE_TEST_CLI
TEST(Probe, CliWithoutGpuExitsNonZeroWithMessage) {
  std::string cmd =
      std::string(TWINSCOPE_TEST_CLI) + " probe --child " + TWINSCOPE_TEST_PROBE_CHILD + " --json /dev/null 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  std::array<char, 512> buf;
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(out.find("no usable NVIDIA GPU"), std::string::npos) << out;
  EXPECT_NE(out.find("cudaGetDeviceCount"), std::string::npos) << out;
}
#endif

}  // namespace
}  // namespace twinscope::probe
