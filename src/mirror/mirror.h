// twinscope mirror: an HTTP/1.1 front for two servers. Each client request is
// sent to the primary and to the shadow at the same moment under one
// X-Request-Id; the client gets the primary's reply, streamed as it arrives;
// the shadow's reply is read to the end and dropped. The shadow can never
// change or delay what the client sees: it runs on its own connections with
// its own deadline, and past `shadow_max_inflight` copies in flight further
// copies are skipped and counted.
//
// Threads: Start() runs `threads` I/O threads (one io_context each; a client
// connection and both of its upstream requests stay on one thread) plus one
// request-log writer. Shutdown() and counters() may be called from any
// thread; Wait() from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/status.h"

namespace twinscope::mirror {

struct MirrorOptions {
  std::string listen = "127.0.0.1:8080";  // HOST:PORT; port 0 picks a free one
  std::string primary;                    // http://HOST:PORT[/BASE]
  std::string shadow;                     // same; empty = no shadow (plain proxy)
  std::string log_path;                   // JSON-lines request log; empty = none
  // Request bodies kept in the log, all requests together; past it requests are logged without their body
  // and counted not replayable (log_not_replayable).
  uint64_t log_max_body_bytes = uint64_t{1} << 30;
  int threads = 0;  // I/O threads; 0 = min(cores, 4)

  size_t max_body_bytes = 16u << 20;    // client request body cap -> 413
  size_t max_header_bytes = 64u << 10;  // request/response header cap -> 431 / 502
  size_t shadow_max_inflight = 256;     // shadow copies in flight, all threads; past it: skipped
  size_t max_connections = 10000;       // client connections open; past it: closed at once
  size_t pool_size = 256;               // idle keep-alive connections kept per upstream per thread

  std::chrono::milliseconds connect_timeout{5000};     // TCP connect to an upstream
  std::chrono::milliseconds primary_timeout{300000};   // longest the primary may stay silent
  std::chrono::milliseconds shadow_timeout{300000};    // whole shadow exchange, connect to last byte
  std::chrono::milliseconds client_timeout{60000};     // reading one request / writing one piece to the client
  std::chrono::milliseconds keepalive_timeout{60000};  // idle client connection between requests
  std::chrono::milliseconds upstream_idle{4000};       // pooled upstream connection unused longer: closed
  std::chrono::milliseconds drain_timeout{30000};      // shutdown: longest wait for requests in flight
  std::chrono::milliseconds health_timeout{1000};      // /health's connect probe of each upstream

  std::string health_path = "/health";  // GET here is answered by the mirror itself
};

// A snapshot of the mirror's counters (also in /health).
struct MirrorCounters {
  uint64_t connections_accepted = 0, connections_open = 0, connections_refused = 0;
  uint64_t requests = 0;  // forwarded client requests
  uint64_t health_requests = 0;
  uint64_t rejected_bad_request = 0, rejected_too_large = 0, rejected_header_too_large = 0;
  uint64_t primary_inflight = 0;
  uint64_t primary_ok = 0;           // relayed to the end
  uint64_t primary_unreachable = 0;  // 502: could not connect
  uint64_t primary_bad_gateway = 0;  // 502: connected, but no valid response header
  uint64_t primary_timeouts = 0;     // 504 (or cut mid-stream) after primary_timeout of silence
  uint64_t primary_failed = 0;       // the primary broke off mid-reply
  uint64_t primary_retries = 0;      // a reused keep-alive connection had closed; sent again once
  uint64_t client_disconnects = 0;   // client went away before its reply was complete
  uint64_t shadow_sent = 0, shadow_ok = 0, shadow_failed = 0, shadow_timeouts = 0, shadow_skipped = 0;
  uint64_t shadow_inflight = 0;
  uint64_t log_written = 0, log_dropped = 0;
  uint64_t log_not_replayable = 0, log_write_errors = 0, log_syncs = 0, log_body_bytes = 0;
  uint64_t drain_cut = 0;  // connections/shadow copies cut by drain_timeout at shutdown
  nlohmann::json ToJson() const;
};

class Mirror {
 public:
  explicit Mirror(MirrorOptions options);
  ~Mirror();  // Shutdown() + Wait()
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;

  // Parses the options, resolves both upstreams, opens the log, binds and
  // starts the I/O threads. Errors are messages a user can act on.
  Status Start();
  std::string listen_address() const;  // as bound, e.g. "127.0.0.1:41234"
  uint16_t port() const;
  bool loopback_only() const;
  std::string primary_url() const;
  std::string shadow_url() const;

  // Graceful stop, from any thread (not from a signal handler): stop
  // accepting, close idle client connections, let requests in flight (and
  // their shadow copies) finish, then stop. Returns at once.
  void Shutdown();
  // Like Shutdown, but cuts whatever is in flight now.
  void ShutdownNow();
  // Blocks until Shutdown() has been called and the drain is over (or
  // drain_timeout has passed), then stops the threads and flushes the log.
  void Wait();

  MirrorCounters counters() const;
  // The requests the log holds without a replayable body (the bound on body bytes, a write error): their ids,
  // the first 1000.
  std::vector<std::string> not_replayable_ids() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// The CLI's entry: Start, announce where it listens on stderr, drain on the
// first SIGINT/SIGTERM (cut at the second), return the exit code (0 after a
// clean shutdown). `on_listening` (tests) is called once it listens.
int RunMirror(const MirrorOptions& options, const std::function<void(const Mirror&)>& on_listening = {});

}  // namespace twinscope::mirror
