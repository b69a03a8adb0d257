// http://HOST[:PORT][/PATH] URLs for the demo's client and schedule follower.
// Boost-free, so its tests need no network code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace twinscope::demo {

struct HttpUrl {
  std::string host;  // name or numeric address (IPv6 without brackets)
  uint16_t port = 80;
  std::string path;  // "" or starting with '/', without a trailing '/'
  std::string ToString() const;
  std::string HostHeader() const;  // "host:port" ("[v6]:port")
};

// Errors name what is wrong ("https is not supported", "port 99999 is out of range", ...).
StatusOr<HttpUrl> ParseHttpUrl(std::string_view url);

}  // namespace twinscope::demo
