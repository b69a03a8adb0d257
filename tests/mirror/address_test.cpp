// Unit tests of the mirror's own parsing and header rewriting (no sockets).
#include "mirror/address.h"

#include <gtest/gtest.h>

#include <set>

#include "mirror/forward.h"

namespace twinscope::mirror {
namespace {

TEST(ListenAddress, Forms) {
  auto a = ParseListenAddress("127.0.0.1:8080");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8080);
  EXPECT_TRUE(a->loopback);
  a = ParseListenAddress(":9000");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_TRUE(a->loopback);
  a = ParseListenAddress("localhost:0");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->port, 0);
  a = ParseListenAddress("[::1]:8080");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  EXPECT_TRUE(a->loopback);
  EXPECT_EQ(a->ToString(), "[::1]:8080");
  a = ParseListenAddress("0.0.0.0:80");
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->loopback);
  for (const char* bad : {"", "8080", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "example.com:80",
                          "::1:80", "[::1]", "[::1]x:80", "1.2.3.4:8a"}) {
    EXPECT_FALSE(ParseListenAddress(bad).ok()) << bad;
  }
}

TEST(UpstreamUrl, Forms) {
  auto u = ParseUpstreamUrl("http://127.0.0.1:8000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8000);
  EXPECT_EQ(u->base_path, "");
  EXPECT_EQ(u->HostHeader(), "127.0.0.1:8000");
  u = ParseUpstreamUrl("http://gpu-box.local/api/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->base_path, "/api");
  EXPECT_EQ(u->HostHeader(), "gpu-box.local");
  u = ParseUpstreamUrl("http://[::1]:9000/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->HostHeader(), "[::1]:9000");
  EXPECT_EQ(u->ToString(), "http://[::1]:9000");
  auto https = ParseUpstreamUrl("https://x");
  ASSERT_FALSE(https.ok());
  EXPECT_NE(https.status().message().find("https"), std::string::npos);
  for (const char* bad : {"", "127.0.0.1:8000", "http://", "http://:80", "http://h:0", "http://h:99999",
                          "http://user@h", "http://h/a?b=1", "http://h/a b", "http://h_1:x", "ftp://h"}) {
    EXPECT_FALSE(ParseUpstreamUrl(bad).ok()) << bad;
  }
}

TEST(RequestId, ValidationAndGeneration) {
  EXPECT_TRUE(IsValidRequestId("abc-123"));
  EXPECT_TRUE(IsValidRequestId(std::string(128, 'x')));
  EXPECT_FALSE(IsValidRequestId(std::string(129, 'x')));
  EXPECT_FALSE(IsValidRequestId(""));
  EXPECT_FALSE(IsValidRequestId("a b"));
  EXPECT_FALSE(IsValidRequestId("a\x01"));
  EXPECT_FALSE(IsValidRequestId("\xc3\xa9"));
  std::set<std::string> ids;
  for (int i = 0; i < 10000; ++i) {
    std::string id = NewRequestId();
    ASSERT_EQ(id.size(), 36u);
    ASSERT_EQ(id[14], '4');
    ASSERT_TRUE(IsValidRequestId(id));
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 10000u);
}

TEST(Forward, UpstreamRequestRewriting) {
  http::request<http::string_body> client{http::verb::post, "/v1/chat/completions", 10};
  client.set(http::field::host, "mirror:8080");
  client.set(http::field::connection, "keep-alive, X-Hop");
  client.set("X-Hop", "secret");
  client.set("X-Request-Id", "client-id");
  client.set("X-Twinscope-Mirror", "forged");
  client.set(http::field::expect, "100-continue");
  client.set(http::field::authorization, "Bearer k");
  client.body() = "{}";
  client.prepare_payload();
  bool generated = true;
  std::string id = ResolveRequestId(client, &generated);
  EXPECT_EQ(id, "client-id");
  EXPECT_FALSE(generated);

  UpstreamUrl up;
  up.host = "10.0.0.2";
  up.port = 8001;
  up.base_path = "/base";
  auto out = MakeUpstreamRequest(client, up, id, "shadow", "127.0.0.1");
  EXPECT_EQ(out.version(), 11);
  EXPECT_EQ(out.target(), "/base/v1/chat/completions");
  EXPECT_EQ(out[http::field::host], "10.0.0.2:8001");
  EXPECT_EQ(out["X-Request-Id"], "client-id");
  EXPECT_EQ(out["X-Twinscope-Mirror"], "shadow");
  EXPECT_EQ(out.count("X-Twinscope-Mirror"), 1u);
  EXPECT_EQ(out.count("X-Hop"), 0u);
  EXPECT_EQ(out.count(http::field::expect), 0u);
  EXPECT_EQ(out.count(http::field::connection), 0u);
  EXPECT_EQ(out[http::field::authorization], "Bearer k");
  EXPECT_EQ(out[http::field::content_length], "2");
  EXPECT_EQ(out["X-Forwarded-For"], "127.0.0.1");
  EXPECT_TRUE(out.keep_alive());

  UpstreamUrl plain;
  plain.host = "h";
  EXPECT_EQ(ForwardTarget(plain, "http://other:1/x?y=1"), "/x?y=1");
  EXPECT_EQ(ForwardTarget(plain, "http://other:1"), "/");
  EXPECT_EQ(ForwardTarget(plain, "hTtP://other:1/x"), "/x");  // schemes are case-insensitive
  EXPECT_EQ(ForwardTarget(plain, "hTtp://"), "/");            // the fuzzer's input: no host, no path
  EXPECT_EQ(ForwardTarget(plain, "HTTPS://other/y"), "/y");
  EXPECT_EQ(ForwardTarget(plain, "*"), "*");
  EXPECT_EQ(ForwardTarget(up, "/x"), "/base/x");
}

TEST(Forward, ClientResponseRewriting) {
  http::response<http::empty_body> h;
  h.result(http::status::ok);
  h.set(http::field::connection, "close");
  h.set(http::field::keep_alive, "timeout=5");
  h.set(http::field::transfer_encoding, "chunked");
  bool keep = true;
  PrepareClientResponse(h, "rid", 11, true, &keep);
  EXPECT_TRUE(keep);
  EXPECT_TRUE(h.chunked());
  EXPECT_EQ(h.count(http::field::keep_alive), 0u);
  EXPECT_EQ(h["X-Request-Id"], "rid");
  EXPECT_TRUE(h.keep_alive());

  // An HTTP/1.0 client cannot take chunks: unframed, then close.
  http::response<http::empty_body> h10;
  h10.result(http::status::ok);
  h10.set(http::field::transfer_encoding, "chunked");
  keep = true;
  PrepareClientResponse(h10, "rid", 10, true, &keep);
  EXPECT_FALSE(keep);
  EXPECT_FALSE(h10.chunked());

  // A body that runs until the upstream closes is chunked for HTTP/1.1.
  http::response<http::empty_body> eof;
  eof.result(http::status::ok);
  keep = true;
  PrepareClientResponse(eof, "rid", 11, false, &keep);
  EXPECT_TRUE(eof.chunked());
  EXPECT_TRUE(keep);
}

TEST(Forward, ErrorResponseIsJson) {
  auto r = MakeErrorResponse(http::status::bad_gateway, "primary \"x\" down", "id1", 11, false);
  EXPECT_EQ(r.result_int(), 502);
  EXPECT_EQ(r[http::field::content_type], "application/json");
  EXPECT_NE(r.body().find("\\\"x\\\""), std::string::npos);
  EXPECT_FALSE(r.keep_alive());
}

}  // namespace
}  // namespace twinscope::mirror
