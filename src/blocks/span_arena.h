// Offsets within one device arena, handed out as contiguous spans in order (a
// ring) and released in any order; a span's room is reused once every span
// taken before it is released. Pure bookkeeping (no device calls), so the
// block probe's buffer policy is tested on the CPU.
//
// It also knows which spans need no zeroing: bytes never handed out are
// garbage, and a released span is zero again only if its owner zeroed it
// (and waited for that) before Release(offset, true). A span is known zero if
// it lies wholly in room handed out before and every release so far was
// zeroed; one Release(offset, false) makes no span known zero again.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

namespace twinscope::blocks {

class SpanArena {
 public:
  explicit SpanArena(uint64_t bytes) : bytes_(bytes) {}

  struct Span {
    uint64_t offset = 0;
    bool known_zero = false;  // all zero already: no memset needed before use
  };
  // A contiguous span of `n` bytes, or nullopt if there is no such room now.
  std::optional<Span> Take(uint64_t n);
  // Gives back the span at `offset` (it must be live); `zeroed`: its bytes are
  // all zero again and nothing will write them.
  void Release(uint64_t offset, bool zeroed);

  uint64_t bytes() const { return bytes_; }
  uint64_t live_spans() const { return live_.size(); }
  // Bytes from the oldest live span to the next free byte (incl. room skipped at a wrap).
  uint64_t used() const;

 private:
  struct Live {
    uint64_t offset;
    uint64_t bytes;
    bool released;
  };
  uint64_t bytes_;
  uint64_t head_ = 0;        // where the next span starts if it fits
  uint64_t high_water_ = 0;  // [0, high_water_) has been handed out before
  bool zero_reliable_ = true;
  std::deque<Live> live_;  // in the order taken; released from the front
};

}  // namespace twinscope::blocks
