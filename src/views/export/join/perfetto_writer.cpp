// Perfetto packet writer and lane placement (perfetto_writer.h).
#include "views/export/join/perfetto_writer.h"

#include <google/protobuf/io/coded_stream.h>

namespace twinscope::exporters {
namespace {

constexpr uint32_t kSequenceId = 1;
constexpr size_t kFlushAt = 1 << 20;
constexpr uint8_t kTracePacketTag = (1 << 3) | 2;  // Trace.packet: field 1, length-delimited

}  // namespace

PerfettoWriter::PerfettoWriter(FILE* f) : f_(f) { buf_.reserve(kFlushAt + 4096); }

void PerfettoWriter::Start(uint64_t ts_ns, bool event) {
  packet_.Clear();
  packet_.set_trusted_packet_sequence_id(kSequenceId);
  uint32_t flags = event ? pftrace::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE : 0;
  if (first_packet_) flags |= pftrace::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED;
  first_packet_ = false;
  if (flags) packet_.set_sequence_flags(flags);
  if (event) packet_.set_timestamp(ts_ns);
}

uint64_t PerfettoWriter::AddTrack(pftrace::TrackDescriptor d) {
  if (!d.has_uuid()) d.set_uuid(next_uuid_++);
  const uint64_t uuid = d.uuid();
  Start(0, false);
  *packet_.mutable_track_descriptor() = std::move(d);
  Write();
  return uuid;
}

pftrace::TrackEvent& PerfettoWriter::Event(uint64_t ts_ns, pftrace::TrackEvent::Type type, uint64_t track) {
  Start(ts_ns, true);
  pftrace::TrackEvent* e = packet_.mutable_track_event();
  e->set_type(type);
  e->set_track_uuid(track);
  return *e;
}

uint64_t PerfettoWriter::NameIid(std::string_view name) {
  auto it = names_.find(name);
  if (it != names_.end()) return it->second;
  const uint64_t iid = names_.size() + 1;
  names_.emplace(std::string(name), iid);
  auto* e = packet_.mutable_interned_data()->add_event_names();
  e->set_iid(iid);
  e->set_name(std::string(name));
  return iid;
}

uint64_t PerfettoWriter::CategoryIid(std::string_view category) {
  auto it = categories_.find(category);
  if (it != categories_.end()) return it->second;
  const uint64_t iid = categories_.size() + 1;
  categories_.emplace(std::string(category), iid);
  auto* e = packet_.mutable_interned_data()->add_event_categories();
  e->set_iid(iid);
  e->set_name(std::string(category));
  return iid;
}

uint64_t PerfettoWriter::AnnotationNameIid(std::string_view name) {
  auto it = annotation_names_.find(name);
  if (it != annotation_names_.end()) return it->second;
  const uint64_t iid = annotation_names_.size() + 1;
  annotation_names_.emplace(std::string(name), iid);
  auto* e = packet_.mutable_interned_data()->add_debug_annotation_names();
  e->set_iid(iid);
  e->set_name(std::string(name));
  return iid;
}

pftrace::DebugAnnotation* PerfettoWriter::NewArg(std::string_view name) {
  const uint64_t iid = AnnotationNameIid(name);
  auto* a = packet_.mutable_track_event()->add_debug_annotations();
  a->set_name_iid(iid);
  return a;
}

void PerfettoWriter::Arg(std::string_view name, uint64_t value) { NewArg(name)->set_uint_value(value); }
void PerfettoWriter::ArgInt(std::string_view name, int64_t value) { NewArg(name)->set_int_value(value); }
void PerfettoWriter::ArgDouble(std::string_view name, double value) { NewArg(name)->set_double_value(value); }
void PerfettoWriter::ArgBool(std::string_view name, bool value) { NewArg(name)->set_bool_value(value); }
void PerfettoWriter::ArgUniqueString(std::string_view name, std::string_view value) {
  NewArg(name)->set_string_value(std::string(value));
}

void PerfettoWriter::ArgString(std::string_view name, std::string_view value) {
  auto* a = NewArg(name);
  auto it = string_values_.find(value);
  uint64_t iid;
  if (it != string_values_.end()) {
    iid = it->second;
  } else {
    iid = string_values_.size() + 1;
    string_values_.emplace(std::string(value), iid);
    auto* e = packet_.mutable_interned_data()->add_debug_annotation_string_values();
    e->set_iid(iid);
    e->set_str(std::string(value));
  }
  a->set_string_value_iid(iid);
}

size_t PerfettoWriter::Emit() { return Write(); }

size_t PerfettoWriter::Write() {
  using google::protobuf::io::CodedOutputStream;
  const size_t n = packet_.ByteSizeLong();
  const size_t at = buf_.size();
  buf_.resize(at + 1 + CodedOutputStream::VarintSize64(n) + n);
  auto* p = reinterpret_cast<uint8_t*>(buf_.data() + at);
  *p++ = kTracePacketTag;
  p = CodedOutputStream::WriteVarint64ToArray(n, p);
  packet_.SerializeWithCachedSizesToArray(p);
  const size_t written = buf_.size() - at;
  bytes_ += written;
  ++packets_;
  if (buf_.size() >= kFlushAt) Finish();
  return written;
}

bool PerfettoWriter::Finish() {
  if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size()) ok_ = false;
  buf_.clear();
  return ok_;
}

Lanes::Lanes(uint64_t parent, std::string name, int32_t rank, std::string description)
    : parent_(parent), name_(std::move(name)), description_(std::move(description)), rank_(rank) {}

uint64_t Lanes::Place(PerfettoWriter& w, uint64_t start, uint64_t end) {
  const size_t lane = lanes_.Place(start, end);
  if (lane < uuids_.size()) return uuids_[lane];
  pftrace::TrackDescriptor d;
  if (parent_) d.set_parent_uuid(parent_);
  d.set_name(name_);
  if (!description_.empty()) d.set_description(description_);
  d.set_sibling_order_rank(rank_);
  uuids_.push_back(w.AddTrack(std::move(d)));
  return uuids_.back();
}

}  // namespace twinscope::exporters
