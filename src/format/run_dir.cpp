// The run lister (run_dir.h): chunk headers and status blocks, no records.
#include "format/run_dir.h"

#include <dirent.h>
#include <sys/stat.h>
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/crc32c.h"
#include "format/chunk.h"

namespace twinscope {
namespace {

bool IsFolder(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsFile(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The *.tsc files directly in `dir`, sorted by name.
std::vector<std::string> TracesIn(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name[0] == '.' || !EndsWith(name, ".tsc")) continue;
    if (IsFile(dir + "/" + name)) out.push_back(dir + "/" + name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

int64_t Int(const nlohmann::json& j, const char* key, int64_t fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

ProcessInfo ParseProcess(const nlohmann::json& h) {
  ProcessInfo p;
  const nlohmann::json empty = nlohmann::json::object();
  auto it = h.find("process");
  const nlohmann::json& o = it != h.end() && it->is_object() ? *it : empty;
  p.pid = static_cast<int>(Int(o, "pid", Int(h, "pid", 0)));
  p.ppid = static_cast<int>(Int(o, "ppid", 0));
  if (auto a = o.find("ancestors"); a != o.end() && a->is_array())
    for (const auto& v : *a)
      if (v.is_number_integer()) p.ancestors.push_back(v.get<int>());
  p.top = o.value("top", false);
  auto str = [](const nlohmann::json& j, const char* key) {
    auto i = j.find(key);
    return i != j.end() && i->is_string() ? i->get<std::string>() : std::string();
  };
  p.host = str(o, "host");
  if (p.host.empty()) p.host = str(h, "host");
  p.name = str(o, "name");
  const nlohmann::json& cl = o.contains("command_line") ? o["command_line"] : h.value("command_line", empty);
  if (cl.is_array())
    for (const auto& a : cl)
      if (a.is_string()) p.command_line.push_back(a.get<std::string>());
  p.start_realtime_ns = static_cast<uint64_t>(Int(o, "start_realtime_ns", Int(h, "start_realtime_ns", 0)));
  if (auto r = o.find("rank"); r != o.end() && r->is_object()) {
    if (r->contains("rank")) p.rank = Int(*r, "rank", -1);
    if (r->contains("local_rank")) p.local_rank = Int(*r, "local_rank", -1);
    if (r->contains("world_size")) p.world_size = Int(*r, "world_size", -1);
    p.rank_source = str(*r, "source");
  }
  return p;
}

}  // namespace

std::string ProcessInfo::Command() const {
  std::string s;
  for (const auto& a : command_line) s += (s.empty() ? "" : " ") + a;
  return s;
}

uint64_t RunTrace::Launches() const {
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& c = last_status.contains("counters") ? last_status["counters"] : empty;
  const char* key = role == "shadow" ? "launches_traced" : "launches_seen";
  const int64_t counted = c.is_object() ? Int(c, key, 0) : 0;
  return std::max<uint64_t>(launch_records, counted > 0 ? static_cast<uint64_t>(counted) : 0);
}

bool RunTrace::gpu_work() const {
  if (kernel_records || launch_records || block_records || memcpy_records || memset_records) return true;
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& c = last_status.contains("counters") ? last_status["counters"] : empty;
  if (!c.is_object()) return false;
  for (const char* k : {"launches_seen", "launches_matching", "kernel_records"})
    if (Int(c, k, 0) > 0) return true;
  return false;
}

size_t RunSide::WithGpuWork() const {
  size_t n = 0;
  for (const auto& t : traces) n += t.gpu_work() ? 1 : 0;
  return n;
}

const RunSide* RunListing::Side(const std::string& name) const {
  for (const auto& s : sides)
    if (s.name == name) return &s;
  return nullptr;
}

RunTrace ScanTrace(const std::string& path) {
  RunTrace t;
  t.path = path;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    t.end = "unreadable";
    t.error = path + ": cannot open: " + std::strerror(errno);
    return t;
  }
  auto fail = [&](const std::string& end, const std::string& msg) {
    t.end = end;
    t.error = path + ": " + msg;
  };
  format::FilePreamble pre{};
  const size_t got = std::fread(&pre, 1, sizeof pre, f);
  std::string json;
  if (got >= sizeof pre.magic && std::memcmp(pre.magic, kFileMagic, sizeof pre.magic) != 0) {
    fail("unreadable", "not a twinscope trace (bad magic)");
  } else if (got < sizeof pre) {
    fail("unreadable", "file ends inside the header (a process killed as it started?)");
  } else if (pre.version != kFormatVersion) {
    fail("unreadable", "trace format version " + std::to_string(pre.version) + " is not supported");
  } else if (pre.header_size > format::kMaxHeaderSize) {
    fail("unreadable", "header too large: damaged file");
  } else {
    json.resize(pre.header_size);
    if (std::fread(json.data(), 1, json.size(), f) != json.size())
      fail("unreadable", "file ends inside the header");
    else if (Crc32c(json.data(), json.size()) != pre.header_crc)
      fail("unreadable", "header checksum mismatch: damaged file");
  }
  if (!t.error.empty()) {
    std::fclose(f);
    return t;
  }
  t.header = nlohmann::json::parse(json, nullptr, false);
  if (!t.header.is_object()) {
    t.header = nlohmann::json::object();
    fail("unreadable", "header is not a JSON object: damaged file");
    std::fclose(f);
    return t;
  }
  t.process = ParseProcess(t.header);
  if (auto r = t.header.find("role"); r != t.header.end() && r->is_string()) t.role = r->get<std::string>();
  uint64_t offset = sizeof pre + pre.header_size;
  std::vector<uint8_t> stored, raw;
  for (;;) {
    format::ChunkHeader h{};
    const size_t n = std::fread(&h, 1, sizeof h, f);
    if (n == 0) break;
    if (n < sizeof h) {
      fail("truncated", "cut inside a chunk header at byte " + std::to_string(offset));
      break;
    }
    if (h.magic != kChunkMagic || Crc32c(&h, offsetof(format::ChunkHeader, header_crc)) != h.header_crc ||
        h.raw_size > format::kMaxChunkRawSize) {
      fail("corrupt", "bad chunk header at byte " + std::to_string(offset));
      break;
    }
    const auto kind = static_cast<ChunkKind>(h.kind);
    if (kind == ChunkKind::kStatus || kind == ChunkKind::kSummary) {
      stored.resize(h.stored_size);
      if (std::fread(stored.data(), 1, stored.size(), f) != stored.size()) {
        fail("truncated", "cut inside a status block at byte " + std::to_string(offset));
        break;
      }
      if (Crc32c(stored.data(), stored.size()) != h.payload_crc) {
        fail("corrupt", "status block with a bad checksum at byte " + std::to_string(offset));
        break;
      }
      raw.resize(h.raw_size);
      const size_t d = ZSTD_decompress(raw.data(), raw.size(), stored.data(), stored.size());
      if (ZSTD_isError(d) || d != h.raw_size) {
        fail("corrupt", "status block does not decompress at byte " + std::to_string(offset));
        break;
      }
      auto j = nlohmann::json::parse(raw.begin(), raw.end(), nullptr, false);
      if (j.is_object()) {
        t.last_status = std::move(j);
        if (kind == ChunkKind::kSummary) {
          t.has_summary = true;
          t.summary_at_stop_request = t.last_status.value("at_stop_request", false);
        }
      }
    } else {
      // Skip the payload, but only count the chunk once all of it is on disk.
      if (h.stored_size > 0 &&
          (std::fseek(f, static_cast<long>(h.stored_size - 1), SEEK_CUR) != 0 || std::fgetc(f) == EOF)) {
        fail("truncated", "cut inside a chunk at byte " + std::to_string(offset));
        break;
      }
      if (kind == ChunkKind::kRecords) {
        t.records += h.record_count;
        switch (static_cast<RecordType>(h.record_type)) {
          case RecordType::kKernel:
            t.kernel_records += h.record_count;
            break;
          case RecordType::kLaunch:
            t.launch_records += h.record_count;
            break;
          case RecordType::kBlock:
            t.block_records += h.record_count;
            break;
          case RecordType::kMemcpy:
            t.memcpy_records += h.record_count;
            break;
          case RecordType::kMemset:
            t.memset_records += h.record_count;
            break;
          default:
            break;
        }
      }
    }
    offset += sizeof h + h.stored_size;
  }
  std::fclose(f);
  t.bytes = offset;
  if (t.error.empty() && !t.has_summary) t.end = "no-summary";
  return t;
}

namespace {

RunSide ListSide(const std::string& name, const std::string& dir, const std::vector<std::string>& files) {
  RunSide side;
  side.name = name;
  side.dir = dir;
  for (const auto& p : files) side.traces.push_back(ScanTrace(p));
  std::stable_sort(side.traces.begin(), side.traces.end(), [](const RunTrace& a, const RunTrace& b) {
    if (a.process.top != b.process.top) return a.process.top;  // the top process first
    if (a.process.start_realtime_ns != b.process.start_realtime_ns)
      return a.process.start_realtime_ns < b.process.start_realtime_ns;
    return a.process.pid < b.process.pid;
  });
  return side;
}

// A trace file P and the other processes' traces in P.d/.
std::vector<std::string> FileAndBeside(const std::string& p) {
  std::vector<std::string> files;
  if (IsFile(p)) files.push_back(p);
  for (auto& f : TracesIn(p + ".d")) files.push_back(std::move(f));
  return files;
}

}  // namespace

StatusOr<RunListing> ListRun(const std::string& path_in) {
  std::string path = path_in;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  RunListing l;
  l.path = path;
  if (IsFile(path) || (!IsFolder(path) && IsFolder(path + ".d"))) {
    l.single_file = true;
    const size_t slash = path.rfind('/');
    l.sides.push_back(ListSide("", slash == std::string::npos ? "." : path.substr(0, slash), FileAndBeside(path)));
    return l;
  }
  if (!IsFolder(path)) return Status::Error(path + ": no such trace or run folder");
  const bool side_folders = IsFolder(path + "/primary") || IsFolder(path + "/shadow");
  const bool side_files = IsFile(path + "/primary.tsc") || IsFile(path + "/shadow.tsc");
  if (side_folders) {
    l.twin = true;
    for (const char* side : {"primary", "shadow"})
      l.sides.push_back(ListSide(side, path + "/" + side, TracesIn(path + "/" + side)));
    return l;
  }
  if (side_files) {
    l.twin = true;
    l.legacy = true;
    for (const char* side : {"primary", "shadow"})
      l.sides.push_back(ListSide(side, path, FileAndBeside(path + "/" + side + ".tsc")));
    return l;
  }
  std::vector<std::string> files = TracesIn(path);
  // Traces of file-mode runs kept in this folder bring their P.d/ folders along.
  const size_t direct = files.size();
  for (size_t i = 0; i < direct; ++i)
    for (auto& f : TracesIn(files[i] + ".d")) files.push_back(std::move(f));
  l.sides.push_back(ListSide("", path, files));
  return l;
}

const RunTrace* MainTrace(const RunSide& side, std::string* why) {
  for (const auto& t : side.traces) {
    if (t.process.top && t.gpu_work()) {
      if (why) *why = "the top process's trace";
      return &t;
    }
  }
  const RunTrace* best = nullptr;
  for (const auto& t : side.traces) {
    if (!t.gpu_work()) continue;
    if (!best || t.Launches() > best->Launches() || (t.Launches() == best->Launches() && t.records > best->records))
      best = &t;
  }
  if (best && why) {
    *why = side.WithGpuWork() == 1 ? "the only trace with GPU work"
                                   : "the trace with the most launches (the top process launched no GPU work)";
  }
  return best;
}

}  // namespace twinscope
