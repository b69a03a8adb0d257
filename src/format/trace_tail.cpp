#include "format/trace_tail.h"

#include <dirent.h>
#include <sys/stat.h>

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
      if (std::memcmp(pre.magic, kFileMagic, sizeof pre.magic) != 0)
        broken_ = true;
      else
        offset_ = sizeof pre + pre.header_size;
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

namespace {

void AddTracesIn(const std::string& dir, std::map<std::string, TraceTail>* tails) {
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 5 || name[0] == '.' || name.compare(name.size() - 4, 4, ".tsc") != 0) continue;
    const std::string p = dir + "/" + name;
    if (!tails->count(p)) tails->emplace(p, TraceTail(p));
  }
  closedir(d);
}

}  // namespace

RunTail::RunTail(std::string path) : path_(std::move(path)) {}

uint64_t RunTail::Poll() {
  struct stat st {};
  const bool folder = (!path_.empty() && path_.back() == '/') || (stat(path_.c_str(), &st) == 0 && S_ISDIR(st.st_mode));
  if (folder) {
    AddTracesIn(path_, &tails_);
  } else {
    if (!tails_.count(path_)) tails_.emplace(path_, TraceTail(path_));
    AddTracesIn(path_ + ".d", &tails_);
  }
  records_ = 0;
  for (auto& [p, t] : tails_) records_ += t.Poll();
  return records_;
}

uint64_t RunTail::bytes() const {
  uint64_t b = 0;
  for (const auto& [p, t] : tails_) b += t.bytes();
  return b;
}

uint64_t RunTail::launches() const {
  uint64_t n = 0;
  for (const auto& [p, t] : tails_) n += t.launches();
  return n;
}

}  // namespace twinscope
