#include "reader_fuzz_entry.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "twinscope/trace_reader.h"

namespace {
struct NullSink : twinscope::RecordSink {
  uint64_t n = 0;
  void OnKernel(const twinscope::KernelRecord& r) override { n += r.start_ns; }
  void OnBlock(const twinscope::BlockRecord& r) override { n += r.sm; }
};
}  // namespace

int FuzzReadTrace(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/twinscope_fuzz_" + std::to_string(getpid()) + ".tsc";
  // A new file each time, not the old one truncated: ext4 writes a file
  // truncated and rewritten through to disk on close (auto_da_alloc), which
  // made every input cost milliseconds.
  unlink(path.c_str());
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  std::string err;
  auto r = twinscope::TraceReader::Open(path, &err);
  if (!r) return 0;
  NullSink sink;
  r->Read(sink);
  for (auto& [id, s] : r->strings()) sink.n += s.size();
  return 0;
}
