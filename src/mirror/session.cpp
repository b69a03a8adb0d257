// One client connection: read each request within the limits (else 431/413/400), then /health or Forward.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "base/ascii.h"
#include "mirror/forward.h"
#include "mirror/mirror_impl.h"

namespace twinscope::mirror {
namespace {

// A request Beast could not parse (answered 400), as opposed to a connection
// that closed or timed out before a whole request arrived (closed silently).
bool IsMalformedRequest(const beast::error_code& ec) {
  static const auto& http_category = http::make_error_code(http::error::bad_method).category();
  return ec.category() == http_category && ec != http::error::end_of_stream && ec != http::error::partial_message &&
         ec != http::error::need_buffer && ec != http::error::need_more;
}

}  // namespace

awaitable<bool> Mirror::Impl::RejectBadRead(beast::tcp_stream& client, beast::error_code ec,
                                            std::string_view malformed_prefix) {
  if (ec == http::error::header_limit) {
    Bump(c_.rejected_header_too_large);
    co_await SendError(client, http::status::request_header_fields_too_large,
                       "request header larger than --max-header (" + std::to_string(opt_.max_header_bytes) + " bytes)",
                       "", 11, false);
    co_return true;
  }
  if (ec == http::error::body_limit) {
    Bump(c_.rejected_too_large);
    co_await SendError(client, http::status::payload_too_large,
                       "request body larger than --max-body (" + std::to_string(opt_.max_body_bytes) + " bytes)", "",
                       11, false);
    co_return true;
  }
  if (IsMalformedRequest(ec)) {
    Bump(c_.rejected_bad_request);
    co_await SendError(client, http::status::bad_request, std::string(malformed_prefix) + ec.message(), "", 11, false);
    co_return true;
  }
  co_return false;
}

awaitable<bool> Mirror::Impl::SendError(beast::tcp_stream& client, http::status status, std::string_view message,
                                        std::string_view id, unsigned version, bool keep_alive) {
  auto res = MakeErrorResponse(status, message, id, version, keep_alive);
  beast::error_code ec;
  client.expires_after(opt_.client_timeout);
  co_await http::async_write(client, res, asio::redirect_error(use_awaitable, ec));
  co_return !ec && keep_alive;
}

// Half-closes and reads what the client still sends (up to 1 MiB or 1 s),
// so that an error reply sent before the request body was read is not lost
// to a TCP reset.
awaitable<void> Mirror::Impl::LingeringClose(beast::tcp_stream& client) {
  beast::error_code ec;
  client.socket().shutdown(tcp::socket::shutdown_send, ec);
  std::array<char, 16384> sink;
  size_t total = 0;
  client.expires_after(std::chrono::seconds(1));
  while (!ec && total < (1u << 20)) {
    total += co_await client.async_read_some(asio::buffer(sink), asio::redirect_error(use_awaitable, ec));
  }
  client.close();
}

awaitable<void> Mirror::Impl::Session(Worker& w, tcp::socket socket) {
  GaugeHold open(c_.connections_open, /*already_counted=*/true);
  beast::tcp_stream client(std::move(socket));
  std::string client_ip;
  try {
    beast::error_code ec;
    client.socket().set_option(tcp::no_delay(true), ec);
    auto remote = client.socket().remote_endpoint(ec);
    if (!ec) client_ip = remote.address().to_string();

    beast::flat_buffer buf(opt_.max_header_bytes + 64 * 1024);
    std::unique_ptr<char[]> relay_chunk;  // the primary's body passes through here, kRelayChunk at a time
    bool first = true;
    bool linger = false;
    for (;;) {
      if (draining()) break;
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<uint32_t>(std::min<size_t>(opt_.max_header_bytes, UINT32_MAX)));
      parser.body_limit(opt_.max_body_bytes);
      client.expires_after(first ? opt_.client_timeout : opt_.keepalive_timeout);
      w.idle_clients.insert(&client);
      co_await http::async_read_header(client, buf, parser, asio::redirect_error(use_awaitable, ec));
      w.idle_clients.erase(&client);
      if (ec) {
        linger = co_await RejectBadRead(client, ec, "malformed HTTP request: ");
        break;  // closed, timed out, cancelled by a shutdown, or answered above
      }
      auto arrival_wall = std::chrono::system_clock::now();
      auto arrival = Clock::now();

      if (!parser.is_done()) {
        if (AsciiIEquals(parser.get()[http::field::expect], "100-continue")) {
          static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
          client.expires_after(opt_.client_timeout);
          co_await asio::async_write(client, asio::buffer(kContinue.data(), kContinue.size()),
                                     asio::redirect_error(use_awaitable, ec));
          if (ec) break;
        }
        client.expires_after(opt_.client_timeout);
        co_await http::async_read(client, buf, parser, asio::redirect_error(use_awaitable, ec));
        if (ec) {
          linger = co_await RejectBadRead(client, ec, "malformed HTTP request body: ");
          break;
        }
      }
      auto req = parser.release();
      bool keep_alive = req.keep_alive() && !draining();
      first = false;

      if (req.method() == http::verb::get && req.target() == opt_.health_path) {
        Bump(c_.health_requests);
        if (!co_await Health(client, req, keep_alive)) break;
        continue;
      }

      auto trace = std::make_shared<RequestTrace>();
      trace->log = &log_;
      trace->id = ResolveRequestId(req, &trace->id_generated);
      trace->method = std::string(req.method_string());
      trace->path = std::string(req.target());
      trace->client = client_ip;
      trace->arrival_wall = arrival_wall;
      trace->arrival = arrival;
      trace->request_bytes = req.body().size();
      if (log_.is_open()) {
        // Logged before it is forwarded: a request the primary never answers is still in the log.
        const bool kept = log_.ReserveBody(req.body().size());
        log_.WriteRequest(
            RequestLine(*trace, LoggedHeaders(req.base()), req.body(), kept,
                        kept ? ""
                             : "the request log's bound on body bytes (" + std::to_string(opt_.log_max_body_bytes) +
                                   ") was reached: logged without its body"),
            trace->id, kept);
      }
      Bump(c_.requests);
      if (!relay_chunk) relay_chunk = std::make_unique<char[]>(kRelayChunk);
      if (!co_await Forward(w, client, buf, relay_chunk.get(), req, std::move(trace))) break;
      if (draining()) break;
    }
    if (linger) {
      co_await LingeringClose(client);
    } else {
      client.socket().shutdown(tcp::socket::shutdown_send, ec);
      client.close();
    }
  } catch (const std::exception& e) {
    w.idle_clients.erase(&client);
    std::fprintf(stderr, "twinscope mirror: internal error serving %s: %s (connection closed)\n", client_ip.c_str(),
                 e.what());
  }
}

}  // namespace twinscope::mirror
