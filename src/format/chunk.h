// Byte layout of the file header and chunk headers (docs/trace-format.md).
// Internal to src/format: writer and reader share it.
#pragma once

#include <cstdint>

#include "twinscope/records.h"

namespace twinscope::format {

// File starts with FilePreamble, then `header_size` bytes of JSON.
struct FilePreamble {
  char magic[8];
  uint32_t version;
  uint32_t header_size;
  uint32_t header_crc;  // CRC-32C of the JSON bytes
  uint32_t reserved;
};
static_assert(sizeof(FilePreamble) == 24);

// Each chunk: ChunkHeader, then `stored_size` bytes (one zstd frame that
// decompresses to `raw_size` bytes).
struct ChunkHeader {
  uint32_t magic;        // kChunkMagic
  uint32_t kind;         // ChunkKind
  uint32_t record_type;  // RecordType for kRecords chunks, else 0
  uint32_t record_count;
  uint32_t raw_size;
  uint32_t stored_size;
  uint32_t payload_crc;  // CRC-32C of the stored bytes
  uint32_t header_crc;   // CRC-32C of the 28 bytes above
};
static_assert(sizeof(ChunkHeader) == 32);

// Limits a reader enforces so damaged files cannot make it allocate wildly.
inline constexpr uint32_t kMaxChunkRawSize = 64u << 20;
inline constexpr uint32_t kMaxHeaderSize = 16u << 20;

}  // namespace twinscope::format
