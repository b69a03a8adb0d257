#include "twinscope/trace_reader.h"

#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "base/crc32c.h"
#include "format/chunk.h"
#include "format/read_passes.h"

namespace twinscope {

struct TraceReader::Impl {
  FILE* file = nullptr;
  uint64_t offset = 0;  // bytes consumed so far
  bool read_called = false;
  ZSTD_DCtx* dctx = nullptr;
  ~Impl() {
    if (file) std::fclose(file);
    if (dctx) ZSTD_freeDCtx(dctx);
  }
};

namespace {
std::mutex g_passes_mu;
std::map<std::string, uint64_t>& Passes() {
  static auto* passes = new std::map<std::string, uint64_t>;
  return *passes;
}
}  // namespace

uint64_t TraceReadPasses(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_passes_mu);
  auto it = Passes().find(path);
  return it == Passes().end() ? 0 : it->second;
}

void ResetTraceReadPasses() {
  std::lock_guard<std::mutex> lock(g_passes_mu);
  Passes().clear();
}

const char* ReadEndName(ReadEnd end) {
  switch (end) {
    case ReadEnd::kComplete:
      return "complete";
    case ReadEnd::kNoSummary:
      return "no-summary";
    case ReadEnd::kTruncated:
      return "truncated";
    case ReadEnd::kCorrupt:
      return "corrupt";
  }
  return "?";
}

TraceReader::~TraceReader() = default;

std::unique_ptr<TraceReader> TraceReader::Open(const std::string& path, std::string* error) {
  auto fail = [&](const std::string& m) {
    if (error) *error = path + ": " + m;
    return nullptr;
  };
  std::unique_ptr<TraceReader> r(new TraceReader());
  r->path_ = path;
  r->impl_ = std::make_unique<Impl>();
  r->impl_->file = std::fopen(path.c_str(), "rb");
  if (!r->impl_->file) return fail(std::string("cannot open: ") + std::strerror(errno));
  format::FilePreamble pre{};
  size_t got = std::fread(&pre, 1, sizeof pre, r->impl_->file);
  if (got < sizeof(pre.magic) || std::memcmp(pre.magic, kFileMagic, sizeof pre.magic) != 0)
    return fail("not a twinscope trace (bad magic: the file does not start with 'TWSCOPE1')");
  if (got < sizeof pre) return fail("file ends inside the header (" + std::to_string(got) + " bytes): nothing to read");
  if (pre.version != kFormatVersion)
    return fail("trace format version " + std::to_string(pre.version) +
                " is not supported (this twinscope reads version " + std::to_string(kFormatVersion) +
                "); use the twinscope release that wrote it");
  if (pre.header_size > format::kMaxHeaderSize)
    return fail("header claims " + std::to_string(pre.header_size) + " bytes (over the 16 MiB limit): damaged file");
  std::string json(pre.header_size, '\0');
  if (std::fread(json.data(), 1, json.size(), r->impl_->file) != json.size())
    return fail("file ends inside the header: nothing to read");
  if (Crc32c(json.data(), json.size()) != pre.header_crc) return fail("header checksum mismatch: damaged file");
  r->header_ = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (r->header_.is_discarded() || !r->header_.is_object()) return fail("header is not a JSON object: damaged file");
  r->version_ = pre.version;
  r->impl_->offset = sizeof pre + pre.header_size;
  r->impl_->dctx = ZSTD_createDCtx();
  return r;
}

std::string_view TraceReader::String(StringId id) const {
  auto it = strings_.find(id);
  return it == strings_.end() ? std::string_view() : std::string_view(it->second);
}

namespace {

template <typename T>
void Deliver(const uint8_t* p, uint32_t n, void (RecordSink::*fn)(const T&), RecordSink& sink) {
  for (uint32_t i = 0; i < n; ++i) {
    T rec;
    std::memcpy(&rec, p + size_t(i) * sizeof(T), sizeof(T));
    (sink.*fn)(rec);
  }
}

}  // namespace

ReadReport TraceReader::Read(RecordSink& sink) {
  {
    std::lock_guard<std::mutex> lock(g_passes_mu);
    ++Passes()[path_];
  }
  ReadReport rep;
  Impl& im = *impl_;
  bool summary_seen = false;
  std::vector<uint8_t> stored, raw;
  auto where = [&](const char* what) {
    return path_ + ": chunk " + std::to_string(rep.chunks + 1) + " at byte " + std::to_string(im.offset) + " " + what +
           "; " + std::to_string(rep.chunks) + " chunks (" + std::to_string(rep.records) + " records) were read";
  };
  auto end_with = [&](ReadEnd e, const std::string& msg) {
    rep.end = e;
    rep.message = msg;
    rep.bytes = im.offset;
    return rep;
  };
  if (im.read_called) return end_with(ReadEnd::kCorrupt, path_ + ": Read() called twice");
  im.read_called = true;

  for (;;) {
    format::ChunkHeader h{};
    size_t got = std::fread(&h, 1, sizeof h, im.file);
    if (got == 0) break;
    if (got < sizeof h)
      return end_with(ReadEnd::kTruncated, where("is cut inside its header (the file was truncated)"));
    if (h.magic != kChunkMagic || Crc32c(&h, offsetof(format::ChunkHeader, header_crc)) != h.header_crc)
      return end_with(ReadEnd::kCorrupt, where("has a bad header checksum"));
    if (h.raw_size > format::kMaxChunkRawSize || h.stored_size > ZSTD_compressBound(h.raw_size) + 64)
      return end_with(ReadEnd::kCorrupt, where("has impossible sizes"));
    stored.resize(h.stored_size);
    if (std::fread(stored.data(), 1, h.stored_size, im.file) != h.stored_size)
      return end_with(ReadEnd::kTruncated, where("is cut inside its data (the file was truncated)"));
    if (Crc32c(stored.data(), stored.size()) != h.payload_crc)
      return end_with(ReadEnd::kCorrupt, where("has a bad checksum"));
    raw.resize(h.raw_size);
    size_t n = ZSTD_decompressDCtx(im.dctx, raw.data(), raw.size(), stored.data(), stored.size());
    if (ZSTD_isError(n) || n != h.raw_size) return end_with(ReadEnd::kCorrupt, where("does not decompress"));

    switch (static_cast<ChunkKind>(h.kind)) {
      case ChunkKind::kRecords: {
        auto type = static_cast<RecordType>(h.record_type);
        uint32_t size = RecordSize(type);
        if (size == 0) return end_with(ReadEnd::kCorrupt, where("holds an unknown record type"));
        if (uint64_t(size) * h.record_count != h.raw_size)
          return end_with(ReadEnd::kCorrupt, where("has a record count that does not match its size"));
        const uint8_t* p = raw.data();
        switch (type) {
          case RecordType::kKernel:
            Deliver(p, h.record_count, &RecordSink::OnKernel, sink);
            break;
          case RecordType::kMemcpy:
            Deliver(p, h.record_count, &RecordSink::OnMemcpy, sink);
            break;
          case RecordType::kMemset:
            Deliver(p, h.record_count, &RecordSink::OnMemset, sink);
            break;
          case RecordType::kApi:
            Deliver(p, h.record_count, &RecordSink::OnApi, sink);
            break;
          case RecordType::kNvtx:
            Deliver(p, h.record_count, &RecordSink::OnNvtx, sink);
            break;
          case RecordType::kLaunch:
            Deliver(p, h.record_count, &RecordSink::OnLaunch, sink);
            break;
          case RecordType::kBlock:
            Deliver(p, h.record_count, &RecordSink::OnBlock, sink);
            break;
        }
        rep.records += h.record_count;
        break;
      }
      case ChunkKind::kStrings: {
        size_t pos = 0;
        while (pos < raw.size()) {
          uint32_t hdr[2];
          if (raw.size() - pos < sizeof hdr) return end_with(ReadEnd::kCorrupt, where("has a malformed string table"));
          std::memcpy(hdr, raw.data() + pos, sizeof hdr);
          pos += sizeof hdr;
          if (raw.size() - pos < hdr[1]) return end_with(ReadEnd::kCorrupt, where("has a malformed string table"));
          strings_[hdr[0]] = std::string(reinterpret_cast<const char*>(raw.data() + pos), hdr[1]);
          pos += hdr[1];
        }
        break;
      }
      case ChunkKind::kStatus:
      case ChunkKind::kSummary: {
        auto j = nlohmann::json::parse(raw.begin(), raw.end(), nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded() || !j.is_object())
          return end_with(ReadEnd::kCorrupt, where("has a status block that is not a JSON object"));
        last_status_ = j;
        bool is_summary = static_cast<ChunkKind>(h.kind) == ChunkKind::kSummary;
        summary_seen = summary_seen || is_summary;
        sink.OnStatus(last_status_, is_summary);
        break;
      }
      default:
        return end_with(ReadEnd::kCorrupt, where("has an unknown chunk kind"));
    }
    im.offset += sizeof h + h.stored_size;
    ++rep.chunks;
  }
  if (!summary_seen)
    return end_with(ReadEnd::kNoSummary,
                    path_ + ": no summary block: the traced process did not shut down cleanly (or is still running); " +
                        std::to_string(rep.chunks) + " chunks (" + std::to_string(rep.records) +
                        " records) were read, counters are from the last status block");
  return end_with(ReadEnd::kComplete, "");
}

}  // namespace twinscope
