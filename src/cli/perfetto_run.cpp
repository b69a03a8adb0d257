// Merges each process's Perfetto export into one trace (perfetto_run.h). A Perfetto trace is a
// sequence of packets (field 1 of Trace), so the merge streams each file's packets, rewrites the
// fields that name tracks, flows, pids, sequences and times, and appends them.
#include "cli/perfetto_run.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "views/export/timeline_scan.h"

#if __has_include("views/export/join/perfetto_trace.pb.h")
#include "views/export/join/perfetto_trace.pb.h"
#define TWINSCOPE_PERFETTO_RUN 1
#endif

namespace twinscope::cli {

#ifdef TWINSCOPE_PERFETTO_RUN
namespace {

// A bijection of 64-bit ids per process (splitmix64 of id + process tag): uuids and flow ids of
// different processes never meet (the chance is 2^-64 per pair).
uint64_t Mix(uint64_t id, size_t process) {
  uint64_t z = id + (process + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool ReadVarint(FILE* f, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const int c = std::fgetc(f);
    if (c == EOF) return false;
    *v |= uint64_t(c & 0x7f) << shift;
    if (!(c & 0x80)) return true;
  }
  return false;
}

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

struct Merge {
  size_t index = 0;
  int64_t shift = 0;  // added to every packet timestamp
  int64_t pid = 0;
  std::string label;
  std::string description;    // the process track's: host, trace, clock alignment
  uint64_t process_uuid = 0;  // the process track (mixed), once seen
};

void Rewrite(pftrace::TracePacket& p, Merge& m) {
  if (p.has_trusted_packet_sequence_id())
    p.set_trusted_packet_sequence_id(p.trusted_packet_sequence_id() + static_cast<uint32_t>(m.index) * 65536u);
  if (p.has_timestamp()) p.set_timestamp(static_cast<uint64_t>(static_cast<int64_t>(p.timestamp()) + m.shift));
  if (p.has_track_descriptor()) {
    pftrace::TrackDescriptor* d = p.mutable_track_descriptor();
    if (d->has_uuid()) d->set_uuid(Mix(d->uuid(), m.index));
    if (d->has_parent_uuid()) d->set_parent_uuid(Mix(d->parent_uuid(), m.index));
    if (d->has_process()) {
      d->mutable_process()->set_pid(static_cast<int32_t>(m.pid));
      d->mutable_process()->set_process_name(m.label);
      d->set_description(m.description);
      m.process_uuid = d->uuid();
    } else if (d->has_thread()) {
      d->mutable_thread()->set_pid(static_cast<int32_t>(m.pid));
    } else if (!d->has_parent_uuid() && m.process_uuid) {
      d->set_parent_uuid(m.process_uuid);  // GPU streams, blocks by SM: inside the process's group
    }
  }
  if (p.has_track_event()) {
    pftrace::TrackEvent* e = p.mutable_track_event();
    if (e->has_track_uuid()) e->set_track_uuid(Mix(e->track_uuid(), m.index));
    for (int i = 0; i < e->flow_ids_size(); ++i) e->set_flow_ids(i, Mix(e->flow_ids(i), m.index));
    for (int i = 0; i < e->terminating_flow_ids_size(); ++i)
      e->set_terminating_flow_ids(i, Mix(e->terminating_flow_ids(i), m.index));
  }
}

// Appends the packets of `part` to `out`, rewritten. Returns the packets written.
StatusOr<uint64_t> Append(const std::string& part, FILE* out, Merge& m) {
  FILE* in = std::fopen(part.c_str(), "rb");
  if (!in) return Status::Error("cannot read " + part + ": " + std::strerror(errno));
  pftrace::TracePacket packet;
  std::string bytes, frame;
  uint64_t packets = 0;
  Status st = Status::Ok();
  for (uint64_t tag; ReadVarint(in, &tag);) {
    uint64_t size = 0;
    if (tag != ((1 << 3) | 2) || !ReadVarint(in, &size) || size > (1ull << 30)) {
      st = Status::Error(part + ": not a Perfetto trace of packets");
      break;
    }
    bytes.resize(size);
    if (size && std::fread(bytes.data(), 1, size, in) != size) {
      st = Status::Error(part + ": cut inside a packet");
      break;
    }
    if (!packet.ParseFromString(bytes)) {
      st = Status::Error(part + ": a packet does not parse");
      break;
    }
    Rewrite(packet, m);
    frame.clear();
    frame.push_back(static_cast<char>(tag));
    const std::string body = packet.SerializeAsString();
    PutVarint(&frame, body.size());
    frame += body;
    if (std::fwrite(frame.data(), 1, frame.size(), out) != frame.size()) {
      st = Status::Error(std::string("write error: ") + std::strerror(errno) + " (disk full?)");
      break;
    }
    ++packets;
  }
  std::fclose(in);
  if (!st.ok()) return st;
  return packets;
}

}  // namespace

StatusOr<exporters::TimelineExportResult> ExportPerfettoRun(const std::vector<exporters::RunProcess>& processes,
                                                            const std::string& out,
                                                            const exporters::BlockBounds& bounds) {
  if (processes.empty()) return Status::Error("no process with GPU work to export");
  // Each trace's time base, as its own export uses it, and the run's earliest time on the run's clock.
  std::vector<int64_t> bases;
  int64_t run_base = INT64_MAX;
  for (const auto& p : processes) {
    std::string error;
    auto reader = TraceReader::Open(p.trace, &error);
    if (!reader) return Status::Error(error);
    exporters::TimelineScan scan(false);
    reader->Read(scan);
    bases.push_back(static_cast<int64_t>(scan.Base()));
    if (scan.Base()) run_base = std::min(run_base, static_cast<int64_t>(scan.Base()) + p.to_realtime_ns);
  }
  if (run_base == INT64_MAX) run_base = 0;
  FILE* f = std::fopen(out.c_str(), "wb");
  if (!f) return Status::Error("cannot write " + out + ": " + std::strerror(errno));
  exporters::TimelineExportResult result;
  const std::string part = out + ".part";
  for (size_t i = 0; i < processes.size(); ++i) {
    const auto& p = processes[i];
    auto r = exporters::ExportPerfetto(p.trace, part, bounds);
    if (!r.ok()) {
      std::fclose(f);
      std::remove(part.c_str());
      return Status::Error(p.trace + ": " + r.status().message());
    }
    Merge m;
    m.index = i;
    m.shift = bases[i] ? bases[i] + p.to_realtime_ns - run_base : 0;
    m.pid = p.group_pid;
    m.label = p.label;
    m.description =
        "host " + p.host + ", trace " + p.trace + "; " +
        (p.aligned
             ? "times on CLOCK_REALTIME through its clock pair (CUPTI + " + std::to_string(p.to_realtime_ns) + " ns)"
             : "no clock pair: times as recorded") +
        "; the run: " + exporters::AlignmentText(processes) + ", time 0 = " + std::to_string(run_base) + " ns";
    auto packets = Append(part, f, m);
    std::remove(part.c_str());
    if (!packets.ok()) {
      std::fclose(f);
      return packets.status();
    }
    result.records += r->records;
    result.written += *packets;
    result.skipped_invalid += r->skipped_invalid;
    result.blocks.launches_drawn += r->blocks.launches_drawn;
    result.blocks.launches_over_bounds += r->blocks.launches_over_bounds;
    result.blocks.blocks_drawn += r->blocks.blocks_drawn;
    for (const auto& w : r->warnings) result.warnings.push_back(p.trace + ": " + w);
    if (i == 0 || r->report.end > result.report.end) result.report = r->report;
  }
  if (std::fclose(f) != 0) return Status::Error("error writing " + out + ": " + std::strerror(errno));
  return result;
}

#else

StatusOr<exporters::TimelineExportResult> ExportPerfettoRun(const std::vector<exporters::RunProcess>&,
                                                            const std::string&, const exporters::BlockBounds&) {
  if (exporters::PerfettoAvailable())  // the exporter is built but its trace proto was not found here
    return Status::Error(
        "this twinscope was built without the merge of Perfetto traces (src/cli/perfetto_run.cpp did not find "
        "views/export/join/perfetto_trace.pb.h): a build problem; --format chrome writes every process in one file");
  return Status::Error(
      "this twinscope was built without the Perfetto exporter (TWINSCOPE_WITH_PERFETTO=OFF); --format chrome "
      "writes every process in one file (ui.perfetto.dev opens it)");
}

#endif

}  // namespace twinscope::cli
