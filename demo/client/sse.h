// Server-sent events, the client side: bytes in (split anywhere), each
// event's data out. Lines end with LF or CRLF; an empty line ends an event;
// several data lines are joined with '\n'; comments and other fields are
// skipped. Not thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace twinscope::demo {

class SseParser {
 public:
  template <typename OnData>
  void Feed(std::string_view bytes, OnData&& on_data) {
    buf_.append(bytes);
    size_t start = 0;
    for (;;) {
      const size_t nl = buf_.find('\n', start);
      if (nl == std::string::npos) break;
      std::string_view line(buf_.data() + start, nl - start);
      start = nl + 1;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) {
        if (has_data_) on_data(std::string_view(data_));
        data_.clear();
        has_data_ = false;
      } else if (line.substr(0, 5) == "data:") {
        std::string_view v = line.substr(5);
        if (!v.empty() && v.front() == ' ') v.remove_prefix(1);
        if (has_data_) data_ += '\n';
        data_.append(v);
        has_data_ = true;
      }
    }
    buf_.erase(0, start);
  }
  size_t buffered() const { return buf_.size() + data_.size(); }

 private:
  std::string buf_;   // an incomplete line
  std::string data_;  // the current event's data
  bool has_data_ = false;
};

}  // namespace twinscope::demo
