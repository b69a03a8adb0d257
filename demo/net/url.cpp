// URL parsing for the demo's HTTP clients (url.h).
#include "net/url.h"

#include <cctype>

namespace twinscope::demo {

std::string HttpUrl::HostHeader() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string HttpUrl::ToString() const { return "http://" + HostHeader() + path; }

StatusOr<HttpUrl> ParseHttpUrl(std::string_view url) {
  const std::string shown(url);
  auto bad = [&](const std::string& why) { return Status::Error("bad URL '" + shown + "': " + why); };
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, 8) == "https://") return bad("https is not supported (use http://)");
  if (url.substr(0, kScheme.size()) != kScheme) return bad("expected http://HOST[:PORT][/PATH]");
  url.remove_prefix(kScheme.size());
  HttpUrl u;
  const size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view path = url.substr(slash);
    if (path.find_first_of("?# ") != std::string_view::npos) return bad("the path must not hold '?', '#' or spaces");
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    u.path = std::string(path);
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    u.host = std::string(authority.substr(1, close - 1));
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("expected ':' after ']'");
      port = rest.substr(1);
      if (port.empty()) return bad("empty port");
    }
  } else {
    const size_t colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return bad("empty port");
    }
  }
  if (u.host.empty()) return bad("no host");
  for (char c : u.host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':' && c != '_') {
      return bad("the host holds '" + std::string(1, c) + "'");
    }
  }
  if (!port.empty()) {
    unsigned long p = 0;
    for (char c : port) {
      if (!std::isdigit(static_cast<unsigned char>(c)) || p > 65535) return bad("the port must be a number 1-65535");
      p = p * 10 + static_cast<unsigned long>(c - '0');
    }
    if (p < 1 || p > 65535) return bad("port " + std::string(port) + " is out of range (1-65535)");
    u.port = static_cast<uint16_t>(p);
  }
  return u;
}

}  // namespace twinscope::demo
