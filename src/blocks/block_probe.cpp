// libtwinscope_blocks.so's entry points: InitializeInjection, the Sanitizer
// callback dispatch, the trace's header and counters, and exit.
//
// Exit (the H200 crashed at exit after ~1900 launches of a patched kernel were
// given null launch data and Shutdown had unsubscribed; see Shutdown):
// - A selected launch that is not traced (sampled out, no buffer) is never
//   handed null: it gets the context's "off" buffer, a zeroed header
//   (capacity 0) on which the patch returns at once, so the Sanitizer sees the
//   same kind of launch data as for traced launches.
// - Shutdown (atexit) does not unsubscribe and frees nothing handed to the
//   Sanitizer; the patch image is a static array. Callbacks that come later
//   (module unloads, context teardown, launches from static destructors)
//   return at once on an atomic flag, before touching any thread_local or
//   other object that exit may have destroyed; a late launch of a patched
//   module still gets the off buffer.
#include "blocks/block_probe.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/env_names.h"
#include "base/log.h"
#include "base/settings.h"
#include "blocks/coexistence.h"
#include "blocks/probe_callbacks.h"
#include "format/header.h"
#include "twinscope/counters.h"

namespace twinscope::blocks {

std::atomic<bool> g_shut_down{false};
thread_local bool tl_in_callback = false;
std::atomic<bool> g_call_log{false};

void CallLog(const char* fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "twinscope calls [%llu] %s\n", static_cast<unsigned long long>(CurrentThreadId()), line);
  std::fflush(stderr);
}

const char* ResultString(SanitizerResult r) {
  const char* s = nullptr;
  if (sanitizerGetResultString(r, &s) != SANITIZER_SUCCESS || s == nullptr) return "unknown Sanitizer error";
  return s;
}

namespace {

using counters::kBlocksLost;
using counters::kGraphKernelNodeLaunches;
using counters::kSanitizerErrors;

std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void SANITIZERAPI Callback(void* userdata, Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid,
                           const void* data) {
  if (g_shut_down.load(std::memory_order_acquire)) {
    // After Shutdown (during exit): nothing but keeping patches off.
    if (data == nullptr) return;
    Firewall("block probe Sanitizer callback after exit", [&] {
      if (domain == SANITIZER_CB_DOMAIN_LAUNCH && cbid == SANITIZER_CBID_LAUNCH_BEGIN) {
        BlockProbe::Get().OnLaunchAfterShutdown(*static_cast<const Sanitizer_LaunchData*>(data), false);
      } else if (domain == SANITIZER_CB_DOMAIN_GRAPHS && cbid == SANITIZER_CBID_GRAPHS_NODE_LAUNCH_BEGIN) {
        const auto& g = *static_cast<const Sanitizer_GraphNodeLaunchData*>(data);
        if (g.nodeType == CU_GRAPH_NODE_TYPE_KERNEL && !g.isGraphUpload)
          BlockProbe::Get().OnLaunchAfterShutdown(g.launchData, true);
      } else if (domain == SANITIZER_CB_DOMAIN_RESOURCE && cbid == SANITIZER_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
        BlockProbe::Get().OnContextDestroyAfterShutdown(
            static_cast<const Sanitizer_ResourceContextData*>(data)->context);
      }
    });
    return;
  }
  if (tl_in_callback) {
    // Work we started ourselves (memset, copies): not the application's.
    return;
  }
  tl_in_callback = true;
  TWINSCOPE_CALL_LOG("callback domain %d cbid %u in", int(domain), unsigned(cbid));
  Firewall("block probe Sanitizer callback", [&] { BlockProbe::Get().OnCallback(domain, cbid, data); });
  TWINSCOPE_CALL_LOG("callback domain %d cbid %u out", int(domain), unsigned(cbid));
  tl_in_callback = false;
}

void AtExit() {
  Firewall("block probe exit", [] { BlockProbe::Get().Shutdown(); });
}

}  // namespace

int BlockProbe::Initialize() {
  std::lock_guard<std::mutex> lock(mu_);
  if (initialized_) return 1;
  initialized_ = true;
  auto config = ConfigFromEnv();
  if (!config.ok()) {
    // Leave a trace that says why, so `twinscope join/stats` report it instead of a missing file.
    const std::string msg = "block probe disabled: " + config.status().message();
    LogError("%s", msg.c_str());
    disabled_ = true;
    WriterOptions wo;
    wo.path = EnvString(twinscope::env::kOutput, "twinscope-blocks-" + std::to_string(getpid()) + ".tsc");
    wo.per_process = true;
    nlohmann::json header = BaseHeader("shadow");
    header["collector"] = "blocks";
    std::string error;
    if (auto w = TraceWriter::Open(wo, header, &error)) {
      w->SetMetadata("tool_state", "config_error");
      w->SetMetadata("tool_message", msg);
      w->KeepFile();  // it says why nothing was traced
      w->Close(&error);
    }
    return 1;
  }
  config_ = std::move(*config);
  g_call_log.store(config_.call_log, std::memory_order_relaxed);
  selector_ = std::make_unique<KernelSelector>(config_.patterns);
  sampler_ = std::make_unique<Sampler>(config_.sampling);
  if (selector_->empty())
    LogError(
        "block probe: TWINSCOPE_KERNELS is empty, so no kernel is traced (give substrings or \"re:<regex>\", "
        "';'-separated)");

  nlohmann::json header = BaseHeader("shadow");
  header["collector"] = "blocks";
  header["kernels"] = config_.patterns_spec;
  header["every"] = config_.sampling.every;
  header["max_launches"] = config_.sampling.max_launches;
  // What was sampled and why: with the counters launches_matching and
  // launches_traced, "1 in N launches"; per launch, the kFlagSample* flags.
  header["sampling"] = {{"every", config_.sampling.every},
                        {"max_launches", config_.sampling.max_launches},
                        {"per_second", config_.sampling.per_second},
                        {"budget_pct", config_.sampling.budget_pct},
                        {"patch", PatchModeName(config_.patch)}};
  header["ring"] = config_.ring;
  header["max_slots"] = config_.max_slots;
  if (config_.naive) header["naive"] = true;
  header["clock"] = {{"launch_cpu_ns", "CLOCK_MONOTONIC"}, {"block_ns", "GPU %globaltimer"}};
  // Period of the STATUS chunks (0: the writer's own), through the settings table like the rest.
  const long long flush_ms = settings::Int(twinscope::env::kFlushMs);
  header["flush_ms"] = flush_ms;
  header["settings"] = settings::HeaderJson(settings::kBlocks);  // every setting it reads, as in effect
  WriterOptions wo;
  wo.path = config_.output;
  wo.per_process = true;  // a file or folder shared by the process tree (docs/trace-format.md, "Run folders")
  wo.max_buffered_bytes = config_.max_buffered_bytes;
  std::string error;
  writer_ = TraceWriter::Open(wo, header, &error);
  if (!writer_) {
    LogError("block probe disabled: %s", error.c_str());
    disabled_ = true;
    return 1;
  }
  config_.output = writer_->path();  // the file this process claimed
  writer_->SetMetadata("tool_state", "starting");

  SanitizerResult r = sanitizerSubscribe(&subscriber_, Callback, nullptr);
  if (r != SANITIZER_SUCCESS) {
    subscribe_failed_ = true;
    subscribe_error_ = std::string("sanitizerSubscribe returned ") + std::to_string(int(r)) + " " + ResultString(r);
    subscriber_ = nullptr;
  } else {
    for (const auto& w : kProbeCallbacks) {
      SanitizerResult e = sanitizerEnableCallback(1, subscriber_, w.domain, w.cbid);
      if (e != SANITIZER_SUCCESS) {
        LogError("block probe: sanitizerEnableCallback(domain %d, cbid %u) failed: %s", int(w.domain), w.cbid,
                 ResultString(e));
        ++counts_[kSanitizerErrors];
      }
    }
  }
  SetNvtxListener(this, MonotonicNs);
  ticker_ = std::make_unique<StatusTicker>(writer_.get(), std::chrono::milliseconds(flush_ms), [this] {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shut_down_) PublishCountersLocked();
  });
  std::atexit(AtExit);
  writer_->SetMetadata("tool_state", subscribe_failed_ ? "subscribe_failed" : "subscribed");
  if (subscribe_failed_) {
    std::string msg = SilentProbeMessage(true, subscribe_error_, LikelySeatHolderOfThisProcess());
    LogError("%s", msg.c_str());
    writer_->SetMetadata("tool_message", msg);
  } else {
    std::string sampling = "every " + std::to_string(config_.sampling.every);
    if (config_.sampling.max_launches) sampling += ", max " + std::to_string(config_.sampling.max_launches);
    if (config_.sampling.per_second > 0) sampling += ", at most " + FormatNumber(config_.sampling.per_second) + "/s";
    if (config_.sampling.budget_pct > 0) sampling += ", budget " + FormatNumber(config_.sampling.budget_pct) + "%";
    LogInfo("block probe on: kernels \"%s\", %s, patch %s; trace %s", config_.patterns_spec.c_str(), sampling.c_str(),
            PatchModeName(config_.patch), config_.output.c_str());
  }
  return 1;
}

void BlockProbe::SanitizerError(const char* what, SanitizerResult r) {
  ++counts_[kSanitizerErrors];
  if (counts_[kSanitizerErrors] <= 5) LogError("block probe: %s failed: %s", what, ResultString(r));
}

void BlockProbe::OnCallback(Sanitizer_CallbackDomain domain, Sanitizer_CallbackId cbid, const void* data) {
  callbacks_.fetch_add(1, std::memory_order_relaxed);
  if (disabled_ || data == nullptr) return;
  switch (domain) {
    case SANITIZER_CB_DOMAIN_LAUNCH: {
      const auto& d = *static_cast<const Sanitizer_LaunchData*>(data);
      if (cbid == SANITIZER_CBID_LAUNCH_BEGIN) OnLaunchBegin(d, nullptr);
      if (cbid == SANITIZER_CBID_LAUNCH_END) OnLaunchEnd(d);
      return;
    }
    case SANITIZER_CB_DOMAIN_GRAPHS: {
      if (cbid == SANITIZER_CBID_GRAPHS_LAUNCH_END) {
        OnGraphLaunchEnd(static_cast<const Sanitizer_GraphLaunchData*>(data)->stream);
        return;
      }
      if (cbid == SANITIZER_CBID_GRAPHS_GRAPHEXEC_CREATING) {
        OnGraphExecCreating();
        return;
      }
      if (cbid != SANITIZER_CBID_GRAPHS_NODE_LAUNCH_BEGIN) return;
      const auto& g = *static_cast<const Sanitizer_GraphNodeLaunchData*>(data);
      if (config_.graph_log && g.nodeType == CU_GRAPH_NODE_TYPE_KERNEL)
        LogInfo("graph diag: node %p exec %p launchId %u upload %u kernel %s grid %llu", static_cast<void*>(g.node),
                static_cast<void*>(g.graphExec), g.launchId, g.isGraphUpload,
                g.launchData.functionName ? g.launchData.functionName : "?",
                static_cast<unsigned long long>(g.launchData.gridId));
      if (g.nodeType == CU_GRAPH_NODE_TYPE_KERNEL && !g.isGraphUpload) {
        const GraphNodeRef ref{g.graphExec, g.launchId};
        OnLaunchBegin(g.launchData, &ref);
      }
      return;
    }
    case SANITIZER_CB_DOMAIN_RESOURCE: {
      std::unique_lock<std::mutex> lock(mu_);
      if (shut_down_) return;
      if (cbid == SANITIZER_CBID_RESOURCE_MODULE_LOADED) {
        OnModuleLoaded(*static_cast<const Sanitizer_ResourceModuleData*>(data));
      } else if (cbid == SANITIZER_CBID_RESOURCE_MODULE_UNLOAD_STARTING) {
        OnModuleUnloading(lock, static_cast<const Sanitizer_ResourceModuleData*>(data)->module);
      } else if (cbid == SANITIZER_CBID_RESOURCE_CONTEXT_CREATION_FINISHED) {
        const auto& c = *static_cast<const Sanitizer_ResourceContextData*>(data);
        if (devices_.insert(int(c.device)).second) writer_->SetMetadata("devices", devices_);
      } else if (cbid == SANITIZER_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
        ReleaseContext(lock, static_cast<const Sanitizer_ResourceContextData*>(data)->context);
      } else if (cbid == SANITIZER_CBID_RESOURCE_STREAM_DESTROY_STARTING) {
        Sanitizer_StreamHandle h = static_cast<const Sanitizer_ResourceStreamData*>(data)->hStream;
        Drain(lock, [h](const InFlight& f) { return f.stream == h; });
        ForgetStream(lock, h);
      }
      return;
    }
    case SANITIZER_CB_DOMAIN_SYNCHRONIZE: {
      const CUcontext ctx = static_cast<const Sanitizer_SynchronizeData*>(data)->context;
      const Sanitizer_StreamHandle stream = static_cast<const Sanitizer_SynchronizeData*>(data)->hStream;
      std::unique_lock<std::mutex> lock(mu_);
      if (shut_down_) return;
      if (!ring_.empty()) {
        ++counts_[counters::kBlocksSyncDrains];
        if (cbid == SANITIZER_CBID_SYNCHRONIZE_CONTEXT_SYNCHRONIZED) {
          Drain(lock, [ctx](const InFlight& f) { return f.context == ctx; });
        } else if (cbid == SANITIZER_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED) {
          Drain(lock, [stream](const InFlight& f) { return f.stream == stream; });
        }
      }
      // The program waited anyway: a cheap point to patch or unpatch (toggle mode).
      if (config_.patch == PatchMode::kToggle) {
        if (tl_target_graph_open) {  // a sync on this thread: its graph launch is over
          tl_target_graph_open = false;
          if (open_target_launches_ > 0) --open_target_launches_;
          open_cv_.notify_all();
        }
        SafePointLocked(lock);
      }
      PublishCountersLocked();
      return;
    }
    default:
      return;
  }
}

void BlockProbe::PublishCountersLocked() {
  if (!writer_) return;
  writer_->SetCounter(counters::kSanitizerCallbacks, callbacks_.load(std::memory_order_relaxed));
  writer_->SetCounter(counters::kLaunchesSeen, launches_seen_.load(std::memory_order_relaxed));
  if (const uint64_t g = graph_node_launches_.load(std::memory_order_relaxed))
    writer_->SetCounter(kGraphKernelNodeLaunches, g);
  writer_->SetCounter(counters::kNvtxUnbalancedPops, NvtxUnbalanced());
  if (sampler_) {
    writer_->SetCounter(counters::kLaunchesMatching, sampler_->matching());
    if (config_.patch == PatchMode::kToggle || sampler_->met_unpatched())
      writer_->SetCounter(counters::kLaunchesSampledUnpatched, sampler_->met_unpatched());
    if (config_.sampling.budget_pct > 0) {
      writer_->SetCounter(counters::kSamplingCostNs, sampler_->cost_ns());
      writer_->SetCounter(counters::kSamplingProgramNs, sampler_->program_ns(MonotonicNs()));
      writer_->SetCounter(counters::kSamplingMaxCostNs, sampler_->max_cost_ns());
    }
  }
  for (const auto& [name, value] : counts_) writer_->SetCounter(name, value);
}

void BlockProbe::OnNvtx(const NvtxEvent& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!writer_ || shut_down_) return;
  writer_->Append(ToNvtxRecord(e, [this](std::string_view s) { return writer_->Intern(s); }));
  ++counts_[counters::kNvtxRecords];
}

void BlockProbe::Shutdown() {
  if (ticker_) ticker_->Stop();  // the SUMMARY takes over
  FlushOpenNvtxRanges();
  std::unique_lock<std::mutex> lock(mu_);
  if (shut_down_ || !writer_) return;
  Drain(lock, [](const InFlight&) { return true; });
  // Drains of other threads still copying: wait for them a little, then count what they hold as lost.
  if (!transit_cv_.wait_for(lock, std::chrono::seconds(2), [this] { return in_transit_ == 0; }))
    counts_[kBlocksLost] += in_transit_blocks_;
  Drain(lock, [](const InFlight&) { return true; });
  // Everything copied is decoded and written before the trace closes.
  if (!WaitForDecoder(lock, std::chrono::seconds(10))) {
    std::lock_guard<std::mutex> jl(jobs_mu_);
    counts_[kBlocksLost] += jobs_blocks_;
    LogError("block probe: the decoder did not finish in 10 s at exit; %llu blocks counted as lost",
             static_cast<unsigned long long>(jobs_blocks_));
  }
  shut_down_ = true;
  PublishCountersLocked();
  const uint64_t callbacks = callbacks_.load();
  std::string state = "ok";
  if (subscribe_failed_) {
    state = "subscribe_failed";
  } else if (disabled_) {
    state = "disabled_internal_error";
  } else if (callbacks == 0) {
    state = "silent";
    std::string msg = SilentProbeMessage(false, "", LikelySeatHolderOfThisProcess());
    LogError("%s", msg.c_str());
    writer_->SetMetadata("tool_message", msg);
  }
  writer_->SetMetadata("tool_state", state);
  // A process that launched kernels keeps its trace even when none matched (it names them); one whose
  // probe failed or was silent (another tool holds the seat: no callback at all) keeps it to say so, and
  // views skip it as a trace without GPU work. Any other process without a launch leaves no file.
  if (state != "ok" || !MostLaunchedLocked(1).empty()) writer_->KeepFile();
  const uint64_t matching = sampler_ ? sampler_->matching() : 0;
  if (matching == 0 && counts_[counters::kLaunchesSelectedUnpatched] == 0 && callbacks > 0) {
    // The pattern matched no launch: name the kernels that were launched, as the user needs a substring of one.
    const auto most = MostLaunchedLocked(10);
    nlohmann::json list = nlohmann::json::array();
    std::string text;
    for (const auto& [name, n] : most) {
      list.push_back({{"kernel", name}, {"launches", n}});
      text += "\n  " + std::to_string(n) + "  " + name;
    }
    writer_->SetMetadata("kernels_launched_most", list);
    if (!most.empty())
      LogError(
          "block probe: TWINSCOPE_KERNELS=\"%s\" matched no launched kernel; the kernels launched most (give a "
          "substring of one):%s",
          config_.patterns_spec.c_str(), text.c_str());
  }
  // No sanitizerUnsubscribe here: at exit the driver still tears down patched
  // modules and contexts (the H200 crashed at exit with it, see the top), and
  // from now on every callback returns at once on g_shut_down.
  g_shut_down.store(true, std::memory_order_release);
  std::string error;
  if (!writer_->Close(&error)) LogError("block probe: writing %s failed: %s", config_.output.c_str(), error.c_str());
  LogInfo("block probe: %llu of %llu matching launches traced, %llu blocks recorded, %llu overflow; trace %s",
          static_cast<unsigned long long>(counts_[counters::kLaunchesTraced]),
          static_cast<unsigned long long>(sampler_ ? sampler_->matching() : 0),
          static_cast<unsigned long long>(counts_[counters::kBlocksRecorded]),
          static_cast<unsigned long long>(counts_[counters::kBlocksOverflow]), config_.output.c_str());
}

}  // namespace twinscope::blocks

// Called by the CUDA driver when it loads CUDA_INJECTION64_PATH.
extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  int rc = 1;
  twinscope::Firewall("block probe InitializeInjection",
                      [&] { rc = twinscope::blocks::BlockProbe::Get().Initialize(); });
  return rc;
}
