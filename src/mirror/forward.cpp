#include "mirror/forward.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "base/ascii.h"

namespace twinscope::mirror {
namespace {

bool IEquals(std::string_view a, std::string_view b) { return AsciiIEquals(a, b); }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string ResolveRequestId(const http::fields& fields, bool* generated) {
  auto it = fields.find(kRequestIdField);
  if (it != fields.end()) {
    std::string_view v = Trim(it->value());
    if (IsValidRequestId(v)) {
      *generated = false;
      return std::string(v);
    }
  }
  *generated = true;
  return NewRequestId();
}

void StripHopByHop(http::fields& fields) {
  // Fields named in Connection are hop-by-hop too ("Connection: close, X-Foo").
  std::vector<std::string> named;
  for (auto it = fields.find(http::field::connection); it != fields.end() && it->name() == http::field::connection;
       ++it) {
    std::string_view v = it->value();
    while (!v.empty()) {
      size_t comma = v.find(',');
      std::string_view token = Trim(v.substr(0, comma));
      if (!token.empty() && named.size() < 64) named.emplace_back(token);
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  for (const auto& name : named) {
    // Never let a client strip the fields the mirror itself relies on.
    if (IEquals(name, "host") || IEquals(name, "content-length")) continue;
    fields.erase(name);
  }
  for (http::field f :
       {http::field::connection, http::field::keep_alive, http::field::proxy_connection, http::field::te,
        http::field::trailer, http::field::upgrade, http::field::transfer_encoding, http::field::expect}) {
    fields.erase(f);
  }
}

std::vector<std::pair<std::string, std::string>> LoggedHeaders(const http::fields& fields) {
  http::fields copy = fields;
  StripHopByHop(copy);
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& f : copy) {
    const std::string_view name = f.name_string();
    if (IEquals(name, "host") || IEquals(name, "content-length") || IEquals(name, kRequestIdField) ||
        IEquals(name, kRoleField))
      continue;
    const bool secret =
        IEquals(name, "authorization") || IEquals(name, "proxy-authorization") || IEquals(name, "cookie");
    out.emplace_back(std::string(name), secret ? std::string(kRedacted) : std::string(f.value()));
  }
  return out;
}

std::string ForwardTarget(const UpstreamUrl& upstream, std::string_view target) {
  for (std::string_view scheme : {std::string_view("http://"), std::string_view("https://")}) {
    if (target.size() >= scheme.size() && IEquals(target.substr(0, scheme.size()), scheme)) {
      std::string_view rest = target.substr(scheme.size());
      size_t path = rest.find_first_of("/?");
      target = path == std::string_view::npos ? std::string_view("/") : rest.substr(path);
      break;
    }
  }
  if (target == "*") return std::string(target);
  if (target.empty() || target.front() != '/') return UpstreamTarget(upstream, "/" + std::string(target));
  return UpstreamTarget(upstream, target);
}

http::request<http::string_body> MakeUpstreamRequest(const http::request<http::string_body>& client,
                                                     const UpstreamUrl& upstream, std::string_view request_id,
                                                     std::string_view role, std::string_view client_ip) {
  http::request<http::string_body> out;
  out.base() = client.base();  // method, target, fields
  out.body() = client.body();
  StripHopByHop(out.base());
  out.version(11);
  out.target(ForwardTarget(upstream, client.target()));
  out.set(http::field::host, upstream.HostHeader());
  out.erase(kRequestIdField);
  out.set(kRequestIdField, request_id);
  out.erase(kRoleField);
  out.set(kRoleField, role);
  if (!client_ip.empty()) {
    auto it = out.find("X-Forwarded-For");
    std::string xff =
        it == out.end() ? std::string(client_ip) : std::string(it->value()) + ", " + std::string(client_ip);
    if (xff.size() > 1024) xff = std::string(client_ip);
    out.set("X-Forwarded-For", xff);
  }
  out.keep_alive(true);
  // Content-Length only when there is a body or the method normally has one.
  bool has_body = !out.body().empty() || client.method() == http::verb::post || client.method() == http::verb::put ||
                  client.method() == http::verb::patch;
  if (has_body) {
    out.content_length(out.body().size());
  } else {
    out.erase(http::field::content_length);
  }
  return out;
}

http::response<http::string_body> MakeErrorResponse(http::status status, std::string_view message,
                                                    std::string_view request_id, unsigned version, bool keep_alive) {
  nlohmann::json body = {
      {"error", {{"message", std::string(message)}, {"type", "mirror_error"}, {"code", static_cast<int>(status)}}}};
  http::response<http::string_body> res{status, version == 10 ? 10u : 11u};
  res.set(http::field::server, "twinscope-mirror");
  res.set(http::field::content_type, "application/json");
  if (!request_id.empty()) res.set(kRequestIdField, request_id);
  res.body() = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

}  // namespace twinscope::mirror
