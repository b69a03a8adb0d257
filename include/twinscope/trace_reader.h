// Streaming reader of twinscope trace files (format v1, docs/trace-format.md).
//
// Reads chunk by chunk, holding one decompressed chunk and the string table in
// memory, and hands each record to a RecordSink. A file cut at any byte is read
// up to its last whole chunk and the report says so; a bad magic, an unknown
// version or a bad checksum stops the read with a precise message, after every
// record before the damage has been delivered. Not thread-safe: one reader per
// thread.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>

#include "twinscope/records.h"

namespace twinscope {

// Receives records in file order. Override what you need.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual void OnKernel(const KernelRecord&) {}
  virtual void OnMemcpy(const MemcpyRecord&) {}
  virtual void OnMemset(const MemsetRecord&) {}
  virtual void OnApi(const ApiRecord&) {}
  virtual void OnNvtx(const NvtxRecord&) {}
  virtual void OnLaunch(const LaunchRecord&) {}
  virtual void OnBlock(const BlockRecord&) {}
  // A STATUS or SUMMARY chunk (the JSON object written by the collector).
  virtual void OnStatus(const nlohmann::json&, bool is_summary) {}
};

// How a read ended.
enum class ReadEnd {
  kComplete,   // whole file read, summary chunk present
  kNoSummary,  // file ends on a chunk boundary but has no summary: the
               // process did not shut down cleanly (or is still running)
  kTruncated,  // file cut inside a chunk: the partial chunk was skipped
  kCorrupt,    // bad checksum or malformed chunk: read stopped there
};

struct ReadReport {
  ReadEnd end = ReadEnd::kComplete;
  std::string message;  // human-readable, names the file, chunk and byte
  uint64_t chunks = 0;
  uint64_t records = 0;
  uint64_t bytes = 0;  // bytes of the file consumed by whole chunks
  bool ok() const { return end == ReadEnd::kComplete || end == ReadEnd::kNoSummary; }
};

class TraceReader {
 public:
  // Opens `path` and reads its header. Fails on a missing file, bad magic,
  // unknown version or damaged header.
  static std::unique_ptr<TraceReader> Open(const std::string& path, std::string* error);

  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  // The header's JSON object (role, host, pid, command, versions, clock...).
  const nlohmann::json& header() const { return header_; }
  uint32_t version() const { return version_; }
  const std::string& path() const { return path_; }

  // Streams every record to `sink`. Call once.
  ReadReport Read(RecordSink& sink);

  // Interned strings seen so far (complete after Read()).
  std::string_view String(StringId id) const;
  const std::unordered_map<StringId, std::string>& strings() const { return strings_; }

  // The last STATUS/SUMMARY object seen (empty object if none).
  const nlohmann::json& last_status() const { return last_status_; }

 private:
  TraceReader() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  uint32_t version_ = 0;
  nlohmann::json header_;
  nlohmann::json last_status_ = nlohmann::json::object();
  std::unordered_map<StringId, std::string> strings_;
};

// Convenience for tools: read a whole file into a sink and return the report,
// or set *error if the file cannot be opened.
const char* ReadEndName(ReadEnd end);

}  // namespace twinscope
