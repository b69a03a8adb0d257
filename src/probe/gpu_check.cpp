// The no-GPU check (probe/gpu_check.h): libcuda dlopened, cuInit and cuDeviceGetCount, in a child.
#include "probe/gpu_check.h"

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/env_names.h"

namespace twinscope::probe {
namespace {

// What the child writes to the pipe: "usable devices driver_version reason".
void ChildCheck(int fd) {
  auto say = [fd](int usable, int devices, int version, const std::string& reason) {
    const std::string line =
        std::to_string(usable) + " " + std::to_string(devices) + " " + std::to_string(version) + " " + reason;
    ssize_t left = static_cast<ssize_t>(line.size());
    const char* p = line.data();
    while (left > 0) {
      const ssize_t n = write(fd, p, static_cast<size_t>(left));
      if (n <= 0) break;
      p += n;
      left -= n;
    }
  };
  const char* name = std::getenv(env::kLibcuda);  // tests: a missing one stands for no driver
  const std::string lib = name && *name ? name : "libcuda.so.1";
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    say(0, 0, 0,
        "no NVIDIA driver: " + lib + " cannot be loaded (" + (e ? e : "?") +
            "); install the NVIDIA driver, or run on a machine with an NVIDIA GPU");
    return;
  }
  using InitFn = int (*)(unsigned);
  using IntFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(dlsym(h, "cuInit"));
  auto version = reinterpret_cast<IntFn>(dlsym(h, "cuDriverGetVersion"));
  auto count = reinterpret_cast<IntFn>(dlsym(h, "cuDeviceGetCount"));
  if (!init || !count) {
    say(0, 0, 0, lib + " has no cuInit or cuDeviceGetCount: not an NVIDIA driver library");
    return;
  }
  int v = 0;
  if (version && version(&v) != 0) v = 0;
  const int rc = init(0);
  if (rc != 0) {
    // 100: CUDA_ERROR_NO_DEVICE; 35: CUDA_ERROR_INSUFFICIENT_DRIVER; 999: unknown (often a driver/kernel
    // module mismatch).
    std::string why = "cuInit failed with CUresult " + std::to_string(rc);
    if (rc == 100) why = "the driver found no NVIDIA GPU (cuInit: CUDA_ERROR_NO_DEVICE)";
    if (rc == 35) why = "the driver is older than its CUDA library (cuInit: CUDA_ERROR_INSUFFICIENT_DRIVER)";
    say(0, 0, v, why);
    return;
  }
  int n = 0;
  if (count(&n) != 0) n = 0;
  if (n <= 0) {
    say(0, 0, v, "the driver counted no device (cuDeviceGetCount)");
    return;
  }
  if (v > 0 && v < kMinDriverVersion) {
    say(0, n, v,
        "the NVIDIA driver supports " + DriverVersionText(v) + " only; twinscope's CUDA 13 libraries (the cu13 " +
            "wheels of CUPTI and the Sanitizer API) need a driver for CUDA 13.0 or newer (R580+): update the driver");
    return;
  }
  say(1, n, v, "");
}

uint64_t GpuCheckNowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

}  // namespace

std::string DriverVersionText(int version) {
  return "CUDA " + std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

GpuCheck CheckGpu(int timeout_s) {
  GpuCheck c;
  if (const char* vis = std::getenv("CUDA_VISIBLE_DEVICES"); vis && !*vis) {
    c.reason = "CUDA_VISIBLE_DEVICES is set to \"\" (no device visible): unset it or name a device";
    return c;
  }
  auto unfinished = [&c](const std::string& why) {
    c.usable = true;
    c.finished = false;
    c.reason = why;
    return c;
  };
  int fds[2];
  if (pipe(fds) != 0) return unfinished(std::string("the GPU check could not start: pipe: ") + std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return unfinished(std::string("the GPU check could not start: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    ChildCheck(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  const uint64_t deadline = GpuCheckNowMs() + uint64_t(timeout_s) * 1000;
  bool timed_out = false;
  char buf[1024];
  for (;;) {
    const uint64_t now = GpuCheckNowMs();
    if (now >= deadline) {
      timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(deadline - now));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    const ssize_t got = read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return unfinished("the GPU check (cuInit) did not answer in " + std::to_string(timeout_s) + " s");
  int usable = 0, consumed = 0;
  if (std::sscanf(out.c_str(), "%d %d %d %n", &usable, &c.devices, &c.driver_version, &consumed) < 3)
    return unfinished(WIFSIGNALED(status)
                          ? "the GPU check crashed in the driver (signal " + std::to_string(WTERMSIG(status)) + ")"
                          : std::string("the GPU check gave no answer"));
  c.usable = usable == 1;
  c.reason = out.substr(static_cast<size_t>(consumed));
  return c;
}

}  // namespace twinscope::probe
