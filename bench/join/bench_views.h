// What the join benches measure after a join: the process's peak RSS, and every view written and timed.
#pragma once

#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "bench_traces.h"
#include "join/joined_run.h"
#include "views/join_writer.h"

namespace twinscope::bench {

// This process's peak resident set so far, in MB (getrusage's KiB on Linux).
inline long PeakRssMb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

// Writes every view of `run` (join.json, Perfetto, SQLite, the report) into DIR/out, their text to /dev/null,
// and prints how long that took and the peak RSS after it. 0 when every view was written.
inline int WriteViewsTimed(join::JoinedRun* run, const std::string& dir, const char* who) {
  const std::string out = dir + "/out";
  mkdir(out.c_str(), 0755);
  const auto t0 = std::chrono::steady_clock::now();
  FILE* devnull = std::fopen("/dev/null", "w");
  const bool ok = views::WriteJoinViews(run, out, devnull, who);
  std::fclose(devnull);
  std::printf("views (join.json, Perfetto, SQLite, report): %s in %.1f s, peak RSS %ld MB\n", ok ? "written" : "FAILED",
              Seconds(t0), PeakRssMb());
  return ok ? 0 : 1;
}

}  // namespace twinscope::bench
