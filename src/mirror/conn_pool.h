// Reuse of keep-alive connections to the upstreams (idle pool, stale-connection errors).
// Not thread-safe: each I/O thread has its own pools (Worker, mirror_impl.h).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "mirror/beast.h"

namespace twinscope::mirror {

// Errors on a reused keep-alive connection that mean "the server had already
// closed it": the request is sent again once on a fresh connection, but only
// if no byte of a response had come back.
bool IsStaleConnectionError(const beast::error_code& ec);

// Idle keep-alive connections to one upstream, owned by one worker thread.
// Most recently used first; entries idle longer than `max_idle` or closed by
// the server are dropped on the way out.
class ConnPool {
 public:
  explicit ConnPool(size_t capacity) : capacity_(capacity) {}

  // The most recently used idle connection that is still usable, or null.
  std::unique_ptr<beast::tcp_stream> Take(std::chrono::milliseconds max_idle);
  // Keeps `s` for reuse, or closes it if the pool is full.
  void Put(std::unique_ptr<beast::tcp_stream> s);
  // Drops the connections idle too long or closed by the server.
  void Sweep(std::chrono::milliseconds max_idle);
  void Clear() { idle_.clear(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    std::unique_ptr<beast::tcp_stream> stream;
    Clock::time_point since;
  };
  size_t capacity_;
  std::vector<Entry> idle_;
};

}  // namespace twinscope::mirror
