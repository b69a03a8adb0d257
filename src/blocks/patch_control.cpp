// Patch control: which modules the block probe patches, and when.
//
// - MODULE_LOADED: reads the module's kernel names from its cubin; a module
//   holding a selected kernel is a *target*; other modules are never patched
//   (patching is what costs: every thread of every kernel of a patched module
//   calls the patch, 11-17x at 1,000 blocks of 512 threads on the H200).
// - Always mode: a target is patched at load, for good.
// - Toggle mode (the default when sampling): a target is patched only while
//   the sampler wants the next matching launch, i.e. just before a sampled
//   launch, and unpatched right after it, so sampled-out launches and the
//   module's other kernels run at native speed. Measured on the H200
//   (docs/block-probe.md): sanitizerUnpatchModule after a launch and, before
//   the next sampled one, sanitizerPatchInstructions again THEN
//   sanitizerPatchModule works over thousands of toggles with GPU memory flat;
//   sanitizerPatchModule alone after an unpatch mostly gives no blocks.
// - Toggling only where none of the module's kernels can be in flight and no
//   launch of a target module is being submitted: at LAUNCH_END, at the end
//   of a graph launch, at the program's own syncs, never in LAUNCH_BEGIN (a
//   blocking call there hung the H200). "In flight" is tracked, not guessed:
//   every launch of a target module's kernels (selected or not) notes its
//   stream; a toggle synchronises exactly those streams (the Sanitizer has no
//   context sync; these are all the streams that can run the module's
//   kernels), without mu_, then checks under mu_ that no launch of the module
//   began meanwhile and none is open, and patches or unpatches under mu_,
//   which serialises every patch call across threads as the Sanitizer asks.
//   A toggle that cannot get there (launches keep coming on other threads)
//   is deferred to the next safe point and counted.
#include <algorithm>

#include "base/log.h"
#include "blocks/block_probe.h"
#include "blocks/cubin_symbols.h"
#include "blocks/patch/block_probe_abi.h"
#include "format/header.h"
#include "twinscope/counters.h"

namespace twinscope::embedded {
extern const unsigned char block_probe_patch[];
extern const std::size_t block_probe_patch_size;
}  // namespace twinscope::embedded

namespace twinscope::blocks {

thread_local bool tl_target_launch_open = false;
thread_local bool tl_target_graph_open = false;

namespace {
// How long a toggle waits for launches being submitted on other threads.
constexpr auto kOpenLaunchWait = std::chrono::milliseconds(5);
}  // namespace

void BlockProbe::OnModuleLoaded(const Sanitizer_ResourceModuleData& m) {
  ++counts_[counters::kModulesLoaded];
  std::vector<std::string> names;
  auto parsed = CubinKernelNames(m.pCubin, m.cubinSize);
  if (parsed.ok()) {
    names = std::move(*parsed);
  } else {
    // Not an ELF cubin we can read: fall back to the names in its bytes, so a
    // target kernel is not missed (a false match only costs patching).
    ++counts_[counters::kModulesUnparsed];
    if (counts_[counters::kModulesUnparsed] == 1)
      LogInfo("block probe: %s; using the strings of the image instead", parsed.status().message().c_str());
    names = PrintableNames(m.pCubin, m.cubinSize);
  }
  ModuleState& s = modules_[m.module];
  s = ModuleState{};
  s.context = m.context;
  s.target = config_.naive || selector_->AnyMatches(names);
  if (s.target) {
    if (std::find(targets_.begin(), targets_.end(), m.module) == targets_.end()) targets_.push_back(m.module);
    // A module just loaded runs nothing yet: patch it now if it should be.
    if (config_.patch == PatchMode::kAlways || graphs_seen_) {
      // After a graph exec was made (toggle mode), for good: see OnGraphExecCreating.
      if (SetPatchedLocked(m.module, s, true) && graphs_seen_) {
        s.pinned = true;
        ++counts_[counters::kModulesPinnedByGraph];
      }
    } else if (sampler_->WantsNext(MonotonicNs())) {
      const uint64_t t0 = MonotonicNs();
      SetPatchedLocked(m.module, s, true);
      const uint64_t dt = MonotonicNs() - t0;
      counts_[counters::kToggleNs] += dt;
      unpaid_toggle_ns_ += dt;
    }
  }
  PublishCountersLocked();
}

void BlockProbe::OnModuleUnloading(std::unique_lock<std::mutex>& lock, CUmodule m) {
  Drain(lock, [m](const InFlight& f) { return f.module == m; });
  modules_.erase(m);
  targets_.erase(std::remove(targets_.begin(), targets_.end(), m), targets_.end());
  g_module_generation.fetch_add(1, std::memory_order_release);
}

bool BlockProbe::SetPatchedLocked(CUmodule m, ModuleState& s, bool patched) {
  if (!patched) {
    TWINSCOPE_CALL_LOG("unpatch module %p", static_cast<void*>(m));
    SanitizerResult r = sanitizerUnpatchModule(m);
    TWINSCOPE_CALL_LOG("unpatch module %p: %d", static_cast<void*>(m), int(r));
    if (r != SANITIZER_SUCCESS) {
      SanitizerError("sanitizerUnpatchModule (the module stays patched for good)", r);
      s.pinned = true;
      return false;
    }
    s.patched = false;
    ++counts_[counters::kModulesUnpatched];
    return true;
  }
  if (!patch_loaded_.count(s.context)) {
    SanitizerResult r = sanitizerAddPatches(embedded::block_probe_patch, s.context);
    if (r != SANITIZER_SUCCESS) {
      SanitizerError("sanitizerAddPatches (embedded block probe patch)", r);
      ++counts_[counters::kModulesPatchFailed];
      s.failed = true;
      return false;
    }
    patch_loaded_.insert(s.context);
  }
  // The instructions are given again before every patch: an unpatch drops them.
  SanitizerResult r = sanitizerPatchInstructions(SANITIZER_INSTRUCTION_BLOCK_ENTER, m, TWINSCOPE_BLOCK_ENTER_PATCH);
  if (r == SANITIZER_SUCCESS)
    r = sanitizerPatchInstructions(SANITIZER_INSTRUCTION_BLOCK_EXIT, m, TWINSCOPE_BLOCK_EXIT_PATCH);
  TWINSCOPE_CALL_LOG("patch module %p", static_cast<void*>(m));
  if (r == SANITIZER_SUCCESS) r = sanitizerPatchModule(m);
  TWINSCOPE_CALL_LOG("patch module %p: %d", static_cast<void*>(m), int(r));
  if (r != SANITIZER_SUCCESS) {
    SanitizerError("patching a module that holds a target kernel", r);
    ++counts_[counters::kModulesPatchFailed];
    s.failed = true;
    return false;
  }
  s.patched = true;
  if (!s.ever_patched) {
    s.ever_patched = true;
    ++counts_[counters::kModulesPatched];
  } else {
    ++counts_[counters::kModulesRepatched];
  }
  return true;
}

void BlockProbe::NoteTargetLaunchLocked(ModuleState& s, Sanitizer_StreamHandle stream, bool graph_node) {
  ++s.epoch;
  s.streams.insert(stream);
  if (graph_node) {
    if (!tl_target_graph_open) {
      tl_target_graph_open = true;
      ++open_target_launches_;
    }
    return;
  }
  if (tl_target_graph_open) {
    // A plain launch on this thread: its graph launch is over (GRAPHS_LAUNCH_END was missed).
    tl_target_graph_open = false;
    if (open_target_launches_ > 0) --open_target_launches_;
  }
  if (!tl_target_launch_open) {
    tl_target_launch_open = true;
    ++open_target_launches_;
  }  // else: the last launch on this thread never ended; it stays counted once
}

bool BlockProbe::QuiesceLocked(std::unique_lock<std::mutex>& lock, CUmodule m) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (open_target_launches_ > 0 &&
        !open_cv_.wait_for(lock, kOpenLaunchWait, [this] { return open_target_launches_ == 0 || shut_down_; }))
      break;
    if (shut_down_) return false;
    auto it = modules_.find(m);
    if (it == modules_.end()) return false;
    if (it->second.streams.empty()) return true;
    const std::vector<Sanitizer_StreamHandle> streams(it->second.streams.begin(), it->second.streams.end());
    const uint64_t epoch = it->second.epoch;
    SanitizerResult r = SANITIZER_SUCCESS;
    lock.unlock();
    {
      OwnCalls own;
      for (Sanitizer_StreamHandle h : streams) {
        TWINSCOPE_CALL_LOG("toggle: sync stream %p", static_cast<void*>(h));
        if (r == SANITIZER_SUCCESS) r = sanitizerStreamSynchronize(h);
        TWINSCOPE_CALL_LOG("toggle: sync stream %p: %d", static_cast<void*>(h), int(r));
      }
    }
    lock.lock();
    counts_[counters::kToggleSyncs] += streams.size();
    if (r != SANITIZER_SUCCESS) {
      SanitizerError("sanitizerStreamSynchronize (before a patch toggle)", r);
      break;
    }
    it = modules_.find(m);
    if (it == modules_.end()) return false;
    if (it->second.epoch == epoch && open_target_launches_ == 0) {
      for (Sanitizer_StreamHandle h : streams) it->second.streams.erase(h);
      return true;
    }
    // A launch of the module began while we waited: its kernel may be in flight.
  }
  ++counts_[counters::kTogglesDeferred];
  return false;
}

void BlockProbe::SafePointLocked(std::unique_lock<std::mutex>& lock) {
  if (config_.patch != PatchMode::kToggle || shut_down_ || disabled_) return;
  const uint64_t t0 = MonotonicNs();
  bool finished = false, unpatched = false, worked = false;
  // 1. Traced launches of target modules: wait for them and copy them out now,
  //    so the module can be unpatched and what the sample cost is known.
  std::vector<CUmodule> traced;
  for (const InFlight& f : ring_)
    if (std::find(traced.begin(), traced.end(), f.module) == traced.end()) traced.push_back(f.module);
  for (CUmodule m : traced) {
    auto it = modules_.find(m);
    if (it == modules_.end() || !it->second.target) continue;
    worked = true;
    if (QuiesceLocked(lock, m)) {
      Drain(lock, [m](const InFlight& f) { return f.module == m; });
      finished = true;
    }
  }
  // Charge the finished samples before asking for the next one (--budget).
  uint64_t t1 = t0;
  if (finished) {
    t1 = MonotonicNs();
    counts_[counters::kToggleNs] += t1 - t0;
    sampler_->AddCost(unpaid_toggle_ns_ + (t1 - t0), t1);
    unpaid_toggle_ns_ = 0;
  }
  // 2. Patched exactly when the next matching launch is wanted.
  const bool want = sampler_->WantsNext(MonotonicNs());
  const std::vector<CUmodule> targets = targets_;
  for (CUmodule m : targets) {
    auto it = modules_.find(m);
    if (it == modules_.end() || it->second.failed || it->second.pinned || it->second.patched == want) continue;
    worked = true;
    if (!QuiesceLocked(lock, m)) continue;
    it = modules_.find(m);
    if (it == modules_.end() || it->second.failed || it->second.patched == want) continue;
    if (SetPatchedLocked(m, it->second, want) && !want) unpatched = true;
  }
  if (!worked) return;
  const uint64_t now = MonotonicNs();
  counts_[counters::kToggleNs] += now - t1;
  unpaid_toggle_ns_ += now - t1;
  // A sample's cost: the arming before it, its own run (the finishing sync
  // waited for it) and its drain; an unpatch is paid by the next sample, or
  // at once if the arming it undoes found no launch to trace.
  if (unpatched && !finished) {
    sampler_->AddCost(unpaid_toggle_ns_, now);
    unpaid_toggle_ns_ = 0;
  }
}

void BlockProbe::OnGraphExecCreating() {
  std::unique_lock<std::mutex> lock(mu_);
  if (config_.patch != PatchMode::kToggle || shut_down_) return;
  // A graph exec runs its kernel nodes with the patch state their module had
  // when it was instantiated: launched after a toggle, an exec made unpatched
  // stopped the H200 with "illegal instruction" (bench/RESULTS.md, toggle
  // mode and graphs). So from the first exec on, target modules are patched
  // now and stay patched, and so are those loaded later (OnModuleLoaded);
  // their graph nodes and eager launches are still sampled, at the patch's cost.
  if (!graphs_seen_) {
    graphs_seen_ = true;
    LogInfo(
        "block probe: the program instantiates CUDA graphs: target modules stay patched from now on "
        "(modules_pinned_by_graph); sampled-out launches of them pay the patch call%s",
        config_.sampling.budget_pct > 0 ? ", which --budget cannot bound" : "");
  }
  const std::vector<CUmodule> targets = targets_;
  for (CUmodule m : targets) {
    auto it = modules_.find(m);
    if (it == modules_.end() || it->second.pinned || it->second.failed) continue;
    if (!it->second.patched) {
      TWINSCOPE_CALL_LOG("graph exec: patching module %p", static_cast<void*>(m));
      if (!QuiesceLocked(lock, m)) {
        // Kernels of it may be in flight: it cannot be patched now, so it
        // stays unpatched for good and its launches go untraced (counted).
        it = modules_.find(m);
        if (it == modules_.end()) continue;
        it->second.pinned = true;
        ++counts_[counters::kModulesPinnedUnpatched];
        LogError(
            "block probe: a CUDA graph was instantiated while a target module could not be patched: its "
            "launches are not traced from now on (modules_pinned_unpatched)");
        continue;
      }
      it = modules_.find(m);
      if (it == modules_.end() || it->second.failed) continue;
      if (!it->second.patched && !SetPatchedLocked(m, it->second, true)) continue;
    }
    it->second.pinned = true;
    ++counts_[counters::kModulesPinnedByGraph];
  }
  PublishCountersLocked();
}

void BlockProbe::ForgetStream(std::unique_lock<std::mutex>& lock, Sanitizer_StreamHandle h) {
  if (config_.patch != PatchMode::kToggle) return;
  bool used = false;
  for (CUmodule m : targets_)
    if (auto it = modules_.find(m); it != modules_.end() && it->second.streams.count(h)) used = true;
  if (!used) return;
  // Its work goes on after it is destroyed, out of our reach: wait for it now.
  lock.unlock();
  SanitizerResult r;
  {
    OwnCalls own;
    r = sanitizerStreamSynchronize(h);
  }
  lock.lock();
  if (r != SANITIZER_SUCCESS) SanitizerError("sanitizerStreamSynchronize (a stream being destroyed)", r);
  ++counts_[counters::kToggleSyncs];
  for (CUmodule m : targets_)
    if (auto it = modules_.find(m); it != modules_.end()) it->second.streams.erase(h);
}

}  // namespace twinscope::blocks
