// The mirror's counters as JSON and the request log's line for one request.
#include "mirror/request_trace.h"

#include <cstring>

#include "base/iso_time.h"

namespace twinscope::mirror {

MirrorCounters AtomicCounters::Load() const {
  MirrorCounters s;
  auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  s.connections_accepted = ld(connections_accepted);
  s.connections_open = ld(connections_open);
  s.connections_refused = ld(connections_refused);
  s.requests = ld(requests);
  s.health_requests = ld(health_requests);
  s.rejected_bad_request = ld(rejected_bad_request);
  s.rejected_too_large = ld(rejected_too_large);
  s.rejected_header_too_large = ld(rejected_header_too_large);
  s.primary_inflight = ld(primary_inflight);
  s.primary_ok = ld(primary_ok);
  s.primary_unreachable = ld(primary_unreachable);
  s.primary_bad_gateway = ld(primary_bad_gateway);
  s.primary_timeouts = ld(primary_timeouts);
  s.primary_failed = ld(primary_failed);
  s.primary_retries = ld(primary_retries);
  s.client_disconnects = ld(client_disconnects);
  s.shadow_sent = ld(shadow_sent);
  s.shadow_ok = ld(shadow_ok);
  s.shadow_failed = ld(shadow_failed);
  s.shadow_timeouts = ld(shadow_timeouts);
  s.shadow_skipped = ld(shadow_skipped);
  s.shadow_inflight = ld(shadow_inflight);
  s.drain_cut = ld(drain_cut);
  return s;
}

Json MirrorCounters::ToJson() const {
  return Json{{"connections_accepted", connections_accepted},
              {"connections_open", connections_open},
              {"connections_refused", connections_refused},
              {"requests", requests},
              {"health_requests", health_requests},
              {"rejected_bad_request", rejected_bad_request},
              {"rejected_too_large", rejected_too_large},
              {"rejected_header_too_large", rejected_header_too_large},
              {"primary_inflight", primary_inflight},
              {"primary_ok", primary_ok},
              {"primary_unreachable", primary_unreachable},
              {"primary_bad_gateway", primary_bad_gateway},
              {"primary_timeouts", primary_timeouts},
              {"primary_failed", primary_failed},
              {"primary_retries", primary_retries},
              {"client_disconnects", client_disconnects},
              {"shadow_sent", shadow_sent},
              {"shadow_ok", shadow_ok},
              {"shadow_failed", shadow_failed},
              {"shadow_timeouts", shadow_timeouts},
              {"shadow_skipped", shadow_skipped},
              {"shadow_inflight", shadow_inflight},
              {"log_written", log_written},
              {"log_dropped", log_dropped},
              {"log_not_replayable", log_not_replayable},
              {"log_write_errors", log_write_errors},
              {"log_syncs", log_syncs},
              {"log_body_bytes", log_body_bytes},
              {"drain_cut", drain_cut}};
}

Json LegTrace::ToJson() const {
  Json j = {{"state", state}};
  if (status) j["status"] = status;
  if (sent_us >= 0) j["sent_us"] = sent_us;
  if (first_byte_us >= 0) j["first_byte_us"] = first_byte_us;
  if (done_us >= 0) j["done_us"] = done_us;
  j["bytes"] = bytes;
  if (!error.empty()) j["error"] = error;
  if (retried) j["retried"] = true;
  return j;
}

RequestTrace::~RequestTrace() {
  if (!log || !log->is_open()) return;
  try {
    auto wall_us = std::chrono::duration_cast<std::chrono::microseconds>(arrival_wall.time_since_epoch()).count();
    Json j = {{"type", "end"},
              {"id", id},
              {"id_generated", id_generated},
              {"method", method},
              {"path", path},
              {"client", client},
              {"arrival", IsoTimeUtc(arrival_wall)},
              {"arrival_unix_us", wall_us},
              {"request_bytes", request_bytes},
              {"status", client_status},
              {"client_disconnected", client_disconnected},
              {"streamed", streamed},
              {"response_bytes", primary.bytes},
              {"primary", primary.ToJson()},
              {"shadow", shadow.ToJson()}};
    // The client went away: a replay cancels the request at the same point (after as many reply bytes,
    // or, before any byte, after as long).
    if (client_disconnected) j["cancelled_at"] = {{"bytes", primary.bytes}, {"us", primary.done_us}};
    log->Write(j.dump(-1, ' ', false, Json::error_handler_t::replace));
  } catch (...) {
    // Logging must never take a request down.
  }
}

}  // namespace twinscope::mirror

namespace twinscope::mirror {

bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : 4;
    if (n == 4 || (n == 1 && c < 0xC2) || i + n >= s.size() + (n ? 0 : 1)) return false;
    for (size_t k = 1; k <= n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    i += n + 1;
  }
  return true;
}

namespace {
constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
}

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t v = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    if (i + 2 < in.size()) v |= static_cast<unsigned char>(in[i + 2]);
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < in.size() ? kB64[(v >> 6) & 63] : '=';
    out += i + 2 < in.size() ? kB64[v & 63] : '=';
  }
  return out;
}

bool Base64Decode(std::string_view in, std::string* out) {
  out->clear();
  uint32_t v = 0;
  int bits = 0;
  for (char ch : in) {
    if (ch == '=') break;
    const char* p = std::strchr(kB64, ch);
    if (!p || !ch) return false;
    v = (v << 6) | static_cast<uint32_t>(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((v >> bits) & 0xFF));
    }
  }
  return true;
}

std::string RequestLine(const RequestTrace& t, const std::vector<std::pair<std::string, std::string>>& headers,
                        std::string_view body, bool body_kept, std::string_view why_not) {
  const auto wall_us = std::chrono::duration_cast<std::chrono::microseconds>(t.arrival_wall.time_since_epoch()).count();
  Json h = Json::array();
  for (const auto& [name, value] : headers) h.push_back({name, value});
  Json j = {{"type", "request"},
            {"id", t.id},
            {"id_generated", t.id_generated},
            {"method", t.method},
            {"path", t.path},
            {"client", t.client},
            {"arrival", IsoTimeUtc(t.arrival_wall)},
            {"arrival_unix_us", wall_us},
            {"headers", std::move(h)},
            {"body_bytes", body.size()},
            {"replayable", body_kept}};
  if (body_kept) {
    if (IsUtf8(body))
      j["body"] = std::string(body);
    else
      j["body_base64"] = Base64Encode(body);
  } else {
    j["not_replayable"] = std::string(why_not);
  }
  try {
    return j.dump();
  } catch (const Json::type_error&) {  // not valid UTF-8 after all (a surrogate, an overlong form)
    if (j.contains("body")) {
      j.erase("body");
      j["body_base64"] = Base64Encode(body);
    }
    return j.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

}  // namespace twinscope::mirror
