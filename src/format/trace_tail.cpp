#include "format/trace_tail.h"

#include <cstdio>
#include <cstring>

#include "base/crc32c.h"
#include "format/chunk.h"

namespace twinscope {

uint64_t TraceTail::Poll() {
  if (broken_) return records_;
  FILE* f = std::fopen(path_.c_str(), "rb");
  if (!f) return records_;
  if (offset_ == 0) {
    format::FilePreamble pre{};
    if (std::fread(&pre, 1, sizeof pre, f) == sizeof pre) {
      if (std::memcmp(pre.magic, kFileMagic, sizeof pre.magic) != 0) broken_ = true;
      else offset_ = sizeof pre + pre.header_size;
    }
  }
  while (offset_ != 0 && !broken_) {
    format::ChunkHeader h{};
    if (std::fseek(f, static_cast<long>(offset_), SEEK_SET) != 0 || std::fread(&h, 1, sizeof h, f) != sizeof h) break;
    if (h.magic != kChunkMagic || Crc32c(&h, offsetof(format::ChunkHeader, header_crc)) != h.header_crc) {
      broken_ = true;
      break;
    }
    // Count the chunk only once its payload is on disk.
    if (std::fseek(f, static_cast<long>(offset_ + sizeof h + h.stored_size - 1), SEEK_SET) != 0 || std::fgetc(f) == EOF)
      break;
    if (h.kind == static_cast<uint32_t>(ChunkKind::kRecords)) {
      records_ += h.record_count;
      if (h.record_type == static_cast<uint32_t>(RecordType::kLaunch)) launches_ += h.record_count;
    }
    offset_ += sizeof h + h.stored_size;
  }
  std::fclose(f);
  return records_;
}

}  // namespace twinscope
