// Lane placement for timeline views: slices that may overlap in time (blocks
// resident on one SM together, kernels of parallel graph branches reported on
// one stream, start/end ranges) go on separate lanes so that a viewer never
// mis-nests them. Any placement order is correct: a slice goes on a lane only
// once every slice already there has ended. Single-threaded.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace twinscope::exporters {

class LaneSet {
 public:
  // Index of a lane free at `start` (a new one if none is); busy until `end`.
  size_t Place(uint64_t start, uint64_t end) {
    for (size_t i = 0; i < busy_until_.size(); ++i) {
      if (busy_until_[i] <= start) {
        busy_until_[i] = std::max(start, end);
        return i;
      }
    }
    busy_until_.push_back(std::max(start, end));
    return busy_until_.size() - 1;
  }
  size_t size() const { return busy_until_.size(); }

 private:
  std::vector<uint64_t> busy_until_;
};

}  // namespace twinscope::exporters
