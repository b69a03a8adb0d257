// Before any trace: the no-GPU check (record says so first and exits with the program's code; twin runs
// the program once), the Sanitizer API version, and `probe` when its child cannot load its library.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "probe/gpu_check.h"
#include "probe/probe.h"
#include "probe/sanitizer_version.h"

namespace twinscope::probe {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;
  std::string out, err;
};

std::string Slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class ProbeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(TWINSCOPE_TEST_WORKDIR) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  // `cmd` run by sh in dir_ with `env` (NAME=value ...) in front; stdout and stderr kept apart.
  Outcome Sh(const std::string& env, const std::string& cmd) {
    const std::string full = "cd '" + dir_.string() + "' && env -u LD_LIBRARY_PATH -u CUDA_VISIBLE_DEVICES " + env +
                             " " + cmd + " >out.txt 2>err.txt";
    Outcome o;
    const int status = std::system(full.c_str());
    o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    o.out = Slurp(dir_ / "out.txt");
    o.err = Slurp(dir_ / "err.txt");
    return o;
  }
  fs::path Script(const std::string& name, const std::string& body) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(p, fs::perms::owner_all);
    return p;
  }
  fs::path dir_;
};

// A child the loader cannot start: its stderr names the library, no result line, exit 127.
TEST(ProbeParse, LoaderErrorNamesTheLibrary) {
  ExperimentResult r;
  ParseChildOutput("", 127, false, &r,
                   "./twinscope_probe_child: error while loading shared libraries: libsanitizer-public.so: cannot "
                   "open shared object file: No such file or directory\n");
  EXPECT_FALSE(r.ran);
  EXPECT_EQ(r.missing_library, "libsanitizer-public.so");
  ProbeReport rep;
  rep.results.push_back(r);
  Conclude(&rep);
  EXPECT_EQ(rep.missing_library, "libsanitizer-public.so");
  EXPECT_NE(rep.summary.find(std::string("pip install '") + kSanitizerRequirement + "'"), std::string::npos)
      << rep.summary;
  EXPECT_EQ(ProbeExitCode(rep), 3);
  // Every experiment ran to the end: 0; one crashed: 3; no GPU: 1.
  ProbeReport ok;
  ExperimentResult ran;
  ran.ran = true;
  ran.launches = 3;
  ok.results = {ran, ran};
  Conclude(&ok);
  EXPECT_EQ(ProbeExitCode(ok), 0);
  ExperimentResult crashed;
  ParseChildOutput("", 139, false, &crashed);
  ok.results.push_back(crashed);
  Conclude(&ok);
  EXPECT_EQ(ProbeExitCode(ok), 3);
  ProbeReport none;
  ExperimentResult no_gpu;
  ParseChildOutput(R"({"no_gpu":"cudaGetDeviceCount: no CUDA-capable device"})", 3, false, &no_gpu);
  none.results.push_back(no_gpu);
  Conclude(&none);
  EXPECT_EQ(ProbeExitCode(none), 1);
}

#ifdef TWINSCOPE_BIN
// Issue 32: the installed wheel without the Sanitizer API (pip --no-deps): every child exits 127; the
// probe said "summary: UNKNOWN" and exited 0.
TEST_F(ProbeCli, ChildThatCannotLoadItsLibraryIsANonZeroExitWithThePipCommand) {
  const fs::path child = Script("child.sh",
                                "echo \"$0: error while loading shared libraries: libsanitizer-public.so: cannot open "
                                "shared object file: No such file or directory\" >&2\nexit 127");
  Outcome o = Sh("", std::string(TWINSCOPE_BIN) + " probe --child " + child.string() + " --json p.json");
  EXPECT_EQ(o.code, 3) << o.out << o.err;
  EXPECT_NE(o.err.find("cannot load libsanitizer-public.so"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("pip install 'nvidia-cuda-sanitizer-api>=13.0.85"), std::string::npos) << o.err;
  const std::string json = Slurp(dir_ / "p.json");
  EXPECT_NE(json.find("\"missing_library\": \"libsanitizer-public.so\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"exit_code\": 3"), std::string::npos) << json;
}

// Issue 32: without a driver, `record` said so only after the program ran ("no trace with GPU work").
TEST_F(ProbeCli, RecordWithoutLibcudaSaysNoGpuFirstAndExitsWithTheProgramsCode) {
  Outcome o = Sh("TWINSCOPE_LIBCUDA=/nonexistent/libcuda.so.1",
                 std::string(TWINSCOPE_BIN) + " record -o t.tsc -- sh -c 'echo ran >>ran.txt'");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.err.rfind("twinscope record: no usable NVIDIA GPU here: no NVIDIA driver: /nonexistent/libcuda.so.1", 0),
            0u)
      << "not the first line:\n"
      << o.err;
  EXPECT_EQ(Slurp(dir_ / "ran.txt"), "ran\n");
  o = Sh("TWINSCOPE_LIBCUDA=/nonexistent/libcuda.so.1",
         std::string(TWINSCOPE_BIN) + " record -o t.tsc -- sh -c 'exit 7'");
  EXPECT_EQ(o.code, 7) << o.err;
}

#ifdef TWINSCOPE_HAVE_BLOCKS
// `blocks` names the Sanitizer API its collector will load, with the version, before the program runs.
TEST_F(ProbeCli, BlocksNamesTheSanitizerApiItLoads) {
  Outcome o = Sh("TWINSCOPE_LIBCUDA=/nonexistent/libcuda.so.1",
                 std::string(TWINSCOPE_BIN) + " blocks --kernel k -o b.tsc -- true");
  EXPECT_EQ(o.code, 0) << o.err;
  const size_t at = o.err.find("twinscope blocks: Compute Sanitizer API ");
  ASSERT_NE(at, std::string::npos) << o.err;
  EXPECT_LT(at, o.err.find("the program exited")) << o.err;
  EXPECT_NE(o.err.find("libsanitizer-public.so", at), std::string::npos) << o.err;
}
#endif

// `twin` without a usable GPU ran the program twice, then said nothing was traced. Now: said first, the
// program once, exit 1 where it exited 0 (nothing joined), its own code otherwise.
TEST_F(ProbeCli, TwinWithoutGpuRunsTheProgramOnce) {
  Outcome o =
      Sh("CUDA_VISIBLE_DEVICES=", std::string(TWINSCOPE_BIN) + " twin --kernel k -o run -- sh -c 'echo ran >>ran.txt'");
  EXPECT_EQ(o.code, 1) << o.err;
  EXPECT_EQ(o.err.rfind("twinscope twin: no usable NVIDIA GPU here: CUDA_VISIBLE_DEVICES is set to \"\"", 0), 0u)
      << o.err;
  EXPECT_EQ(Slurp(dir_ / "ran.txt"), "ran\n");
  o = Sh("TWINSCOPE_LIBCUDA=/nonexistent/libcuda.so.1",
         std::string(TWINSCOPE_BIN) + " twin --kernel k -o run -- sh -c 'exit 5'");
  EXPECT_EQ(o.code, 5) << o.err;
}
#endif

TEST_F(ProbeCli, GpuCheckNamesWhyNot) {
  ASSERT_EQ(setenv("TWINSCOPE_LIBCUDA", "/nonexistent/libcuda.so.1", 1), 0);
  GpuCheck c = CheckGpu();
  EXPECT_FALSE(c.usable);
  EXPECT_TRUE(c.finished);
  EXPECT_NE(c.reason.find("/nonexistent/libcuda.so.1 cannot be loaded"), std::string::npos) << c.reason;
  // Not a driver library at all.
  ASSERT_EQ(setenv("TWINSCOPE_LIBCUDA", "libc.so.6", 1), 0);
  c = CheckGpu();
  EXPECT_FALSE(c.usable);
  EXPECT_NE(c.reason.find("not an NVIDIA driver library"), std::string::npos) << c.reason;
#ifdef FAKE_CUDA_DIR
  // The tests' fake driver counts as one GPU (record and twin over the fakes run as on a GPU machine).
  ASSERT_EQ(setenv("TWINSCOPE_LIBCUDA", FAKE_CUDA_DIR "/libcuda.so.1", 1), 0);
  c = CheckGpu();
  EXPECT_TRUE(c.usable) << c.reason;
  EXPECT_EQ(c.devices, 1);
  EXPECT_EQ(c.driver_version, 13000);
  // CUDA_VISIBLE_DEVICES="" hides every device, whatever the driver.
  ASSERT_EQ(setenv("CUDA_VISIBLE_DEVICES", "", 1), 0);
  c = CheckGpu();
  EXPECT_FALSE(c.usable);
  EXPECT_NE(c.reason.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << c.reason;
  unsetenv("CUDA_VISIBLE_DEVICES");
#endif
  // A driver too old for the cu13 libraries: named with its version.
  ASSERT_EQ(setenv("TWINSCOPE_LIBCUDA", OLD_DRIVER_LIB, 1), 0);
  c = CheckGpu();
  EXPECT_FALSE(c.usable);
  EXPECT_EQ(c.devices, 1);
  EXPECT_EQ(c.driver_version, 12040);
  EXPECT_NE(c.reason.find("supports CUDA 12.4 only"), std::string::npos) << c.reason;
  unsetenv("TWINSCOPE_LIBCUDA");
  EXPECT_EQ(DriverVersionText(12040), "CUDA 12.4");
}

// The version of a pip wheel's library from its dist-info; a warning outside the measured list.
TEST_F(ProbeCli, SanitizerVersionFromTheWheelAndAWarningOutsideTheMeasuredOnes) {
  for (const std::string v : {"13.0.85", "13.3.75", "13.5.25"}) {
    const fs::path site = dir_ / v;
    fs::create_directories(site / "nvidia/cu13/lib");
    fs::create_directories(site / ("nvidia_cuda_sanitizer_api-" + v + ".dist-info"));
    std::ofstream(site / "nvidia/cu13/lib/libsanitizer-public.so") << "";
    std::string source;
    EXPECT_EQ(SanitizerVersionAt((site / "nvidia/cu13/lib/libsanitizer-public.so").string(), &source), v);
    EXPECT_EQ(source, "pip package nvidia-cuda-sanitizer-api");
    SanitizerLibrary s;
    s.resolved = true;
    s.path = (site / "nvidia/cu13/lib/libsanitizer-public.so").string();
    s.version = v;
    const std::string line = DescribeSanitizer(s, "twinscope blocks");
    EXPECT_NE(line.find("twinscope blocks: Compute Sanitizer API " + v + " at "), std::string::npos) << line;
    EXPECT_EQ(line.find("warning") != std::string::npos, !SanitizerVersionMeasured(v)) << line;
  }
  EXPECT_TRUE(SanitizerVersionMeasured("13.0.85"));
  EXPECT_TRUE(SanitizerVersionMeasured("13.5.25"));
  EXPECT_FALSE(SanitizerVersionMeasured("13.3.75"));  // inside the range, never run on a GPU: warned of
  SanitizerLibrary missing;
  missing.missing = true;
  EXPECT_NE(DescribeSanitizer(missing, "twinscope blocks").find("pip install"), std::string::npos);
  EXPECT_EQ(PipRequirementFor("libsanitizer-public.so"), kSanitizerRequirement);
}

#ifdef TWINSCOPE_TEST_PROBE_CHILD
// The probe child as built here needs the Sanitizer API: the loader names the file it resolves to.
TEST(SanitizerResolve, TheBuiltChildResolvesItsLibrary) {
  const SanitizerLibrary s = ResolveSanitizer(TWINSCOPE_TEST_PROBE_CHILD);
  ASSERT_TRUE(s.resolved) << s.error;
  EXPECT_NE(s.path.find("libsanitizer-public.so"), std::string::npos) << s.path;
  // Hidden from the loader: said missing.
  const SanitizerLibrary none = ResolveSanitizer("/bin/sh");
  EXPECT_FALSE(none.resolved);
  EXPECT_FALSE(none.missing);
}
#endif

}  // namespace
}  // namespace twinscope::probe
