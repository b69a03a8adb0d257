// Stands in for a traced program in the CLI tests. Modes:
//   print-env CODE    print the injection environment, exit CODE
//   write-trace CODE  like print-env, and write a sample primary trace to
//                     $TWINSCOPE_OUTPUT as a collector would
//   wait-signal READY catch SIGTERM/SIGINT (exit 42), create READY, wait
//   wait-default READY create READY, wait with default signal handling
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "sample_trace.h"

namespace {

void PrintEnv() {
  for (const char* name : {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "TWINSCOPE_OUTPUT", "TWINSCOPE_KINDS",
                           "TWINSCOPE_KERNELS_ONLY", "TWINSCOPE_BUFFER_SIZE_KB", "TWINSCOPE_DEVICE_BUFFER_POOL_LIMIT",
                           "TWINSCOPE_FLUSH_MS", "TWINSCOPE_KERNELS", "TWINSCOPE_EVERY", "TWINSCOPE_MAX_LAUNCHES",
                           "TWINSCOPE_PER_SECOND", "TWINSCOPE_BUDGET", "TWINSCOPE_BLOCKS_PATCH"}) {
    const char* v = std::getenv(name);
    std::printf("%s=%s\n", name, v ? v : "<unset>");
  }
  std::fflush(stdout);
}

void Ready(const char* path) {
  FILE* f = std::fopen(path, "w");
  if (f) std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 99;
  const std::string mode = argv[1];
  if (mode == "print-env") {
    PrintEnv();
    return std::atoi(argv[2]);
  }
  if (mode == "write-trace") {
    PrintEnv();
    const char* out = std::getenv("TWINSCOPE_OUTPUT");
    if (!out) return 98;
    twinscope::testing::WritePrimaryTrace(out);
    return std::atoi(argv[2]);
  }
  if (mode == "wait-signal") {
    struct sigaction sa {};
    sa.sa_handler = [](int) { _exit(42); };
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    Ready(argv[2]);
    for (;;) pause();
  }
  if (mode == "wait-default") {
    Ready(argv[2]);
    for (;;) pause();
  }
  return 99;
}
