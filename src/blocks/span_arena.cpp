#include "blocks/span_arena.h"

#include <algorithm>

namespace twinscope::blocks {

std::optional<SpanArena::Span> SpanArena::Take(uint64_t n) {
  if (n == 0 || n > bytes_) return std::nullopt;
  uint64_t off = 0;
  if (live_.empty()) {
    off = 0;  // all free: start over, in room that is zero again
  } else {
    const uint64_t tail = live_.front().offset;
    if (head_ > tail) {  // free: [head, end) and [0, tail)
      if (head_ + n <= bytes_) {
        off = head_;
      } else if (n <= tail) {
        off = 0;
      } else {
        return std::nullopt;
      }
    } else if (head_ + n <= tail) {  // wrapped: free [head, tail)
      off = head_;
    } else {
      return std::nullopt;
    }
  }
  Span s{off, zero_reliable_ && off + n <= high_water_};
  high_water_ = std::max(high_water_, off + n);
  head_ = off + n;
  live_.push_back(Live{off, n, false});
  return s;
}

void SpanArena::Release(uint64_t offset, bool zeroed) {
  for (Live& l : live_) {
    if (l.offset == offset && !l.released) {
      l.released = true;
      if (!zeroed) zero_reliable_ = false;
      break;
    }
  }
  while (!live_.empty() && live_.front().released) live_.pop_front();
}

uint64_t SpanArena::used() const {
  if (live_.empty()) return 0;
  const uint64_t tail = live_.front().offset;
  return head_ > tail ? head_ - tail : bytes_ - tail + head_;
}

}  // namespace twinscope::blocks
