// Fuzz target for what the mirror parses or rewrites itself (Beast parses
// HTTP): the --listen address and upstream URL parsers, and the request
// rewriting a client controls (X-Request-Id, Connection-named fields,
// absolute-form targets) on whatever Beast accepts as a request.
// Built as a libFuzzer target with -DTWINSCOPE_FUZZ=ON (clang), and always as
// part of the mirror's gtest binary (corpus replay + random inputs).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "mirror/address.h"
#include "mirror/forward.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace twinscope::mirror;
  std::string_view text(reinterpret_cast<const char*>(data), size);

  auto listen = ParseListenAddress(text);
  if (listen.ok()) {
    auto again = ParseListenAddress(listen->ToString());
    Check(again.ok() && again->port == listen->port && again->host == listen->host);
  }
  auto url = ParseUpstreamUrl(text);
  if (url.ok()) {
    auto again = ParseUpstreamUrl(url->ToString());
    Check(again.ok() && again->host == url->host && again->port == url->port && again->base_path == url->base_path);
  }
  Check(IsValidRequestId(text) ==
        (!text.empty() && text.size() <= kMaxRequestIdLength &&
         text.find_first_not_of("!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~") == std::string_view::npos));

  // Whatever Beast accepts as a request must come out as two well-formed
  // upstream requests with exactly one valid X-Request-Id.
  http::request_parser<http::string_body> parser;
  parser.eager(true);
  parser.header_limit(64 * 1024);
  parser.body_limit(1 << 20);
  beast::error_code ec;
  parser.put(asio::buffer(data, size), ec);
  if (!ec && parser.is_header_done()) {
    parser.put_eof(ec);
    auto& req = parser.get();
    UpstreamUrl up;
    up.host = "127.0.0.1";
    up.port = 8000;
    up.base_path = size % 2 ? "/base" : "";
    bool generated = false;
    std::string id = ResolveRequestId(req, &generated);
    Check(IsValidRequestId(id));
    auto out = MakeUpstreamRequest(req, up, id, "primary", "127.0.0.1");
    Check(out.count(kRequestIdField) == 1 && out[kRequestIdField] == id);
    Check(out.count(http::field::connection) <= 1 && out.count(http::field::transfer_encoding) == 0);
    Check(out.target().empty() || out.target() == "*" || out.target().front() == '/');
    std::string serialized;
    http::serializer<true, http::string_body> sr{out};
    do {
      sr.next(ec, [&](beast::error_code&, auto const& buffers) {
        for (auto b : beast::buffers_range_ref(buffers))
          serialized.append(static_cast<const char*>(b.data()), b.size());
        sr.consume(beast::buffer_bytes(buffers));
      });
    } while (!ec && !sr.is_done());
    // The serialized request parses again, with the same body.
    http::request_parser<http::string_body> reparse;
    reparse.eager(true);
    reparse.body_limit(2 << 20);
    size_t used = reparse.put(asio::buffer(serialized), ec);
    (void)used;
    Check(!ec && reparse.is_done() && reparse.get().body() == out.body());

    http::response<http::empty_body> res;
    res.result(http::status::ok);
    bool keep = req.keep_alive();
    PrepareClientResponse(res, id, req.version(), size % 3 == 0, &keep);
    Check(res[kRequestIdField] == id);
  }
  return 0;
}
