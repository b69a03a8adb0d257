// The idle-connection pool's bookkeeping and its checks on pooled connections.
#include "mirror/conn_pool.h"

#include <sys/socket.h>

#include <cerrno>

namespace twinscope::mirror {
namespace {

bool StillOpen(beast::tcp_stream& s) {
  auto& sock = s.socket();
  if (!sock.is_open()) return false;
  char c;
  ssize_t r = ::recv(sock.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r >= 0) return false;  // 0: closed by the server; >0: bytes nobody asked for
  return errno == EAGAIN || errno == EWOULDBLOCK;
}

}  // namespace

bool IsStaleConnectionError(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::connection_aborted;
}

std::unique_ptr<beast::tcp_stream> ConnPool::Take(std::chrono::milliseconds max_idle) {
  auto now = Clock::now();
  while (!idle_.empty()) {
    Entry e = std::move(idle_.back());
    idle_.pop_back();
    if (now - e.since > max_idle || !StillOpen(*e.stream)) continue;
    return std::move(e.stream);
  }
  return nullptr;
}

void ConnPool::Put(std::unique_ptr<beast::tcp_stream> s) {
  if (idle_.size() >= capacity_) return;  // closed by its destructor
  s->expires_never();
  idle_.push_back({std::move(s), Clock::now()});
}

void ConnPool::Sweep(std::chrono::milliseconds max_idle) {
  auto now = Clock::now();
  std::erase_if(idle_, [&](Entry& e) { return now - e.since > max_idle || !StillOpen(*e.stream); });
}

}  // namespace twinscope::mirror
