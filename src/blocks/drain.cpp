// Drain: copying traced launches' block buffers back, decoding them on the
// probe's own thread, and what goes when a context goes.
//
// - Drained without a sync per launch: at the application's own
//   synchronisations (SYNCHRONIZE callbacks), before a stream/context/module
//   goes away, when the ring of in-flight launches is full or the arena 3/4
//   used (then, at the LAUNCH_END of the launch that filled it, everything in
//   flight is drained), in toggle mode right after a sampled launch (its
//   module is unpatched once it is done), and at exit. A drain copies each
//   run of adjacent spans with ONE copy, then zeroes the run (memset + stream
//   sync) so its room is ready again, and hands the copy (in pooled pinned
//   host memory) to the decoder thread: decoding and writing block records
//   never holds up the application (or the GPU, idle while the application
//   waits), unless the decoder falls more than TWINSCOPE_BLOCKS_DECODE_MB
//   behind (then the drain waits for it).
// - Never holds mu_ across a blocking Sanitizer call (copy, free): launches
//   are taken out of the ring under mu_, copied without it, and recorded under
//   it again, so a callback the driver delivers on another thread while our
//   copy waits cannot deadlock on mu_.
#include <algorithm>
#include <thread>

#include "base/log.h"
#include "blocks/block_decode.h"
#include "blocks/block_probe.h"
#include "twinscope/counters.h"

namespace twinscope::blocks {

using counters::kBlocksBadBuffer;
using counters::kBlocksIncomplete;
using counters::kBlocksLost;
using counters::kBlocksMissing;

void BlockProbe::Drain(std::unique_lock<std::mutex>& lock, const Pick& pick) {
  std::vector<InFlight> taken;
  for (auto it = ring_.begin(); it != ring_.end();) {
    if (pick(*it)) {
      taken.push_back(std::move(*it));
      it = ring_.erase(it);
    } else {
      ++it;
    }
  }
  if (taken.empty()) return;
  in_transit_ += taken.size();
  for (const InFlight& f : taken) in_transit_blocks_ += BlockCount(f.record.grid);
  for (size_t i = 0; i < taken.size();) {
    // A run: launches of one context whose spans follow each other in its arena.
    size_t j = i + 1;
    while (j < taken.size() && taken[j].context == taken[i].context &&
           taken[j].offset == taken[j - 1].offset + taken[j - 1].bytes)
      ++j;
    const CUcontext ctx = taken[i].context;
    auto a = arenas_.find(ctx);
    unsigned char* base = a != arenas_.end() ? static_cast<unsigned char*>(a->second->device) : nullptr;
    const uint64_t start = taken[i].offset;
    const uint64_t bytes = taken[j - 1].offset + taken[j - 1].bytes - start;
    // One copy, ordered after the run's launches on its own stream; launches
    // of the run on other streams are waited for first.
    const Sanitizer_StreamHandle copy_stream = taken[j - 1].stream;
    std::vector<Sanitizer_StreamHandle> others;
    for (size_t k = i; k < j; ++k)
      if (taken[k].stream != copy_stream && std::find(others.begin(), others.end(), taken[k].stream) == others.end())
        others.push_back(taken[k].stream);
    lock.unlock();
    SanitizerResult r = base != nullptr ? SANITIZER_SUCCESS : SANITIZER_ERROR_INVALID_PARAMETER;
    bool zeroed = false;
    HostBuffer host;
    {
      OwnCalls own;
      host = AcquireHostBuffer(ctx, bytes);
      TWINSCOPE_CALL_LOG("drain: %zu launches, %llu bytes, copy stream %p, %zu other streams", j - i,
                         static_cast<unsigned long long>(bytes), static_cast<void*>(copy_stream), others.size());
      for (Sanitizer_StreamHandle s : others)
        if (r == SANITIZER_SUCCESS) r = sanitizerStreamSynchronize(s);
      if (r == SANITIZER_SUCCESS) r = sanitizerMemcpyDeviceToHost(host.data(), base + start, bytes, copy_stream);
      // Zero the run again, and wait for it, so its spans need no memset when reused.
      if (r == SANITIZER_SUCCESS && !config_.naive)
        zeroed = sanitizerMemset(base + start, 0, bytes, copy_stream) == SANITIZER_SUCCESS &&
                 sanitizerStreamSynchronize(copy_stream) == SANITIZER_SUCCESS;
      TWINSCOPE_CALL_LOG("drain done: %d", int(r));
    }
    lock.lock();
    a = arenas_.find(ctx);
    DecodeJob job;
    job.start = start;
    job.result = r;
    for (size_t k = i; k < j; ++k) {
      --in_transit_;
      in_transit_blocks_ -= BlockCount(taken[k].record.grid);
      if (a != arenas_.end()) a->second->spans.Release(taken[k].offset, zeroed);
      job.blocks += BlockCount(taken[k].record.grid);
      job.launches.push_back(std::move(taken[k]));
    }
    job.host = std::move(host);
    job.bytes = bytes;
    EnqueueDecode(lock, std::move(job));
    i = j;
  }
  transit_cv_.notify_all();
}

void BlockProbe::EnqueueDecode(std::unique_lock<std::mutex>& lock, DecodeJob job) {
  if (shut_down_) return;  // the trace is closed (counted as lost by Shutdown)
  {
    std::lock_guard<std::mutex> jl(jobs_mu_);
    jobs_bytes_ += job.bytes;
    jobs_blocks_ += job.blocks;
    jobs_.push_back(std::move(job));
    if (!decoder_started_) {
      decoder_started_ = true;
      std::thread([this] { DecoderLoop(); }).detach();  // lives until exit, like this object
    }
  }
  jobs_cv_.notify_all();
  // Backpressure: never let undecoded copies grow without bound.
  std::unique_lock<std::mutex> jl(jobs_mu_);
  const uint64_t cap = config_.max_pending_decode_bytes;
  if (jobs_bytes_ <= cap) return;
  ++counts_[counters::kBlocksDecoderWaits];
  lock.unlock();
  jobs_cv_.wait(jl, [this, cap] { return jobs_bytes_ <= cap; });
  jl.unlock();
  lock.lock();
}

void BlockProbe::DecoderLoop() {
  Firewall("block probe decoder thread", [this] {
    std::unique_lock<std::mutex> jl(jobs_mu_);
    for (;;) {
      jobs_cv_.wait(jl, [this] { return !jobs_.empty(); });
      DecodeJob job = std::move(jobs_.front());
      jobs_.pop_front();
      decoder_busy_ = true;
      jl.unlock();
      DecodeAndWrite(job);
      jl.lock();
      if (job.host.pinned != nullptr) host_pool_.push_back(std::move(job.host));
      decoder_busy_ = false;
      jobs_bytes_ -= job.bytes;
      jobs_blocks_ -= job.blocks;
      jobs_cv_.notify_all();
    }
  });
}

void BlockProbe::DecodeAndWrite(DecodeJob& job) {
  std::map<std::string, uint64_t> add;
  uint64_t sanitizer_errors = 0;
  for (InFlight& f : job.launches) {
    if (f.recorded) continue;  // never handed to its launch: on record already
    const uint64_t expected = BlockCount(f.record.grid);
    if (job.result != SANITIZER_SUCCESS) {
      ++sanitizer_errors;
      add[kBlocksLost] += expected;
      writer_->Append(f.record);
      continue;
    }
    DecodedLaunch d = DecodeLaunchBuffer(job.host.data() + (f.offset - job.start), f.bytes, f.record.seq, f.record.grid,
                                         f.threads_per_block);
    if (d.bad_header) {
      ++add[kBlocksBadBuffer];
      add[kBlocksLost] += expected;
    }
    f.record.blocks_recorded = static_cast<uint32_t>(d.blocks.size());
    writer_->Append(f.record);
    if (!d.blocks.empty()) writer_->AppendMany(d.blocks.data(), d.blocks.size());
    add[counters::kBlocksRecorded] += d.blocks.size();
    add[counters::kBlocksOverflow] += d.overflow;
    add[kBlocksMissing] += d.missing;
    add[kBlocksIncomplete] += d.incomplete;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (sanitizer_errors > 0) SanitizerError("sanitizerMemcpyDeviceToHost / stream sync (block buffers)", job.result);
  for (const auto& [name, value] : add) counts_[name] += value;
}

HostBuffer BlockProbe::AcquireHostBuffer(CUcontext ctx, uint64_t bytes) {
  {
    std::lock_guard<std::mutex> jl(jobs_mu_);
    auto best = host_pool_.end();
    for (auto it = host_pool_.begin(); it != host_pool_.end(); ++it)
      if (it->context == ctx && it->capacity >= bytes && (best == host_pool_.end() || it->capacity < best->capacity))
        best = it;
    if (best != host_pool_.end()) {
      HostBuffer b = std::move(*best);
      host_pool_.erase(best);
      return b;
    }
  }
  HostBuffer b;
  b.context = ctx;
  uint64_t capacity = 1ull << 20;  // powers of two from 1 MiB, so buffers are reused
  while (capacity < bytes) capacity <<= 1;
  const uint64_t limit = config_.max_pending_decode_bytes + config_.max_device_bytes;
  bool allowed = false;
  {
    std::lock_guard<std::mutex> jl(jobs_mu_);
    if (pinned_bytes_ + capacity <= limit) {
      pinned_bytes_ += capacity;
      allowed = true;
    }
  }
  void* p = nullptr;
  if (allowed && sanitizerAllocHost(ctx, &p, capacity) == SANITIZER_SUCCESS && p != nullptr) {
    b.pinned = static_cast<unsigned char*>(p);
    b.capacity = capacity;
    return b;
  }
  if (allowed) {
    std::lock_guard<std::mutex> jl(jobs_mu_);
    pinned_bytes_ -= capacity;
  }
  b.pageable.resize(bytes);
  return b;
}

bool BlockProbe::WaitForDecoder(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds timeout) {
  lock.unlock();
  bool done = false;
  {
    std::unique_lock<std::mutex> jl(jobs_mu_);
    done = jobs_cv_.wait_for(jl, timeout, [this] { return jobs_.empty() && !decoder_busy_; });
  }
  lock.lock();
  return done;
}

void BlockProbe::ReleaseContext(std::unique_lock<std::mutex>& lock, CUcontext ctx) {
  Drain(lock, [ctx](const InFlight& f) { return f.context == ctx; });
  // Another thread may still be copying out of this arena: wait a little. And
  // queued runs may sit in this context's pinned memory: write them first.
  transit_cv_.wait_for(lock, std::chrono::seconds(2), [this] { return in_transit_ == 0; });
  WaitForDecoder(lock, std::chrono::seconds(10));
  std::vector<void*> freeing_host;
  {
    std::lock_guard<std::mutex> jl(jobs_mu_);
    for (auto it = host_pool_.begin(); it != host_pool_.end();) {
      if (it->context == ctx) {
        freeing_host.push_back(it->pinned);
        pinned_bytes_ -= it->capacity;
        it = host_pool_.erase(it);
      } else {
        ++it;
      }
    }
  }
  std::vector<void*> freeing;
  if (auto a = arenas_.find(ctx); a != arenas_.end()) {
    if (a->second->device != nullptr) freeing.push_back(a->second->device);
    arenas_.erase(a);
  }
  if (auto off = off_.find(ctx); off != off_.end()) {
    freeing.push_back(off->second.device);
    off_.erase(off);
  }
  lock.unlock();
  {
    OwnCalls own;  // like cuMemFree, sanitizerFree may wait for the device
    for (void* p : freeing) sanitizerFree(ctx, p);
    for (void* p : freeing_host) sanitizerFreeHost(ctx, p);
  }
  lock.lock();
  patch_loaded_.erase(ctx);
  graph_tables_.clear();  // tables point into arenas; a dead context's are gone
  function_off_.clear();
  // Its modules go with it (if their unloads were not reported first): no toggling on a dead context.
  for (auto it = modules_.begin(); it != modules_.end();) {
    if (it->second.context == ctx) {
      targets_.erase(std::remove(targets_.begin(), targets_.end(), it->first), targets_.end());
      it = modules_.erase(it);
    } else {
      ++it;
    }
  }
  g_module_generation.fetch_add(1, std::memory_order_release);
  PublishCountersLocked();
}

}  // namespace twinscope::blocks
