#include "probe/probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "abi/cupti_versions.h"
#include "probe/probe_experiments.h"
#include "probe/sanitizer_version.h"

extern char** environ;

namespace twinscope::probe {
namespace {

uint64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

struct ChildRun {
  std::string out, err;
  int exit_code = -1;
  bool timed_out = false;
  std::string spawn_error;
};

// Runs `argv` with stdout captured, stderr captured and passed on, killed after `timeout_s`,
// with `cupti` (if given) preloaded as its libcupti.
ChildRun RunChild(const std::vector<std::string>& argv, int timeout_s, const std::string& cupti) {
  ChildRun r;
  int fds[2], efds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  if (pipe2(efds, O_CLOEXEC) != 0) {
    close(fds[0]);
    close(fds[1]);
    r.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, efds[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The child must not inherit injected collectors: it measures the bare stack.
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("CUDA_INJECTION64_PATH=", 0) == 0 || kv.rfind("NVTX_INJECTION64_PATH=", 0) == 0) continue;
    if (!cupti.empty() && (kv.rfind("LD_PRELOAD=", 0) == 0 || kv.rfind("TWINSCOPE_CUPTI_LIBRARY=", 0) == 0)) continue;
    env.push_back(kv);
  }
  if (!cupti.empty()) {
    env.push_back("LD_PRELOAD=" + cupti);  // its SONAME stands for the libcupti.so.13 the child links
    env.push_back("TWINSCOPE_CUPTI_LIBRARY=" + cupti);
  }
  std::vector<char*> envp;
  for (auto& kv : env) envp.push_back(kv.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  close(efds[1]);
  if (rc != 0) {
    close(fds[0]);
    close(efds[0]);
    r.spawn_error = "cannot start " + argv[0] + ": " + std::strerror(rc);
    return r;
  }
  const uint64_t deadline = NowMs() + uint64_t(timeout_s) * 1000;
  char buf[4096];
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    const uint64_t now = NowMs();
    if (now >= deadline) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p[2] = {{out_open ? fds[0] : -1, POLLIN, 0}, {err_open ? efds[0] : -1, POLLIN, 0}};
    int n = poll(p, 2, int(deadline - now));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    for (int k = 0; k < 2; ++k) {
      if (!p[k].revents) continue;
      ssize_t got = read(p[k].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        (k == 0 ? out_open : err_open) = false;
        continue;
      }
      if (k == 0) {
        r.out.append(buf, size_t(got));
      } else {
        if (r.err.size() < 65536) r.err.append(buf, size_t(got));
        ssize_t off = 0;  // passed on: the child's own messages stay visible
        while (off < got) {
          const ssize_t w = write(2, buf + off, size_t(got - off));
          if (w <= 0) break;
          off += w;
        }
      }
    }
  }
  close(fds[0]);
  close(efds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return r;
}

std::string LastJsonLine(const std::string& out) {
  std::istringstream in(out);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty() && line[0] == '{') last = line;
  return last;
}

}  // namespace

bool ExperimentResult::CuptiGotData() const {
  return ran && launches > 0 && (cupti_kernel_records >= launches || cupti_launch_callbacks >= launches);
}

bool ExperimentResult::Cupti2GotData() const {
  return ran && launches > 0 && (cupti2_kernel_records >= launches || cupti2_launch_callbacks >= launches);
}

bool ExperimentResult::SanitizerGotData() const {
  return ran && launches > 0 && sanitizer_launch_callbacks >= launches;
}

// The library named by the dynamic loader's "error while loading shared libraries: LIB: ..." in `err`.
std::string LoaderMissingLibrary(const std::string& err) {
  const std::string key = "error while loading shared libraries: ";
  const size_t at = err.find(key);
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  const size_t colon = err.find(':', from);
  return colon == std::string::npos ? "" : err.substr(from, colon - from);
}

void ParseChildOutput(const std::string& out, int exit_code, bool timed_out, ExperimentResult* r,
                      const std::string& err) {
  if (timed_out) {
    r->failure = "timed out (killed)";
    return;
  }
  const std::string line = LastJsonLine(out);
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (line.empty() || j.is_discarded() || !j.is_object()) {
    r->missing_library = LoaderMissingLibrary(err);
    if (!r->missing_library.empty()) {
      r->failure =
          "could not start: " + r->missing_library + " cannot be loaded (exit code " + std::to_string(exit_code) + ")";
      return;
    }
    r->failure = exit_code >= 128 ? "crashed (signal " + std::to_string(exit_code - 128) + ")"
                                  : "no result (exit code " + std::to_string(exit_code) + ")";
    return;
  }
  r->cupti_library = j.value("cupti_library", std::string());
  r->cupti_version = j.value("cupti_version", uint32_t{0});
  if (j.contains("no_gpu")) {
    r->failure = "no GPU: " + j.value("no_gpu", std::string());
    return;
  }
  for (const auto& s : j.value("steps", nlohmann::json::array()))
    r->steps.push_back({s.value("call", std::string()), s.value("code", 0), s.value("name", std::string())});
  r->launches = j.value("launches", 0);
  r->cupti_kernel_records = j.value("cupti_kernel_records", int64_t{-1});
  r->cupti_launch_callbacks = j.value("cupti_launch_callbacks", int64_t{-1});
  r->cupti2_kernel_records = j.value("cupti2_kernel_records", int64_t{-1});
  r->cupti2_launch_callbacks = j.value("cupti2_launch_callbacks", int64_t{-1});
  r->sanitizer_launch_callbacks = j.value("sanitizer_launch_callbacks", int64_t{-1});
  if (j.contains("error")) r->failure = j.value("error", std::string());
  r->ran = exit_code == 0;
  if (!r->ran && r->failure.empty()) r->failure = "exit code " + std::to_string(exit_code);
}

namespace {

const ExperimentResult* Find(const ProbeReport& report, const std::string& id) {
  for (const ExperimentResult& r : report.results)
    if (r.id == id) return &r;
  return nullptr;
}

std::string FirstFailedStep(const ExperimentResult& r) {
  for (const StepResult& s : r.steps)
    if (s.code != 0) return s.call + " -> " + std::to_string(s.code) + " " + s.name;
  return r.failure.empty() ? "a client got no data" : r.failure;
}

// Whether two CUPTI clients can share this process (cupti_v2_* rows).
void ConcludeCuptiClients(ProbeReport* report) {
  for (const ExperimentResult& r : report->results) {
    if (report->cupti_library.empty() && !r.cupti_library.empty()) {
      report->cupti_library = r.cupti_library;
      report->cupti_version = r.cupti_version;
    }
  }
  report->cupti_clients_stack = false;
  report->cupti_summary.clear();
  const ExperimentResult* two = Find(*report, "cupti_v2_two_subscribers");
  if (!report->gpu || !two || !two->ran) return;
  const std::string cupti = "CUPTI " + CuptiVersionText(two->cupti_version) + " at " + two->cupti_library;
  report->cupti_clients_stack = two->CuptiGotData() && two->Cupti2GotData();
  if (!report->cupti_clients_stack) {
    report->cupti_summary = "NO: two CUPTI clients cannot share a process on " + cupti + " (" + FirstFailedStep(*two) +
                            "): a CUPTI client inside the program (torch.profiler) gets no data beside twinscope; "
                            "CUPTI 13.5 can (pip install nvidia-cuda-cupti==13.5.25)";
    return;
  }
  report->cupti_summary = "YES: two multi-subscriber (v2) CUPTI clients both got data for every launch on " + cupti;
  const ExperimentResult* legacy = Find(*report, "cupti_v2_then_v1");
  if (legacy && legacy->ran && !legacy->Cupti2GotData())
    report->cupti_summary += "; a legacy (v1) client beside them gets none (" + FirstFailedStep(*legacy) +
                             "): `twinscope record` serves it through its guard";
}

}  // namespace

void Conclude(ProbeReport* report) {
  report->gpu = true;
  for (const ExperimentResult& r : report->results) {
    if (r.failure.rfind("no GPU: ", 0) == 0) {
      report->gpu = false;
      report->no_gpu_reason = r.failure.substr(8);
      break;
    }
  }
  report->both_in_one_process = false;
  std::string which;
  size_t ran_both = 0;
  for (const ExperimentResult& r : report->results) {
    if (!(r.uses_cupti && r.uses_sanitizer) || !r.ran) continue;
    ++ran_both;
    if (r.CuptiGotData() && r.SanitizerGotData()) {
      report->both_in_one_process = true;
      if (which.empty()) which = r.order;
    }
  }
  ConcludeCuptiClients(report);
  report->all_ran = !report->results.empty();
  report->missing_library.clear();
  for (const ExperimentResult& r : report->results) {
    if (!r.ran) report->all_ran = false;
    if (report->missing_library.empty()) report->missing_library = r.missing_library;
  }
  if (!report->missing_library.empty()) {
    const std::string req = PipRequirementFor(report->missing_library);
    report->summary = "UNKNOWN: no experiment could start: the probe child cannot load " + report->missing_library +
                      (req.empty() ? std::string(" (see the loader's message above)")
                                   : "; install it with: pip install '" + req +
                                         "' (a dependency of the twinscope wheel; it is missing after --no-deps)");
  } else if (!report->gpu) {
    report->summary = "no usable NVIDIA GPU here (" + report->no_gpu_reason +
                      "): the coexistence of CUPTI and the Compute Sanitizer could not be tested";
  } else if (report->both_in_one_process) {
    report->summary = "YES: one process can hold CUPTI and the Compute Sanitizer on this stack (order: " + which +
                      "); both got data for every launch";
  } else if (ran_both == 0) {
    report->summary = "UNKNOWN: no experiment with both tools ran to the end (see the failures above)";
  } else {
    report->summary =
        "NO: one process cannot hold CUPTI and the Compute Sanitizer on this stack (in every order tried, one of "
        "them got no data); run them in two processes with `twinscope twin`";
  }
}

StatusOr<ProbeReport> RunProbe(const ProbeOptions& options) {
  struct stat st {};
  if (options.child_path.empty() || stat(options.child_path.c_str(), &st) != 0 || !(st.st_mode & S_IXUSR))
    return Status::Error("probe child program not found or not executable: '" + options.child_path +
                         "' (it is built with twinscope as twinscope_probe_child; pass --child PATH)");
  if (options.launches <= 0) return Status::Error("--launches must be > 0");
  for (const std::string& id : options.only)
    if (!FindExperiment(id)) return Status::Error("unknown experiment '" + id + "'");
  ProbeReport report;
  const SanitizerLibrary san = ResolveSanitizer(options.child_path);
  report.sanitizer_line = DescribeSanitizer(san, "twinscope probe");
  for (const Experiment& e : Experiments()) {
    if (!options.only.empty() && std::find(options.only.begin(), options.only.end(), e.id) == options.only.end())
      continue;
    ExperimentResult r;
    r.id = e.id;
    r.order = e.order;
    r.uses_cupti = e.uses_cupti;
    r.uses_sanitizer = e.uses_sanitizer;
    r.two_cupti_clients = e.two_cupti_clients;
    ChildRun c = RunChild({options.child_path, e.id, std::to_string(options.launches)}, options.timeout_s,
                          options.cupti_library);
    if (!c.spawn_error.empty()) return Status::Error(c.spawn_error);
    ParseChildOutput(c.out, c.exit_code, c.timed_out, &r, c.err);
    const bool no_gpu = r.failure.rfind("no GPU: ", 0) == 0;
    const bool cannot_load = !r.missing_library.empty();
    report.results.push_back(std::move(r));
    if (no_gpu || cannot_load) break;  // every other experiment would say the same
  }
  Conclude(&report);
  return report;
}

namespace {

std::string Count(int64_t v) { return v < 0 ? "-" : std::to_string(v); }

std::string StepsText(const ExperimentResult& r) {
  std::string s;
  for (const StepResult& st : r.steps) {
    if (!s.empty()) s += "; ";
    s += st.call + " -> " + (st.code == 0 ? std::string("OK") : std::to_string(st.code) + " " + st.name);
  }
  return s;
}

}  // namespace

std::string FormatTable(const ProbeReport& report) {
  std::ostringstream o;
  if (!report.results.empty() && report.gpu) {
    o << "Coexistence of CUPTI and the Compute Sanitizer, " << report.results.front().launches
      << " test launches per experiment, each in its own process";
    if (!report.cupti_library.empty())
      o << ", CUPTI " << CuptiVersionText(report.cupti_version) << " (API " << report.cupti_version << ") at "
        << report.cupti_library;
    o << ":\n";
    char line[512];
    std::snprintf(line, sizeof line, "%-34s %9s %9s %9s %9s %9s  %s\n", "experiment", "cupti_rec", "cupti_cb",
                  "cupti2_rec", "cupti2_cb", "san_cb", "calls (result)");
    o << line;
    for (const ExperimentResult& r : report.results) {
      std::snprintf(line, sizeof line, "%-34s %9s %9s %9s %9s %9s  ", r.id.c_str(),
                    Count(r.cupti_kernel_records).c_str(), Count(r.cupti_launch_callbacks).c_str(),
                    Count(r.cupti2_kernel_records).c_str(), Count(r.cupti2_launch_callbacks).c_str(),
                    Count(r.sanitizer_launch_callbacks).c_str());
      o << line << StepsText(r);
      if (!r.failure.empty()) o << (r.steps.empty() ? "" : "; ") << "FAILED: " << r.failure;
      o << "\n";
    }
  }
  o << "summary: " << report.summary << "\n";
  if (!report.cupti_summary.empty()) o << "CUPTI clients: " << report.cupti_summary << "\n";
  return o.str();
}

int ProbeExitCode(const ProbeReport& report) {
  if (!report.missing_library.empty()) return 3;
  if (!report.gpu) return 1;
  return report.all_ran ? 0 : 3;
}

nlohmann::json ToJson(const ProbeReport& report) {
  nlohmann::json j = {
      {"gpu", report.gpu}, {"both_in_one_process", report.both_in_one_process}, {"summary", report.summary}};
  if (!report.gpu) j["no_gpu_reason"] = report.no_gpu_reason;
  j["cupti_library"] = report.cupti_library;
  j["cupti_version"] = report.cupti_version;
  j["cupti_clients_stack"] = report.cupti_clients_stack;
  j["cupti_summary"] = report.cupti_summary;
  j["all_ran"] = report.all_ran;
  if (!report.missing_library.empty()) j["missing_library"] = report.missing_library;
  j["sanitizer"] = report.sanitizer_line;
  j["exit_code"] = ProbeExitCode(report);
  nlohmann::json list = nlohmann::json::array();
  for (const ExperimentResult& r : report.results) {
    nlohmann::json steps = nlohmann::json::array();
    for (const StepResult& s : r.steps) steps.push_back({{"call", s.call}, {"code", s.code}, {"name", s.name}});
    list.push_back({{"id", r.id},
                    {"order", r.order},
                    {"ran", r.ran},
                    {"failure", r.failure},
                    {"steps", steps},
                    {"launches", r.launches},
                    {"cupti_kernel_records", r.cupti_kernel_records},
                    {"cupti_launch_callbacks", r.cupti_launch_callbacks},
                    {"cupti2_kernel_records", r.cupti2_kernel_records},
                    {"cupti2_launch_callbacks", r.cupti2_launch_callbacks},
                    {"sanitizer_launch_callbacks", r.sanitizer_launch_callbacks},
                    {"cupti_got_data", r.CuptiGotData()},
                    {"sanitizer_got_data", r.SanitizerGotData()}});
  }
  j["experiments"] = list;
  return j;
}

}  // namespace twinscope::probe
