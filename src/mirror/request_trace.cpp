// The mirror's counters as JSON and the request log's line for one request.
#include "mirror/request_trace.h"

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
    Json j = {{"id", id},
              {"id_generated", id_generated},
              {"method", method},
              {"path", path},
              {"client", client},
              {"arrival", IsoTimeUtc(arrival_wall)},
              {"arrival_unix_us", wall_us},
              {"request_bytes", request_bytes},
              {"status", client_status},
              {"client_disconnected", client_disconnected},
              {"primary", primary.ToJson()},
              {"shadow", shadow.ToJson()}};
    log->Write(j.dump(-1, ' ', false, Json::error_handler_t::replace));
  } catch (...) {
    // Logging must never take a request down.
  }
}

}  // namespace twinscope::mirror
