// Writes a Perfetto protobuf trace (the packets of perfetto_trace.proto) to a
// file: one packet sequence whose event names, categories, debug annotation
// names and string values are interned (each string is written once, in the
// packet that first uses it), so a kernel name hundreds of characters long
// costs a few bytes per event. Also places slices that may overlap on lanes:
// sibling tracks of one name, which the Perfetto UI shows as one track.
// Single-threaded; one writer per file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "views/export/join/lanes.h"
#include "views/export/join/perfetto_trace.pb.h"

namespace twinscope::exporters {

class PerfettoWriter {
 public:
  explicit PerfettoWriter(FILE* f);

  // Writes a track descriptor; gives it a new uuid unless it has one.
  // Returns the uuid. Not between Event() and Emit() (it writes a packet).
  uint64_t AddTrack(pftrace::TrackDescriptor d);

  // Starts an event packet at `ts_ns` (trace clock) on `track`; fill it with
  // the calls below, then Emit().
  pftrace::TrackEvent& Event(uint64_t ts_ns, pftrace::TrackEvent::Type type, uint64_t track);
  // Interned ids (0 is never used); a new string goes into the current packet.
  uint64_t NameIid(std::string_view name);
  uint64_t CategoryIid(std::string_view category);
  void SetName(uint64_t iid) { packet_.mutable_track_event()->set_name_iid(iid); }
  void SetCategory(uint64_t iid) { packet_.mutable_track_event()->add_category_iids(iid); }
  void AddFlow(uint64_t id) { packet_.mutable_track_event()->add_flow_ids(id); }
  void AddTerminatingFlow(uint64_t id) { packet_.mutable_track_event()->add_terminating_flow_ids(id); }
  // Debug annotations of the current event ("args" in the UI).
  void Arg(std::string_view name, uint64_t value);
  void ArgInt(std::string_view name, int64_t value);
  void ArgDouble(std::string_view name, double value);
  void ArgBool(std::string_view name, bool value);
  void ArgString(std::string_view name, std::string_view value);        // interned: for repeated values
  void ArgUniqueString(std::string_view name, std::string_view value);  // inline: for one-off values
  // Writes the current packet; returns its size in the file.
  size_t Emit();

  // Flushes; false if a write failed.
  bool Finish();
  uint64_t bytes() const { return bytes_; }
  uint64_t packets() const { return packets_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Table = std::unordered_map<std::string, uint64_t, Hash, std::equal_to<>>;
  void Start(uint64_t ts_ns, bool event);
  uint64_t AnnotationNameIid(std::string_view name);
  pftrace::DebugAnnotation* NewArg(std::string_view name);
  size_t Write();

  FILE* f_;
  pftrace::TracePacket packet_;
  std::string buf_;
  bool ok_ = true, first_packet_ = true;
  uint64_t bytes_ = 0, packets_ = 0;
  uint64_t next_uuid_ = 1;
  Table names_, categories_, annotation_names_, string_values_;
};

// The lanes of one visual track (lanes.h) as sibling tracks of one name,
// which the Perfetto UI shows as one track. Lane tracks are made on first use.
class Lanes {
 public:
  Lanes() = default;
  Lanes(uint64_t parent, std::string name, int32_t rank, std::string description = "");
  // The uuid of a lane free at `start`; it is then busy until `end`. May
  // write a track descriptor: call it before PerfettoWriter::Event().
  uint64_t Place(PerfettoWriter& w, uint64_t start, uint64_t end);
  size_t size() const { return uuids_.size(); }

 private:
  uint64_t parent_ = 0;
  std::string name_, description_;
  int32_t rank_ = 0;
  LaneSet lanes_;
  std::vector<uint64_t> uuids_;  // per lane
};

}  // namespace twinscope::exporters
