// Chrome trace-event JSON output shared by the trace exporter
// (chrome_export.cpp) and the joined view (export/join): a buffered writer
// with number, time and string formatting, and the hook a view uses to add
// its own events to a trace's export. Internal to src/views/export.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "base/status.h"
#include "twinscope/trace_reader.h"
#include "views/export/export.h"
#include "views/export/timeline_passes.h"

namespace twinscope::exporters {

class TimelineScan;

// Chrome "processes" of the GPU tracks: one per device for its streams, one
// per device for the shadow's thread blocks by SM.
constexpr int64_t kGpuPidBase = 1000000000;
constexpr int64_t kBlocksPidBase = 1100000000;

// Appends JSON text to a buffer and writes it out in large pieces.
class JsonOut {
 public:
  explicit JsonOut(FILE* f) : f_(f) { buf_.reserve(kFlushAt + 4096); }
  JsonOut& Raw(std::string_view s) {
    buf_.append(s);
    return *this;
  }
  JsonOut& Int(int64_t v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
    return *this;
  }
  JsonOut& Uint(uint64_t v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
    return *this;
  }
  // Nanoseconds as microseconds with three decimals.
  JsonOut& Us(int64_t ns) {
    if (ns < 0) {
      buf_ += '-';
      ns = -ns;
    }
    Uint(static_cast<uint64_t>(ns) / 1000);
    char frac[5] = {'.', static_cast<char>('0' + ns / 100 % 10), static_cast<char>('0' + ns / 10 % 10),
                    static_cast<char>('0' + ns % 10), 0};
    buf_.append(frac, 4);
    return *this;
  }
  JsonOut& Str(std::string_view s) {
    buf_ += '"';
    AppendEscaped(buf_, s);
    buf_ += '"';
    return *this;
  }
  // Ends an event; writes out when the buffer is large.
  void EndEvent() {
    buf_ += "}";
    if (buf_.size() >= kFlushAt) Flush();
  }
  bool Flush() {
    if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size()) ok_ = false;
    buf_.clear();
    return ok_;
  }
  bool ok() const { return ok_; }

  // JSON string escaping; bytes that are not valid UTF-8 become '?'.
  static void AppendEscaped(std::string& out, std::string_view s) {
    for (size_t i = 0; i < s.size();) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
        ++i;
      } else if (c < 0x20) {
        char tmp[8];
        std::snprintf(tmp, sizeof tmp, "\\u%04x", c);
        out += tmp;
        ++i;
      } else if (c < 0x80) {
        out += static_cast<char>(c);
        ++i;
      } else {
        size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        bool valid = len && i + len <= s.size();
        for (size_t k = 1; valid && k < len; ++k) valid = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
        if (valid) {
          out.append(s.substr(i, len));
          i += len;
        } else {
          out += '?';
          ++i;
        }
      }
    }
  }

  // One trace event: `{"ph":..,"cat":..,"name":..,"pid":..,"tid":..,"ts":..`
  // with its separator; `ts_ns` is already relative to the time base. The
  // caller adds fields and ends it with EndEvent().
  JsonOut& BeginEvent(char ph, std::string_view cat, std::string_view name, int64_t pid, int64_t tid, int64_t ts_ns) {
    Raw(first_ ? "\n{\"ph\":\"" : ",\n{\"ph\":\"");
    first_ = false;
    char p[2] = {ph, 0};
    Raw(p).Raw("\",\"cat\":\"").Raw(cat).Raw("\",\"name\":").Str(name);
    return Raw(",\"pid\":").Int(pid).Raw(",\"tid\":").Int(tid).Raw(",\"ts\":").Us(ts_ns);
  }
  JsonOut& Dur(uint64_t ns) { return Raw(",\"dur\":").Us(static_cast<int64_t>(ns)); }
  // A metadata event (process_name, thread_name, *_sort_index).
  template <typename V>
  void Meta(const char* what, int64_t pid, int64_t tid, const char* key, const V& value) {
    Raw(first_ ? "\n{\"ph\":\"M\",\"name\":\"" : ",\n{\"ph\":\"M\",\"name\":\"");
    first_ = false;
    Raw(what).Raw("\",\"pid\":").Int(pid).Raw(",\"tid\":").Int(tid).Raw(",\"args\":{\"").Raw(key).Raw("\":");
    if constexpr (std::is_arithmetic_v<V>) {
      Int(static_cast<int64_t>(value));
    } else {
      Str(value);
    }
    Raw("}");
    EndEvent();
  }

 private:
  static constexpr size_t kFlushAt = 1 << 20;
  FILE* f_;
  std::string buf_;
  bool ok_ = true;
  bool first_ = true;
};

// Events a view adds to the Chrome export of a trace (the joined export adds
// the shadow's blocks). Called once, after every record's events.
class ChromeExtra {
 public:
  virtual ~ChromeExtra() = default;
  // Writes events with out.BeginEvent()/Meta(); timestamps relative to
  // scan.Base() (the export's time base). Returns the number written.
  virtual uint64_t WriteEvents(JsonOut& out, const TimelineScan& scan) = 0;
  // Adds to the export's otherData (bounds, counts) and its warnings.
  virtual void Finish(nlohmann::json* other_data, std::vector<std::string>* warnings) {}
};

// ExportChrome (export.h) with a view's extra events, from `kept` records where given (else `trace` is read
// twice: timeline_passes.h).
StatusOr<ExportResult> ExportChromeWith(const std::string& trace, const std::string& out, ChromeExtra* extra,
                                        const KeptRecords* kept = nullptr);

}  // namespace twinscope::exporters
