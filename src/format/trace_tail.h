// Follows a trace file that another process is still writing, reading only
// chunk headers, to count the records on disk so far (the live status line of
// `twinscope record`). Cheap: 32 bytes read per chunk, payloads skipped.
// Not thread-safe: one per thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace twinscope {

class TraceTail {
 public:
  explicit TraceTail(std::string path) : path_(std::move(path)) {}
  // Reads the chunk headers written since the last call; returns the number
  // of records in whole chunks so far (0 while the file does not exist).
  uint64_t Poll();
  uint64_t bytes() const { return offset_; }
  // Launch records among them (as of the last Poll()).
  uint64_t launches() const { return launches_; }

 private:
  std::string path_;
  uint64_t offset_ = 0;  // start of the next chunk header (0: preamble not read yet)
  uint64_t records_ = 0;
  uint64_t launches_ = 0;
  bool broken_ = false;  // not a trace, or a damaged chunk header: stop following
};

// TraceTail over a run (docs/trace-format.md, "Run folders"): a trace file P
// and the traces in P.d/, or every *.tsc in a folder (a path ending in '/' or
// an existing folder); new files are picked up at each Poll().
class RunTail {
 public:
  explicit RunTail(std::string path);
  uint64_t Poll();  // records in all traces so far
  uint64_t bytes() const;
  uint64_t launches() const;
  size_t traces() const { return tails_.size(); }

 private:
  std::string path_;
  std::map<std::string, TraceTail> tails_;
  uint64_t records_ = 0;
};

}  // namespace twinscope
