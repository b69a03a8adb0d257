// Parsing of what users and clients hand the mirror that Beast does not parse
// itself: the --listen address, the upstream URLs and the X-Request-Id value.
// Pure functions, no I/O; safe on any thread. Fuzzed by
// tests/fuzz/mirror_input_fuzz.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace twinscope::mirror {

// Where the mirror listens: "HOST:PORT", "[IPv6]:PORT" or ":PORT" (loopback).
// HOST must be a numeric IPv4/IPv6 address or "localhost".
struct ListenAddress {
  std::string host;  // numeric address
  uint16_t port = 0;
  bool loopback = true;
  std::string ToString() const;  // "127.0.0.1:8080" or "[::1]:8080"
};
StatusOr<ListenAddress> ParseListenAddress(std::string_view text);

// One upstream server: "http://HOST[:PORT][/BASE]". BASE (without a trailing
// slash) is put in front of every forwarded request target. https is refused
// with a message (put a TLS-terminating proxy in front instead).
struct UpstreamUrl {
  std::string host;  // name or numeric address, IPv6 without brackets
  uint16_t port = 80;
  std::string base_path;           // "" or "/something" without trailing slash
  std::string HostHeader() const;  // value of the Host header to send
  std::string ToString() const;    // normalised "http://host:port/base"
};
StatusOr<UpstreamUrl> ParseUpstreamUrl(std::string_view text);

// A client's X-Request-Id is kept if it is 1..128 visible ASCII characters
// (0x21..0x7e); anything else is replaced by a generated id.
constexpr size_t kMaxRequestIdLength = 128;
bool IsValidRequestId(std::string_view id);

// A new random id in UUID v4 form (36 characters). Thread-safe.
std::string NewRequestId();

// The request target sent upstream: base_path + target ("/v1/x?y" stays as is).
std::string UpstreamTarget(const UpstreamUrl& up, std::string_view target);

}  // namespace twinscope::mirror
