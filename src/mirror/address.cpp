#include "mirror/address.h"

#include <arpa/inet.h>

#include <charconv>
#include <random>

namespace twinscope::mirror {
namespace {

bool ParsePort(std::string_view s, uint16_t* port, bool allow_zero) {
  if (s.empty() || s.size() > 5) return false;
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size() || value > 65535) return false;
  if (value == 0 && !allow_zero) return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

bool IsIPv4(const std::string& s) {
  in_addr a;
  return inet_pton(AF_INET, s.c_str(), &a) == 1;
}
bool IsIPv6(const std::string& s) {
  in6_addr a;
  return inet_pton(AF_INET6, s.c_str(), &a) == 1;
}
bool IsLoopback(const std::string& s) {
  in_addr a;
  if (inet_pton(AF_INET, s.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  in6_addr b;
  if (inet_pton(AF_INET6, s.c_str(), &b) == 1) return IN6_IS_ADDR_LOOPBACK(&b);
  return false;
}

// Splits "host:port" / "[v6]:port" / "host" (port optional when
// `port_optional`). Returns false on malformed input.
bool SplitHostPort(std::string_view text, std::string* host, std::string_view* port, bool* has_port) {
  *has_port = false;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return false;
    *host = std::string(text.substr(1, close - 1));
    std::string_view rest = text.substr(close + 1);
    if (rest.empty()) return true;
    if (rest.front() != ':') return false;
    *port = rest.substr(1);
    *has_port = true;
    return true;
  }
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    *host = std::string(text);
    return true;
  }
  if (text.find(':') != colon) return false;  // bare IPv6 needs brackets
  *host = std::string(text.substr(0, colon));
  *port = text.substr(colon + 1);
  *has_port = true;
  return true;
}

bool IsHostNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

}  // namespace

std::string ListenAddress::ToString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

StatusOr<ListenAddress> ParseListenAddress(std::string_view text) {
  const std::string shown(text.substr(0, 200));
  std::string host;
  std::string_view port;
  bool has_port = false;
  if (!SplitHostPort(text, &host, &port, &has_port) || !has_port) {
    return Status::Error("--listen '" + shown + "': expected HOST:PORT, [IPv6]:PORT or :PORT (e.g. 127.0.0.1:8080)");
  }
  ListenAddress out;
  if (!ParsePort(port, &out.port, /*allow_zero=*/true)) {
    return Status::Error("--listen '" + shown + "': port must be a number from 0 to 65535");
  }
  if (host.empty() || host == "localhost") host = "127.0.0.1";
  if (!IsIPv4(host) && !IsIPv6(host)) {
    return Status::Error("--listen '" + shown + "': host must be a numeric IPv4/IPv6 address or 'localhost'");
  }
  out.host = host;
  out.loopback = IsLoopback(host);
  return out;
}

std::string UpstreamUrl::HostHeader() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != 80) h += ":" + std::to_string(port);
  return h;
}

std::string UpstreamUrl::ToString() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return "http://" + h + ":" + std::to_string(port) + base_path;
}

StatusOr<UpstreamUrl> ParseUpstreamUrl(std::string_view text) {
  const std::string shown(text.substr(0, 200));
  constexpr std::string_view kHttp = "http://";
  constexpr std::string_view kHttps = "https://";
  if (text.substr(0, kHttps.size()) == kHttps) {
    return Status::Error("'" + shown + "': https upstreams are not supported; use http:// (put a TLS proxy in front)");
  }
  if (text.substr(0, kHttp.size()) != kHttp) {
    return Status::Error("'" + shown + "': expected an URL of the form http://HOST[:PORT][/PATH]");
  }
  std::string_view rest = text.substr(kHttp.size());
  size_t slash = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    return Status::Error("'" + shown + "': user names/passwords in upstream URLs are not supported");
  }
  UpstreamUrl out;
  std::string_view port;
  bool has_port = false;
  if (!SplitHostPort(authority, &out.host, &port, &has_port) || out.host.empty()) {
    return Status::Error("'" + shown + "': missing or malformed host");
  }
  if (has_port && !ParsePort(port, &out.port, /*allow_zero=*/false)) {
    return Status::Error("'" + shown + "': port must be a number from 1 to 65535");
  }
  if (!IsIPv6(out.host)) {
    for (char c : out.host) {
      if (!IsHostNameChar(c)) return Status::Error("'" + shown + "': invalid character in host name");
    }
  }
  if (!path.empty() && path.front() != '/') {
    return Status::Error("'" + shown + "': query strings and fragments are not allowed in an upstream URL");
  }
  for (char c : path) {
    if (c <= 0x20 || c >= 0x7f || c == '?' || c == '#') {
      return Status::Error("'" + shown + "': the path may hold visible ASCII only, without '?' or '#'");
    }
  }
  std::string base(path);
  while (!base.empty() && base.back() == '/') base.pop_back();
  out.base_path = base;
  return out;
}

bool IsValidRequestId(std::string_view id) {
  if (id.empty() || id.size() > kMaxRequestIdLength) return false;
  for (char c : id) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

std::string NewRequestId() {
  thread_local std::mt19937_64 rng([] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd()};
    std::mt19937_64 g(seq);
    return g;
  }());
  uint64_t hi = rng(), lo = rng();
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 10
  static const char* kHex = "0123456789abcdef";
  std::string s(36, '-');
  int pos = 0;
  auto put = [&](uint64_t v, int nibble_from, int count) {
    for (int i = 0; i < count; ++i) {
      if (pos == 8 || pos == 13 || pos == 18 || pos == 23) ++pos;
      s[pos++] = kHex[(v >> (4 * (nibble_from - i))) & 0xf];
    }
  };
  put(hi, 15, 16);
  put(lo, 15, 16);
  return s;
}

std::string UpstreamTarget(const UpstreamUrl& up, std::string_view target) {
  if (up.base_path.empty()) return std::string(target);
  if (target.empty() || target.front() != '/') return up.base_path + "/" + std::string(target);
  return up.base_path + std::string(target);
}

}  // namespace twinscope::mirror
