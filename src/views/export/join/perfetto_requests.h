// The "Requests" group of a joined serving run's Perfetto trace (docs/join.md,
// "Timeline views"): one track per request of the model's request table with
// its life (arrival to done, the server's times on the primary's clock), an
// instant at its first token, and one slice per served step it was in (the
// step's GPU span; args from the model's ServedStep), from which one flow per
// target launch leads to that launch's kernel slice.
//
// Written before the primary's records are streamed: a step's span starts at
// or before each of its kernels, so in trace_processor's order (timestamp,
// then place in the file) every flow starts before the kernel slice that ends
// it. The timeline asks Take() for a kernel's links as it writes the kernel.
// Steps that do not nest inside the life slice (the server's clock and CUPTI's
// disagree) go on lanes beside it, never mis-nested. Single-threaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "views/export/join/block_detail.h"
#include "views/export/join/join_export.h"
#include "views/export/join/perfetto_writer.h"

namespace twinscope::exporters {

class RequestTracks {
 public:
  RequestTracks(PerfettoWriter& w, const join::JoinedModel& m, uint64_t base_ns);

  // Writes the group, its tracks and their slices.
  void Write(const RequestTrackBounds& bounds);

  // What a kernel record at `spot` adds when it is a target launch: its
  // launch id (index in the model's primary launches, SQLite launches.id)
  // and the flows that end at it. Given once per spot.
  struct KernelLinks {
    size_t launch = 0;
    std::vector<uint64_t> flows;
  };
  std::optional<KernelLinks> Take(const KernelSpot& spot);

  // After the stream: counts the flows whose kernel slice never came.
  void Finish();

  // Args of the "twinscope" instant, and the warnings the counts call for.
  void SummaryArgs(const RequestTrackBounds& bounds);
  std::vector<std::string> Warnings(const RequestTrackBounds& bounds) const;

  RequestTrackCounts counts;

 private:
  struct Life {
    uint64_t start = 0, end = 0;
    const char* placed = nullptr;  // how it was placed (an arg)
  };
  std::optional<Life> PlaceLife(const join::ServedRequest& r) const;
  void WriteRequest(const join::ServedRequest& r, const Life& life, int32_t rank, const RequestTrackBounds& bounds);
  void WriteStep(const join::ServedStep& s, uint64_t track, const RequestTrackBounds& bounds);
  uint64_t Ts(uint64_t t) const { return t > base_ ? t - base_ : 0; }
  uint64_t Category(uint64_t& slot, const char* name);

  PerfettoWriter& w_;
  const join::JoinedModel& m_;
  const uint64_t base_;
  uint64_t group_ = 0;
  uint64_t next_flow_ = 0;
  uint64_t cat_request_ = 0, cat_step_ = 0;
  std::unordered_map<uint64_t, const join::ServedStep*> steps_;  // by index
  std::unordered_map<uint64_t, std::string> launch_ids_;         // step index -> "[3,4]"
  std::unordered_map<KernelSpot, KernelLinks, KernelSpotHash> links_;
};

}  // namespace twinscope::exporters
