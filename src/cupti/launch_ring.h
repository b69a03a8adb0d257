// One application thread's queue of launch facts for the collector's own
// thread (launch_tracker.h): a single-producer single-consumer ring of 64-byte
// slots. An op fills one slot or, for the rare larger ones (an NVTX range
// path), several consecutive slots; it never wraps around the end (the
// producer pads to the start first), so the consumer reads every op in place.
//
// Producer: the owning thread only; no lock, no allocation, no atomic
// read-modify-write (a release store of `head` per op; `tail` is re-read only
// when the ring looks full). Consumer: one at a time (the tracker's lock).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace twinscope::cupti {

class LaunchRing {
 public:
  static constexpr uint64_t kSlots = 8192;  // 512 KiB a thread: ~4,000 launches (two ops each)
  static constexpr size_t kSlotBytes = 64;
  static constexpr size_t kMaxOpBytes = (kSlots / 4) * kSlotBytes;  // larger ops take the slow path
  // Every op starts with its kind; kinds below kFirstUserKind belong to the ring.
  static constexpr uint8_t kPadKind = 0;  // skipped slots; u32 slot count at byte 4
  static constexpr uint8_t kFirstUserKind = 1;

  explicit LaunchRing(uint64_t thread_id) : thread_id_(thread_id) {}
  LaunchRing(const LaunchRing&) = delete;
  LaunchRing& operator=(const LaunchRing&) = delete;

  uint64_t thread_id() const { return thread_id_; }  // the producer's OS thread id

  enum class PushResult {
    kOk,
    kOkHalfFull,  // queued; the ring just passed half full: wake the consumer
    kFull,        // not queued: drain first
  };

  // Producer: constructs an op of `bytes` (1..kMaxOpBytes) in place with
  // `construct(void* dst)`, dst 64-byte aligned and contiguous.
  template <typename Construct>
  PushResult Emplace(size_t bytes, Construct&& construct) {
    const uint64_t n = (bytes + kSlotBytes - 1) / kSlotBytes;
    uint64_t head = head_.load(std::memory_order_relaxed);
    const uint64_t to_end = kSlots - head % kSlots;
    const uint64_t pad = n > to_end ? to_end : 0;
    if (head + pad + n - cached_tail_ > kSlots) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (head + pad + n - cached_tail_ > kSlots) return PushResult::kFull;
    }
    if (pad) {
      unsigned char* p = slots_[head % kSlots].bytes;
      p[0] = kPadKind;
      const auto count = static_cast<uint32_t>(pad);
      std::memcpy(p + 4, &count, sizeof count);
      head += pad;
    }
    construct(static_cast<void*>(slots_[head % kSlots].bytes));
    const uint64_t used_before = head - cached_tail_;
    head_.store(head + n, std::memory_order_release);
    return used_before < kSlots / 2 && used_before + n >= kSlots / 2 ? PushResult::kOkHalfFull : PushResult::kOk;
  }

  // Producer: a trivially copyable op of one slot or more.
  template <typename Op>
  PushResult Push(const Op& op) {
    static_assert(std::is_trivially_copyable_v<Op>);
    return Emplace(sizeof(Op), [&](void* dst) { std::memcpy(dst, &op, sizeof(Op)); });
  }

  // Producer, at thread exit: no op follows. The consumer frees a closed ring
  // once it is empty.
  void Close() { closed_.store(true, std::memory_order_release); }

  // Consumer: calls `apply(const unsigned char* op)` for every op queued so
  // far, in order; `slots_of(op)` says how many slots an op of a user kind
  // takes. Returns the number of ops applied. A slot is handed back to the
  // producer only after its op was applied.
  template <typename SlotsOf, typename Apply>
  size_t Drain(SlotsOf&& slots_of, Apply&& apply) {
    uint64_t tail = tail_.load(std::memory_order_relaxed);
    const uint64_t head = head_.load(std::memory_order_acquire);
    size_t applied = 0;
    while (tail != head) {
      const unsigned char* p = slots_[tail % kSlots].bytes;
      uint64_t n;
      if (p[0] == kPadKind) {
        uint32_t count;
        std::memcpy(&count, p + 4, sizeof count);
        n = count;
      } else {
        n = slots_of(p);
        apply(p);
        ++applied;
      }
      tail += n;
      tail_.store(tail, std::memory_order_release);
    }
    return applied;
  }

  // Consumer: true once the producer closed the ring and every op was drained.
  // (Reads `closed` before `head`, so nothing pushed before Close() is missed.)
  bool Finished() const {
    if (!closed_.load(std::memory_order_acquire)) return false;
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_relaxed);
  }

  // Ops queued and not yet drained (approximate from other threads).
  uint64_t size() const { return head_.load(std::memory_order_acquire) - tail_.load(std::memory_order_acquire); }

 private:
  struct alignas(64) Slot {
    unsigned char bytes[kSlotBytes];
  };
  const uint64_t thread_id_;
  alignas(64) std::atomic<uint64_t> head_{0};  // written by the producer
  uint64_t cached_tail_ = 0;                   // producer's last view of tail_
  alignas(64) std::atomic<uint64_t> tail_{0};  // written by the consumer
  std::atomic<bool> closed_{false};
  Slot slots_[kSlots];
};

}  // namespace twinscope::cupti
