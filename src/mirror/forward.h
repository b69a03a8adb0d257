// How a client's request becomes the two upstream requests, and how the
// primary's response header becomes the client's. Pure header rewriting on
// Beast messages (Beast does all parsing); no I/O, safe on any thread.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mirror/address.h"
#include "mirror/beast.h"

namespace twinscope::mirror {

inline constexpr std::string_view kRequestIdField = "X-Request-Id";
inline constexpr std::string_view kRoleField = "X-Twinscope-Mirror";  // "primary" or "shadow", sent upstream

// The request id of one client request: the client's X-Request-Id (first of
// them) when valid, else a new one. `*generated` says which.
std::string ResolveRequestId(const http::fields& fields, bool* generated);

// Removes the fields that apply to one connection only (RFC 9110 7.6.1):
// Connection and every field it names, Keep-Alive, Proxy-Connection, TE,
// Trailer, Upgrade, Transfer-Encoding and Expect. The mirror re-frames bodies.
void StripHopByHop(http::fields& fields);

// The request sent to one upstream: same method, target (behind the
// upstream's base path), fields and body as the client's; HTTP/1.1 with
// keep-alive, Host set to the upstream, one X-Request-Id, X-Twinscope-Mirror
// set to `role`, X-Forwarded-For appended with `client_ip` (if not empty).
http::request<http::string_body> MakeUpstreamRequest(const http::request<http::string_body>& client,
                                                     const UpstreamUrl& upstream, std::string_view request_id,
                                                     std::string_view role, std::string_view client_ip);

// The fields of a client request as the request log keeps them for a replay (in order, duplicates kept):
// without the hop-by-hop ones (StripHopByHop), Host, Content-Length, X-Request-Id and X-Twinscope-Mirror
// (the replayer sets those); Authorization, Proxy-Authorization and Cookie are kept with the value
// "[redacted]" so the log holds no credentials.
std::vector<std::pair<std::string, std::string>> LoggedHeaders(const http::fields& fields);
inline constexpr std::string_view kRedacted = "[redacted]";

// The request target as sent upstream: an absolute-form target
// ("http://h/p?q") is reduced to its path, then prefixed with the base path.
std::string ForwardTarget(const UpstreamUrl& upstream, std::string_view client_target);

// Rewrites the primary's response header in place for the client: hop-by-hop
// fields removed (the mirror re-frames what it relays), X-Request-Id set,
// keep-alive as decided for the client. A chunked body, or one of unknown
// length (read until the primary closes), goes chunked to HTTP/1.1 clients;
// HTTP/1.0 clients get it unframed and the connection closed, so
// `*keep_alive` may be turned off.
template <class Body>
void PrepareClientResponse(http::response<Body>& res, std::string_view request_id, unsigned client_version,
                           bool body_length_known, bool* keep_alive) {
  const bool chunked = res.chunked();
  StripHopByHop(res.base());
  res.version(client_version == 10 ? 10 : 11);
  if (chunked || !body_length_known) {
    if (client_version == 10) {
      *keep_alive = false;
    } else {
      res.chunked(true);
    }
  }
  res.erase(kRequestIdField);
  res.set(kRequestIdField, request_id);
  res.keep_alive(*keep_alive);
}

// A small JSON error reply written by the mirror itself (400, 413, 431, 502,
// 503, 504): {"error":{"message":..., "type":"mirror_error", "code":status}}.
http::response<http::string_body> MakeErrorResponse(http::status status, std::string_view message,
                                                    std::string_view request_id, unsigned version, bool keep_alive);

}  // namespace twinscope::mirror
