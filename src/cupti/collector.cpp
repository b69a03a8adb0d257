#include "cupti/collector.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>

#include "base/env_names.h"
#include "base/log.h"
#include "base/settings.h"
#include "cupti/callbacks.h"
#include "cupti/cupti_api.h"
#include "cupti/cupti_check.h"
#include "cupti/guard_report.h"
#include "format/header.h"
#include "format/stop_request.h"

namespace twinscope::cupti {

// Host activity buffers outstanding at most this many bytes together.
static constexpr size_t kHostPoolBytes = 256u << 20;
// How long a terminating signal waits for the final flush.
static constexpr int kSignalFlushWaitMs = 3000;

namespace {

Collector* g_collector = nullptr;
struct sigaction g_prev_action[NSIG];
bool g_handler_installed[NSIG] = {};
std::atomic<bool> g_in_signal_flush{false};

uint64_t Clock() {
  uint64_t t = 0;
  if (GetTimestamp(&t) == CUPTI_SUCCESS) return t;
  return MonotonicNs();
}

void WriteByte(int fd) {
  if (fd < 0) return;
  char b = 1;
  ssize_t r = write(fd, &b, 1);
  (void)r;
}

void OnTerminatingSignal(int sig, siginfo_t* info, void* ucontext) {
  int saved_errno = errno;
  const struct sigaction& prev = g_prev_action[sig];
  bool default_action = !(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_DFL;
  if (g_collector && !g_in_signal_flush.exchange(true)) {
    g_collector->FlushFromSignal(default_action);
    g_in_signal_flush.store(false);
  }
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) prev.sa_sigaction(sig, info, ucontext);
  } else if (prev.sa_handler == SIG_DFL) {
    // Restore the default action and re-raise: the signal is blocked while we
    // run, so it is delivered (and ends the process) when we return.
    sigaction(sig, &prev, nullptr);
    raise(sig);
  } else if (prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
  }
  errno = saved_errno;
}

void InstallSignalHandlers() {
  for (int sig : {SIGTERM, SIGINT}) {
    struct sigaction prev {};
    if (sigaction(sig, nullptr, &prev) != 0) continue;
    if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_IGN) continue;  // the program ignores it: keep so
    struct sigaction sa {};
    sa.sa_sigaction = OnTerminatingSignal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    g_prev_action[sig] = prev;
    if (sigaction(sig, &sa, nullptr) == 0) g_handler_installed[sig] = true;
  }
}

void AtExit() {
  Firewall("atexit", [] {
    if (g_collector) g_collector->Finalize();
  });
}

// Blocks SIGTERM/SIGINT in threads we create, so the application's threads
// receive them.
class BlockTerminatingSignals {
 public:
  BlockTerminatingSignals() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    pthread_sigmask(SIG_BLOCK, &s, &old_);
  }
  ~BlockTerminatingSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

}  // namespace

// ---- Config ------------------------------------------------------------------

Config Config::FromEnv() {
  settings::WarnUnknown(environ);  // a misspelt TWINSCOPE_* variable is named, with the closest known one
  Config c;
  c.output = EnvString(env::kOutput, "twinscope-" + std::to_string(getpid()) + ".tsc");
  // Every other setting through the one table and policy (base/settings.h): a bad value is warned about
  // once and its default used.
  c.kernels_only = settings::Flag(env::kKernelsOnly);
  const std::vector<std::string> kinds = settings::List(env::kKinds);  // default: all
  auto has = [](const std::vector<std::string>& v, const char* k) {
    return std::find(v.begin(), v.end(), k) != v.end();
  };
  c.write_kernel = has(kinds, "kernel");
  c.write_memcpy = has(kinds, "memcpy");
  c.write_memset = has(kinds, "memset");
  c.write_api = has(kinds, "api");
  c.write_nvtx = has(kinds, "nvtx");
  const std::vector<std::string> skip = settings::List(env::kCuptiSkip);
  if (!skip.empty()) {
    LogError("%s=%s: benchmark mode, the trace is missing what is skipped", env::kCuptiSkip,
             settings::Text(env::kCuptiSkip).c_str());
    static constexpr std::pair<const char*, bool Config::*> kSteps[] = {
        {"pending", &Config::skip_pending}, {"capture", &Config::skip_capture}, {"stream", &Config::skip_stream},
        {"key", &Config::skip_key},         {"clock", &Config::skip_clock},     {"callback", &Config::skip_callback}};
    for (const auto& [step, member] : kSteps) c.*member = has(skip, step);
  }
  c.api_nested = settings::Flag(env::kApiNested);
  c.bench_levels = settings::Flag(env::kBenchLevels);
  if (c.bench_levels)
    LogError("%s=1: benchmark mode, the program may switch tracing off; the trace misses what it does then",
             env::kBenchLevels);
  c.buffer_bytes = static_cast<size_t>(settings::Int(env::kBufferSizeKb)) << 10;
  c.device_buffer_pool_limit = settings::Int(env::kDeviceBufferPoolLimit);
  c.device_buffer_size_mb = settings::Int(env::kDeviceBufferSizeMb);
  c.flush_ms = settings::Int(env::kFlushMs);
  c.max_buffered_bytes = static_cast<size_t>(settings::Int(env::kMaxBufferedMb)) << 20;
  c.max_pending_keys = static_cast<size_t>(settings::Int(env::kMaxPendingLaunches));
  return c;
}

nlohmann::json Config::ToJson() const {
  nlohmann::json kinds = nlohmann::json::array();
  if (write_kernel) kinds.push_back("kernel");
  if (write_memcpy) kinds.push_back("memcpy");
  if (write_memset) kinds.push_back("memset");
  if (write_api) kinds.push_back("api");
  if (write_nvtx) kinds.push_back("nvtx");
  nlohmann::json activity = nlohmann::json::array({"CONCURRENT_KERNEL"});
  if (!kernels_only) {
    activity.push_back("MEMCPY");
    activity.push_back("MEMSET");
  }
  return {{"written_kinds", kinds},
          {"activity_kinds_enabled", activity},
          {"kernels_only", kernels_only},
          {"graph_mitigation", !kernels_only},
          {"host_buffer_bytes", buffer_bytes},
          {"device_buffer_pool_limit", device_buffer_pool_limit},
          {"device_buffer_size_mb", device_buffer_size_mb},
          {"flush_ms", flush_ms},
          {"max_buffered_bytes", max_buffered_bytes},
          {"max_pending_launch_keys", max_pending_keys},
          {"api_records_of_nested_calls", api_nested},
          // Every setting this collector reads, as in effect (base/settings.h), and any value rejected.
          {"settings", settings::HeaderJson(settings::kCupti)}};
}

// ---- BufferPool --------------------------------------------------------------

uint8_t* BufferPool::Acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!free_.empty()) {
    uint8_t* b = free_.back();
    free_.pop_back();
    return b;
  }
  if (allocated_ >= max_) return nullptr;
  void* p = std::aligned_alloc(8, bytes_);
  if (!p) return nullptr;
  allocated_++;
  return static_cast<uint8_t*>(p);
}

void BufferPool::Release(uint8_t* buffer) {
  if (!buffer) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.size() < 4) {
    free_.push_back(buffer);
    return;
  }
  std::free(buffer);
  allocated_--;
}

// ---- Start -------------------------------------------------------------------

namespace {
// The launch tracker's output: the trace (on the collector's threads).
class TraceSink : public LaunchSink {
 public:
  explicit TraceSink(TraceWriter* w) : w_(w) {}
  StringId InternPath(std::string_view path) override { return w_->Intern(path); }
  void WriteLaunches(const LaunchRecord* records, size_t n) override { w_->AppendMany(records, n); }
  void WriteApi(const ApiRecord& record) override { w_->Append(record); }

 private:
  TraceWriter* w_;
};
}  // namespace

Collector* Collector::Instance() { return g_collector; }

void Collector::Start() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto* c = new Collector();  // never deleted: CUPTI may call in until exit
    Firewall("InitializeInjection", [c] { c->StartLocked(); });
  });
}

void Collector::SetToolState(const std::string& state, const std::string& message, int cupti_result,
                             const std::string& other_subscriber) {
  std::lock_guard<std::mutex> lock(tool_state_mu_);
  nlohmann::json program = tool_state_.value("program_cupti", nlohmann::json());
  tool_state_ = {{"state", state}, {"message", message}};
  if (!program.is_null()) tool_state_["program_cupti"] = program;
  if (cupti_result) tool_state_["cupti_result"] = cupti_result;
  if (!other_subscriber.empty()) tool_state_["other_subscriber"] = other_subscriber;
  if (!cupti_library_.empty()) tool_state_["cupti_library"] = cupti_library_;
  if (writer_) writer_->SetMetadata("tool_state", tool_state_);
  // A collector that could not collect keeps its trace to say why (views skip it as one without GPU work).
  if (writer_ && state != "collecting") writer_->KeepFile();
}

void Collector::StartLocked() {
  pid_ = getpid();
  config_ = Config::FromEnv();

  std::string load_error;
  bool have_cupti = LoadCupti(&MutableCupti(), &cupti_library_, &load_error);
  if (have_cupti && config_.skip_clock) {
    // TWINSCOPE_CUPTI_SKIP=clock (benchmarks only): API times from the host clock, to measure what
    // cuptiGetTimestamp costs. Swapped in the table, so the knob costs the launch path nothing.
    MutableCupti().GetTimestamp = [](uint64_t* t) -> CUptiResult {
      *t = MonotonicNs();
      return CUPTI_SUCCESS;
    };
  }
  LoadDriver(&MutableDriver());

  nlohmann::json header = BaseHeader("primary");
  header["collector"] = "cupti";
  header["config"] = config_.ToJson();
  // One reading of the collector's clock beside CLOCK_REALTIME, so tools can
  // put this trace's times beside another process's (the join's --concurrent).
  header["clock"] = {{"cupti_ns", Clock()}, {"realtime_ns", RealtimeNs()}};
  header["cupti_api_version_compiled"] = CUPTI_API_VERSION;
  if (have_cupti) {
    if (Cupti().version) header["cupti_version"] = Cupti().version;
    header["cupti_library"] = cupti_library_;
    header["cupti_multi_subscriber"] = Cupti().multi_subscriber;
  }
  int driver_version = 0;
  if (Driver().DriverGetVersion && Driver().DriverGetVersion(&driver_version) == CUDA_SUCCESS)
    header["cuda_driver_version"] = driver_version;

  {
    BlockTerminatingSignals block;  // the writer's thread inherits the mask
    WriterOptions wo;
    wo.path = config_.output;
    wo.per_process = true;  // a file or folder shared by the process tree (docs/trace-format.md, "Run folders")
    wo.max_buffered_bytes = config_.max_buffered_bytes;
    std::string error;
    writer_ = TraceWriter::Open(wo, header, &error);
    if (!writer_) {
      LogError("cannot write the trace: %s; the program runs on without tracing (set %s to a writable path)",
               error.c_str(), env::kOutput);
      return;
    }
    config_.output = writer_->path();  // the file this process claimed
  }

  TraceWriter* w = writer_.get();
  launch_sink_ = std::make_unique<TraceSink>(w);
  LaunchTrackerOptions lo;
  lo.max_pending_keys = config_.max_pending_keys;
  lo.skip_key = config_.skip_key;
  lo.skip_pending = config_.skip_pending;
  launches_ = std::make_unique<LaunchTracker>(lo, launch_sink_.get(), &loss_);
  launches_->SetWake([this] {
    // From an application thread, without completed_mu_: a wake-up lost to
    // the race costs at most a drain by the full ring's own thread.
    drain_requested_.store(true, std::memory_order_release);
    completed_cv_.notify_all();
  });
  kernel_names_ = std::make_unique<KernelNames>([w](std::string_view s) { return w->Intern(s); });
  graphs_ = std::make_unique<GraphRegistry>([w](std::string_view s) { return w->Intern(s); });
  names_ = std::make_unique<NameCache>([w](std::string_view s) { return w->Intern(s); });
  size_t max_buffers = std::max<size_t>(4, kHostPoolBytes / config_.buffer_bytes);
  pool_ = std::make_unique<BufferPool>(config_.buffer_bytes, max_buffers);
  {
    BlockTerminatingSignals block;
    process_thread_ = std::thread([this] { Firewall("buffer processing thread", [this] { ProcessLoop(); }); });
    process_started_.store(true, std::memory_order_release);
  }
  g_collector = this;
  SetNvtxListener(config_.write_nvtx ? this : nullptr, &Clock);

  if (!have_cupti) {
    SetToolState("cupti_unavailable", load_error, 0);
    LogError("%s; the program runs on without CUDA tracing", load_error.c_str());
  } else {
    try {
      SetupCupti();
    } catch (const SetupError& e) {
      if (tool_state_.empty() || tool_state_.value("state", "") == "collecting") {
        SetToolState("cupti_error", e.what(), e.result());
        LogError("CUPTI setup failed: %s; the program runs on without CUDA tracing", e.what());
      }
    }
  }

  atexit(AtExit);
  pthread_atfork(nullptr, nullptr, [] {
    // A forked child has none of our threads: it must not touch the trace.
    if (g_collector) g_collector->collecting_.store(false);
    g_collector = nullptr;
  });
  if (pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) wake_pipe_[0] = wake_pipe_[1] = -1;
  {
    BlockTerminatingSignals block;
    flush_thread_ = std::thread([this] { Firewall("flush thread", [this] { FlushLoop(); }); });
  }
  InstallSignalHandlers();
  PublishCounters();
}

void Collector::SetupCupti() {
  const CuptiApi& api = Cupti();
  CUpti_SubscriberHandle subscriber = nullptr;
  auto trampoline = [](void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    Firewall("CUPTI callback", [&] { static_cast<Collector*>(user)->OnCallback(domain, cbid, data); });
  };
  // TWINSCOPE_CUPTI_SKIP=callback (benchmarks only): API callbacks return at once. Chosen here, so the
  // knob costs the launch path nothing.
  auto resources_only = [](void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    if (domain != CUPTI_CB_DOMAIN_RESOURCE) return;
    Firewall("CUPTI callback", [&] { static_cast<Collector*>(user)->OnCallback(domain, cbid, data); });
  };
  std::string other;
  CUptiResult r = Subscribe(&subscriber, config_.skip_callback ? +resources_only : +trampoline, this, &other);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    std::string who = !other.empty() ? " (CUPTI names it: \"" + other + "\")" : "";
    std::string msg =
        api.multi_subscriber
            ? "another CUPTI client holds CUPTI in this process in single-subscriber mode (Nsight Systems/Compute, "
              "the Compute Sanitizer, or a profiler that subscribed before twinscope with the legacy API)" +
                  who + "; run without it, or use `twinscope twin`"
            : "another CUPTI-based tool (Nsight Systems/Compute, a profiler, or the Compute Sanitizer) holds "
              "CUPTI in this process" +
                  who + "; run without it, or use `twinscope twin`";
    SetToolState("cupti_held_by_other_tool", msg, r, other);
    LogError("%s. No CUDA activity is traced; the program runs on.", msg.c_str());
    throw SetupError(msg, r);
  }
  CUPTI_SETUP(r);

  subscriber_ = subscriber;
  EnableApiCallbacks(subscriber);
  for (CUpti_CallbackId id : {CUPTI_CBID_RESOURCE_CONTEXT_CREATED, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
                              CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING,
                              CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATE_STARTING, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED,
                              CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING})
    CUPTI_SETUP(api.EnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, id));

  if (config_.device_buffer_size_mb > 0) {
    size_t v = static_cast<size_t>(config_.device_buffer_size_mb) << 20, sz = sizeof v;
    CUPTI_SETUP(ActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &v));
  }
  if (config_.device_buffer_pool_limit > 0) {
    size_t v = static_cast<size_t>(config_.device_buffer_pool_limit), sz = sizeof v;
    CUPTI_SETUP(ActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, &sz, &v));
  }
  auto requested = [](uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = nullptr;
    *size = 0;
    *max_records = 0;
    Firewall("CUPTI buffer request", [&] {
      if (Collector* c = Instance()) c->OnBufferRequested(buffer, size, max_records);
    });
  };
  auto completed = [](CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
    Firewall("CUPTI buffer completion", [&] {
      if (Collector* c = Instance()) c->OnBufferCompleted(ctx, stream, buffer, size, valid);
    });
  };
  CUPTI_SETUP(ActivityRegisterCallbacks(requested, completed));
  // Seed 001: with CUDA graphs holding memcpy/memset nodes, kernel-only
  // activity starves CUPTI's device buffer pool and records stop silently.
  // Enabling the three kinds together avoids it (CUPTI 13.5 no longer loses
  // them here, FACTS.md, but the mitigation stays on with every CUPTI).
  CUPTI_SETUP(EnableActivity(true));
  collecting_.store(true, std::memory_order_release);
  const std::string mode = api.multi_subscriber ? " (CUPTI multi-subscriber mode: the program's own CUPTI client "
                                                  "can subscribe beside twinscope)"
                                                : "";
  SetToolState("collecting",
               (config_.kernels_only ? "kernel activity only (TWINSCOPE_KERNELS_ONLY=1: graph mitigation off)"
                                     : "kernel, memcpy and memset activity") +
                   mode,
               0);
  LogInfo("CUPTI collector writing %s (%s)", config_.output.c_str(),
          config_.kernels_only ? "kernels only: seed-001 mitigation OFF" : "kernels, copies, memsets");
}

void Collector::EnableApiCallbacks(CUpti_SubscriberHandle subscriber) {
  const CuptiApi& api = Cupti();
  auto enable = [&](CUpti_CallbackDomain domain, uint32_t size, std::vector<StringId>* names) {
    names->assign(size, 0);
    for (uint32_t cbid = 1; cbid < size; ++cbid) {
      const char* name = nullptr;
      if (api.GetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name) continue;
      if (ClassifyLaunch(domain, cbid).api == LaunchApi::kNone && !IsCopyApi(name)) continue;
      CUPTI_SETUP(api.EnableCallback(1, subscriber, domain, cbid));
      (*names)[cbid] = writer_->Intern(CleanApiName(name));
    }
  };
  enable(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE, &runtime_names_);
  enable(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE, &driver_names_);
}

CUptiResult Collector::EnableActivity(bool enable) {
  std::vector<CUpti_ActivityKind> kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL};
  if (!config_.kernels_only) kinds.insert(kinds.end(), {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET});
  for (CUpti_ActivityKind k : kinds)
    if (CUptiResult r = enable ? ActivityEnable(k) : ActivityDisable(k); r != CUPTI_SUCCESS) return r;
  return CUPTI_SUCCESS;
}

int Collector::SetBenchLevel(int level) {
  if (!config_.bench_levels || level < 0 || level > 2 || !collecting()) return -1;
  std::lock_guard<std::mutex> lock(bench_mu_);
  const CuptiApi& api = Cupti();
  // The API callbacks EnableApiCallbacks enabled: those it named.
  for (const auto& [domain, names] :
       {std::pair{CUPTI_CB_DOMAIN_RUNTIME_API, &runtime_names_}, std::pair{CUPTI_CB_DOMAIN_DRIVER_API, &driver_names_}})
    for (CUpti_CallbackId cbid = 0; cbid < names->size(); ++cbid)
      if ((*names)[cbid] != 0)
        if (CUptiResult r = api.EnableCallback(level == 2 ? 1 : 0, subscriber_, domain, cbid); r != CUPTI_SUCCESS)
          return static_cast<int>(r);
  return static_cast<int>(EnableActivity(level >= 1));
}

// ---- Periodic and final flush ---------------------------------------------------

void Collector::PublishCounters() {
  if (!writer_) return;
  loss_.Publish(*writer_, launches_ ? launches_->evicted_keys() : 0, NvtxUnbalanced());
  PublishProgramCupti();
}

void Collector::PublishProgramCupti() {
  auto report = GuardReport();
  if (!report) return;
  std::lock_guard<std::mutex> lock(tool_state_mu_);
  if (tool_state_.value("program_cupti", nlohmann::json()) == *report) return;
  tool_state_["program_cupti"] = std::move(*report);
  writer_->SetMetadata("tool_state", tool_state_);
}

void Collector::FlushLoop() {
  using Clock = std::chrono::steady_clock;
  const std::chrono::milliseconds period(config_.flush_ms > 0 ? config_.flush_ms : 0);
  Clock::time_point next = Clock::now() + period;
  StopRequest stop_request;  // TWINSCOPE_CONTROL_DIR (format/stop_request.h)
  for (;;) {
    // Ticks one period apart, start to start, however long a flush takes.
    int timeout = stop_request.active() ? 500 : -1;  // without periodic flushes, still look for the stop request
    if (period.count() > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
      timeout = static_cast<int>(std::clamp<long long>(left, 0, period.count()));
    }
    if (wake_pipe_[0] >= 0) {
      struct pollfd p {
        wake_pipe_[0], POLLIN, 0
      };
      int r = poll(&p, 1, timeout);
      if (r > 0) {
        char buf[64];
        while (read(wake_pipe_[0], buf, sizeof buf) > 0) {
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(timeout >= 0 ? timeout : 100));
    }
    if (stop_.load()) return;
    if (period.count() > 0 && Clock::now() >= next) next = std::max(next + period, Clock::now());
    int request = signal_request_.exchange(0);
    if (request == 2) {
      Finalize();
      signal_done_.store(true);
      return;
    }
    if (collecting()) CUPTI_CHECK(Cupti().ActivityFlushAll(request ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0));
    // Bounded by the period: a processing backlog must not make the counters older than that.
    const long long wait_ms = std::clamp<long long>(config_.flush_ms, 1, 1000);
    WaitForProcessing(std::chrono::milliseconds(request ? kSignalFlushWaitMs / 2 : wait_ms));
    // Every period, all counters and the records counted so far go into the
    // file, followed by a STATUS: a killed process's counters are at most one
    // period old (docs/trace-format.md).
    PublishCounters();
    if (writer_) writer_->Checkpoint();
    if (request) signal_done_.store(true);
    if (stop_request.Due()) {
      // The stop request (docs/trace-format.md): everything CUPTI holds, then a SUMMARY marked
      // "at_stop_request", on disk before the acknowledgement. The program runs on; its exit, if
      // clean, writes the final SUMMARY.
      if (collecting()) CUPTI_CHECK(Cupti().ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
      WaitForProcessing(std::chrono::seconds(2));
      PublishCounters();
      const bool on_disk = writer_ && writer_->SummaryAtStopRequest(std::chrono::seconds(5));
      LogInfo("stop request: summary written to %s%s", config_.output.c_str(),
              on_disk ? "" : " (not on disk after 5 s)");
      stop_request.Acknowledge(on_disk);
    }
  }
}

void Collector::FlushFromSignal(bool terminating) {
  if (getpid() != pid_ || finalized_.load()) return;
  signal_done_.store(false);
  signal_request_.store(terminating ? 2 : 1);
  WriteByte(wake_pipe_[1]);
  struct timespec ms {
    0, 1000000
  };
  for (int i = 0; i < kSignalFlushWaitMs && !signal_done_.load(); ++i) nanosleep(&ms, nullptr);
}

void Collector::Finalize() {
  if (getpid() != pid_) return;           // a forked child
  if (finalized_.exchange(true)) return;  // once, whoever comes first (atexit or a signal)
  stop_.store(true);
  WriteByte(wake_pipe_[1]);
  if (flush_thread_.joinable() && flush_thread_.get_id() != std::this_thread::get_id()) flush_thread_.join();
  if (collecting()) CUPTI_CHECK(Cupti().ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  // Every completed buffer is written before the trace closes.
  if (!WaitForProcessing(std::chrono::seconds(10)))
    LogError("CUPTI buffers were still being processed after 10 s at exit; their records are not in %s",
             config_.output.c_str());
  FlushOpenNvtxRanges();
  collecting_.store(false);
  if (!writer_) return;
  PublishCounters();
  uint64_t missing = loss_.Missing();
  if (missing > 0)
    LogError("%llu of %llu kernel launches got no kernel record from CUPTI (counter kernel_records_missing in %s)",
             static_cast<unsigned long long>(missing), static_cast<unsigned long long>(loss_.launches_seen.load()),
             config_.output.c_str());
  std::string error;
  if (!writer_->Close(&error)) LogError("closing %s failed: %s", config_.output.c_str(), error.c_str());
}

// ---- Buffers -------------------------------------------------------------------

void Collector::OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  uint8_t* b = pool_ ? pool_->Acquire() : nullptr;
  if (!b) {
    loss_.buffer_requests_denied.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  *buffer = b;
  *size = pool_->buffer_bytes();
  *max_records = 0;
}

void Collector::OnBufferCompleted(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t size, size_t valid) {
  (void)size;
  loss_.buffers_completed.fetch_add(1, std::memory_order_relaxed);
  size_t dropped = 0;
  if (CUPTI_CHECK(ActivityGetNumDroppedRecords(ctx, stream_id, &dropped)) && dropped)
    loss_.cupti_dropped.fetch_add(dropped, std::memory_order_relaxed);
  if (!buffer || valid == 0) {
    if (buffer) pool_->Release(buffer);
    return;
  }
  if (!process_started_.load(std::memory_order_acquire)) {
    ProcessBuffer(buffer, valid);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(completed_mu_);
    completed_.push_back({buffer, valid});
  }
  completed_cv_.notify_all();
}

void Collector::ProcessLoop() {
  std::unique_lock<std::mutex> lock(completed_mu_);
  for (;;) {
    completed_cv_.wait(lock,
                       [this] { return !completed_.empty() || drain_requested_.load(std::memory_order_acquire); });
    if (completed_.empty()) {  // a launch ring passed half full
      drain_requested_.store(false, std::memory_order_relaxed);
      lock.unlock();
      Firewall("launch processing", [&] { launches_->Drain(); });
      lock.lock();
      continue;
    }
    CompletedBuffer b = completed_.front();
    completed_.pop_front();
    processing_ = true;
    lock.unlock();
    Firewall("CUPTI buffer processing", [&] { ProcessBuffer(b.buffer, b.valid); });
    lock.lock();
    processing_ = false;
    completed_cv_.notify_all();
  }
}

bool Collector::WaitForProcessing(std::chrono::milliseconds timeout) {
  if (!process_started_.load(std::memory_order_acquire)) return true;
  std::unique_lock<std::mutex> lock(completed_mu_);
  return completed_cv_.wait_for(lock, timeout, [this] { return completed_.empty() && !processing_; });
}

void Collector::ProcessBuffer(uint8_t* buffer, size_t valid) {
  struct Return {
    BufferPool* pool;
    uint8_t* b;
    ~Return() { pool->Release(b); }
  } give_back{pool_.get(), buffer};
  std::lock_guard<std::mutex> lock(buffer_mu_);
  ParsedBuffer parsed;
  ParseBuffer(buffer, valid, ActivityGetNextRecord, *names_, &parsed);
  launches_->Drain();  // the launches of these records, queued by their threads
  for (KernelRecord& k : parsed.kernels) {
    switch (launches_->Resolve(k.correlation_id, k.graph_node_id, k.name, &k.key)) {
      case PendingLaunches::Match::kExact:
        break;
      case PendingLaunches::Match::kFallback:
        k.flags |= kFlagKeyFallback;
        loss_.kernel_key_fallback.fetch_add(1, std::memory_order_relaxed);
        break;
      case PendingLaunches::Match::kNone:
        k.flags |= kFlagNoLaunchKey;
        loss_.kernel_no_key.fetch_add(1, std::memory_order_relaxed);
        break;
    }
  }
  if (parsed.iterator_error) {
    loss_.buffer_errors.fetch_add(1, std::memory_order_relaxed);
    static std::atomic<int> reports{0};
    if (reports.fetch_add(1) < 3)
      LogError("reading a CUPTI activity buffer stopped early: %s; the rest of that buffer is lost (counter %s)",
               ResultString(parsed.error).c_str(), "cupti_buffer_errors");
  }
  if (config_.write_kernel && !parsed.kernels.empty())
    writer_->AppendMany(parsed.kernels.data(), parsed.kernels.size());
  if (config_.write_memcpy && !parsed.memcpys.empty())
    writer_->AppendMany(parsed.memcpys.data(), parsed.memcpys.size());
  if (config_.write_memset && !parsed.memsets.empty())
    writer_->AppendMany(parsed.memsets.data(), parsed.memsets.size());
  // Counted once appended (release: PublishCounters' acquire load), so a
  // STATUS never counts a record that is not staged before it.
  loss_.kernel_records.fetch_add(parsed.kernels.size(), std::memory_order_release);
  loss_.kernel_invalid.fetch_add(parsed.kernel_invalid, std::memory_order_relaxed);
  loss_.memcpy_records.fetch_add(parsed.memcpys.size(), std::memory_order_release);
  loss_.memset_records.fetch_add(parsed.memsets.size(), std::memory_order_release);
  loss_.copy_invalid.fetch_add(parsed.copy_invalid, std::memory_order_relaxed);
  loss_.other_records.fetch_add(parsed.other, std::memory_order_relaxed);
}

// ---- NVTX and devices --------------------------------------------------------------

void Collector::OnNvtx(const NvtxEvent& e) {
  if (!writer_ || finalized_.load(std::memory_order_relaxed)) return;
  writer_->Append(ToNvtxRecord(e, [this](std::string_view s) { return writer_->Intern(s); }));
  loss_.nvtx_records.fetch_add(1, std::memory_order_relaxed);
}

void Collector::RecordDevice(CUcontext ctx) {
  uint32_t ordinal = 0;
  if (!CUPTI_CHECK(Cupti().GetDeviceId(ctx, &ordinal))) return;
  nlohmann::json d = {{"ordinal", ordinal}};
  const DriverApi& drv = Driver();
  CUdevice dev;
  if (drv.DeviceGet && drv.DeviceGet(&dev, static_cast<int>(ordinal)) == CUDA_SUCCESS) {
    char name[256] = {};
    if (drv.DeviceGetName && drv.DeviceGetName(name, sizeof name - 1, dev) == CUDA_SUCCESS) d["name"] = name;
    int v = 0, major = 0, minor = 0;
    if (drv.DeviceGetAttribute) {
      if (drv.DeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == CUDA_SUCCESS) d["sm_count"] = v;
      if (drv.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == CUDA_SUCCESS &&
          drv.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == CUDA_SUCCESS)
        d["compute_capability"] = std::to_string(major) + "." + std::to_string(minor);
    }
    CUuuid uuid;
    if (drv.DeviceGetUuid && drv.DeviceGetUuid(&uuid, dev) == CUDA_SUCCESS) {
      static const char* hex = "0123456789abcdef";
      std::string s = "GPU-";
      for (int i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
        unsigned char b = static_cast<unsigned char>(uuid.bytes[i]);
        s += hex[b >> 4];
        s += hex[b & 15];
      }
      d["uuid"] = s;
    }
  }
  std::lock_guard<std::mutex> lock(devices_mu_);
  for (const auto& known : devices_)
    if (known.value("ordinal", ~0u) == ordinal) return;
  devices_.push_back(d);
  writer_->SetMetadata("devices", devices_);
}

}  // namespace twinscope::cupti
