#include "nvtx/nvtx_capture.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "launchkey/launch_key.h"

namespace twinscope {
namespace {

std::atomic<NvtxListener*> g_listener{nullptr};
std::atomic<NvtxClock> g_clock{nullptr};
std::atomic<uint64_t> g_calls{0};
std::atomic<uint64_t> g_unbalanced{0};
std::atomic<uint64_t> g_next_range_id{1};

struct OpenRange {
  std::string domain;
  std::string name;
  uint64_t start_ns;
  uint64_t thread_id;
};
std::mutex g_open_mu;
std::unordered_map<uint64_t, OpenRange>& OpenRanges() {
  static auto* m = new std::unordered_map<uint64_t, OpenRange>();  // leaked: used until process exit
  return *m;
}

// Start times of this thread's open push/pop ranges, parallel to ThreadRangeStack().
struct PushFrame {
  std::string domain;
  std::string name;
  uint64_t start_ns;
};
// This thread's frames, on the heap behind trivially destructible
// thread_locals (see ThreadRangeStack()): FlushOpenNvtxRanges() runs from
// atexit, after the main thread's thread_local destructors.
thread_local std::vector<PushFrame>* t_frames = nullptr;
thread_local bool t_frames_gone = false;
struct FramesOwner {
  ~FramesOwner() {
    delete t_frames;
    t_frames = nullptr;
    t_frames_gone = true;
  }
};
thread_local FramesOwner t_frames_owner;

// Null once this thread's destructors have run.
std::vector<PushFrame>* Frames() {
  if (!t_frames && !t_frames_gone) {
    (void)&t_frames_owner;
    t_frames = new std::vector<PushFrame>();
  }
  return t_frames;
}

uint64_t Now() {
  NvtxClock c = g_clock.load(std::memory_order_acquire);
  return c ? c() : 0;
}

void Emit(const NvtxEvent& e) {
  if (NvtxListener* l = g_listener.load(std::memory_order_acquire)) l->OnNvtx(e);
}

}  // namespace

uint64_t CurrentThreadId() {
  thread_local uint64_t tid = static_cast<uint64_t>(::syscall(SYS_gettid));
  return tid;
}

void SetNvtxListener(NvtxListener* listener, NvtxClock clock) {
  g_clock.store(clock, std::memory_order_release);
  g_listener.store(listener, std::memory_order_release);
}

uint64_t NvtxCallsSeen() { return g_calls.load(std::memory_order_relaxed); }
uint64_t NvtxUnbalanced() { return g_unbalanced.load(std::memory_order_relaxed); }

namespace nvtx_capture {

void Push(std::string_view domain, std::string_view name) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  ThreadRangeStack().Push(domain, name);
  if (auto* frames = Frames()) frames->push_back(PushFrame{std::string(domain), std::string(name), Now()});
}

void Pop(std::string_view domain) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  if (!ThreadRangeStack().Pop(domain)) {
    g_unbalanced.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint64_t end = Now();
  auto* frames = Frames();
  if (!frames) return;
  // Close the innermost frame of `domain` and every frame opened inside it,
  // as RangeStack::Pop does.
  for (size_t i = frames->size(); i-- > 0;) {
    if ((*frames)[i].domain != domain) continue;
    for (size_t j = frames->size(); j-- > i;) {
      const PushFrame& f = (*frames)[j];
      Emit(NvtxEvent{NvtxKind::kPushPop, f.domain, f.name, f.start_ns, end, CurrentThreadId(), 0,
                     static_cast<uint32_t>(j)});
    }
    frames->resize(i);
    return;
  }
}

uint64_t Start(std::string_view domain, std::string_view name) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  uint64_t id = g_next_range_id.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(g_open_mu);
  OpenRanges().emplace(id, OpenRange{std::string(domain), std::string(name), Now(), CurrentThreadId()});
  return id;
}

void End(uint64_t range_id) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  OpenRange r;
  {
    std::lock_guard<std::mutex> lock(g_open_mu);
    auto it = OpenRanges().find(range_id);
    if (it == OpenRanges().end()) {
      g_unbalanced.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    r = std::move(it->second);
    OpenRanges().erase(it);
  }
  Emit(NvtxEvent{NvtxKind::kStartEnd, r.domain, r.name, r.start_ns, Now(), r.thread_id, range_id, 0});
}

void Mark(std::string_view domain, std::string_view name) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  uint64_t t = Now();
  Emit(NvtxEvent{NvtxKind::kMark, domain, name, t, t, CurrentThreadId(), 0, 0});
}

}  // namespace nvtx_capture

void FlushOpenNvtxRanges() {
  std::unordered_map<uint64_t, OpenRange> open;
  {
    std::lock_guard<std::mutex> lock(g_open_mu);
    open.swap(OpenRanges());
  }
  for (auto& [id, r] : open) Emit(NvtxEvent{NvtxKind::kStartEnd, r.domain, r.name, r.start_ns, 0, r.thread_id, id, 0});
  // This thread's open push/pop ranges (other threads' cannot be reached; at
  // process exit the main thread's are already gone with its destructors).
  auto* frames = Frames();
  if (!frames) return;
  for (size_t j = frames->size(); j-- > 0;) {
    const PushFrame& f = (*frames)[j];
    Emit(
        NvtxEvent{NvtxKind::kPushPop, f.domain, f.name, f.start_ns, 0, CurrentThreadId(), 0, static_cast<uint32_t>(j)});
  }
  frames->clear();
}

}  // namespace twinscope
