// The demo server's HTTP API on loopback, with the CPU engine: streamed and
// whole replies, batching of concurrent requests, bad input of every kind
// (each answered with a JSON error, the server staying up), the schedule
// endpoint, keep-alive and clients that go away.
#include <gtest/gtest.h>

#include "demo_test_util.h"
#include "server/protocol.h"

namespace twinscope::demo {
namespace {

using namespace testing;  // NOLINT
using Json = nlohmann::json;

void ExpectJsonError(Reply r, int status, const std::string& says) {
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.headers["Content-Type"], "application/json");
  Json j = Json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j["error"]["code"], status);
  EXPECT_NE(j["error"]["message"].get<std::string>().find(says), std::string::npos) << r.body;
}

bool Healthy(const FakeServer& s) { return Request(s.port(), http::verb::get, "/health").status == 200; }

TEST(DemoHttp, WholeRepliesAreTheDeterministicText) {
  FakeServer s;
  Reply r = Post(s.port(), ChatBody("hello there", 12, false, 42));
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.headers["X-Request-Id"], "req-1");
  Json j = Json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"], "chatcmpl-req-1");
  EXPECT_EQ(j["model"], "twinscope-demo");
  EXPECT_EQ(j["choices"][0]["message"]["content"], ExpectedFor("hello there", 42, 12, 32000));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_EQ(j["usage"]["prompt_tokens"], static_cast<int>(TokenizeChat({{"user", "hello there"}}, 32000).size()));
  // Same request, same reply; no seed: the server's seed (0).
  Reply again = Post(s.port(), ChatBody("hello there", 12, false, 42), {{"X-Request-Id", "mine"}});
  EXPECT_EQ(Json::parse(again.body)["choices"][0]["message"], j["choices"][0]["message"]);
  EXPECT_EQ(again.headers["X-Request-Id"], "mine");
  Reply unseeded = Post(s.port(), ChatBody("hello there", 5, false));
  EXPECT_EQ(Json::parse(unseeded.body)["choices"][0]["message"]["content"], ExpectedFor("hello there", 0, 5, 32000));
}

TEST(DemoHttp, StreamedRepliesAreSseAndSpellTheSameText) {
  FakeServer s;
  Json body = Json::parse(ChatBody("stream me", 9, true, 7));
  body["stream_options"] = {{"include_usage", true}};
  Reply r = Post(s.port(), body.dump(), {{"X-Request-Id", "s-1"}});
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(r.headers["Content-Type"], "text/event-stream");
  EXPECT_EQ(r.headers["X-Request-Id"], "s-1");
  auto events = SseData(r.body);
  ASSERT_EQ(events.size(), 1u + 9u + 1u + 1u + 1u);  // role, 9 tokens, finish, usage, [DONE]
  EXPECT_EQ(Json::parse(events[0])["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 1; i <= 9; ++i) {
    Json c = Json::parse(events[i]);
    EXPECT_EQ(c["id"], "chatcmpl-s-1");
    text += c["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(text, ExpectedFor("stream me", 7, 9, 32000));
  EXPECT_EQ(Json::parse(events[10])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(Json::parse(events[11])["usage"]["completion_tokens"], 9);
  EXPECT_EQ(events[12], "[DONE]");
}

TEST(DemoHttp, ConcurrentRequestsAreBatchedAndNamedInTheirSteps) {
  FakeServer s({}, TinyEngine(std::chrono::microseconds(2000)));
  std::vector<std::thread> clients;
  std::vector<Reply> replies(8);
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] {
      replies[i] = Post(s.port(), ChatBody("c" + std::to_string(i), 20, i % 2 == 0, i),
                        {{"X-Request-Id", "c" + std::to_string(i)}});
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < 8; ++i) ASSERT_EQ(replies[i].status, 200) << replies[i].body;
  size_t widest = 0;
  for (const auto& st : s.recorder.Get()) {
    if (st.kind != StepKind::kDecode) continue;
    widest = std::max(widest, st.seqs.size());
    EXPECT_GE(st.padded, static_cast<int>(st.seqs.size()));
    const auto& sizes = s.engine.info().graph_sizes;
    EXPECT_TRUE(std::find(sizes.begin(), sizes.end(), st.padded) != sizes.end()) << st.padded;
  }
  EXPECT_GE(widest, 4u) << "concurrent requests should share decode steps";
  bool named = false;
  for (const auto& st : s.recorder.Get()) named = named || st.name.find("c3:1") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(DemoHttp, BadRequestsGet400AndTheServerStaysUp) {
  FakeServer s;
  ExpectJsonError(Post(s.port(), "{not json"), 400, "not valid JSON");
  ExpectJsonError(Post(s.port(), "{}"), 400, "'messages' is a required property");
  ExpectJsonError(Post(s.port(), R"({"messages":[{"role":"user","content":"x"}],"max_tokens":"many"})"), 400,
                  "'max_tokens' must be an integer");
  ExpectJsonError(Post(s.port(), ChatBody("x", 100000, false)), 400, "maximum context length");
  ExpectJsonError(Post(s.port(), ChatBody("x", 3, false), {{"X-Request-Id", std::string(200, 'a')}}), 400,
                  "X-Request-Id");
  ExpectJsonError(Post(s.port(), ""), 400, "not valid JSON");
  ExpectJsonError(Post(s.port(), std::string("\xff\xfe\x00\x01", 4)), 400, "not valid JSON");
  EXPECT_TRUE(Healthy(s));
}

TEST(DemoHttp, WrongMethodsAndUnknownPaths) {
  FakeServer s;
  Reply get_chat = Request(s.port(), http::verb::get, "/v1/chat/completions");
  ExpectJsonError(get_chat, 405, "GET is not allowed");
  EXPECT_EQ(get_chat.headers["Allow"], "POST");
  ExpectJsonError(Request(s.port(), http::verb::post, "/health", "{}"), 405, "POST is not allowed");
  ExpectJsonError(Request(s.port(), http::verb::delete_, "/v1/models"), 405, "DELETE");
  ExpectJsonError(Request(s.port(), http::verb::post, "/v1/schedule", "x"), 405, "POST");
  ExpectJsonError(Request(s.port(), http::verb::get, "/v1/completions"), 404, "no such endpoint");
  ExpectJsonError(Request(s.port(), http::verb::get, "/"), 404, "no such endpoint");
  EXPECT_TRUE(Healthy(s));
}

TEST(DemoHttp, OversizeAndMalformedHttpIsAnswered) {
  HttpOptions ho;
  ho.max_body_bytes = 2048;
  ho.max_header_bytes = 4096;
  FakeServer s({}, TinyEngine(), ho);
  ExpectJsonError(Post(s.port(), ChatBody(std::string(4000, 'a'), 3, false)), 413, "larger than 2048 bytes");
  // Announced too large: answered before the body is read.
  std::string big = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n";
  EXPECT_EQ(StatusOfRaw(RawExchange(s.port(), big)), 413);
  std::string long_header = "GET /health HTTP/1.1\r\nHost: x\r\nX-Junk: " + std::string(8000, 'j') + "\r\n\r\n";
  std::string reply = RawExchange(s.port(), long_header);
  EXPECT_EQ(StatusOfRaw(reply), 431);
  EXPECT_NE(reply.find("\"code\":431"), std::string::npos);
  EXPECT_EQ(StatusOfRaw(RawExchange(s.port(), "NOT HTTP AT ALL\r\n\r\n")), 400);
  EXPECT_EQ(StatusOfRaw(RawExchange(s.port(), "GET /health HTTP/1.1\r\nContent-Length: -5\r\n\r\n")), 400);
  EXPECT_EQ(StatusOfRaw(RawExchange(s.port(),
                                    "POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")),
            400);
  // Cut off mid-body, and a bare connect-and-close: no reply, no harm.
  RawExchange(s.port(), "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"mess");
  RawExchange(s.port(), "");
  // A chunked body is read whole.
  const std::string body = ChatBody("chunked", 2, false);
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  std::string chunked =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
      "Connection: close\r\n\r\n" +
      std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n";
  EXPECT_EQ(StatusOfRaw(RawExchange(s.port(), chunked, false)), 200);
  EXPECT_TRUE(Healthy(s));
}

TEST(DemoHttp, ExpectContinueAndKeepAlive) {
  FakeServer s;
  asio::io_context ioc;
  beast::tcp_stream conn(ioc);
  conn.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), s.port()));
  beast::flat_buffer buf;
  for (int i = 0; i < 3; ++i) {  // one connection, three requests
    http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
    req.set(http::field::host, "x");
    if (i == 1) req.set(http::field::expect, "100-continue");
    req.body() = ChatBody("k" + std::to_string(i), 2, i == 2);
    req.prepare_payload();
    http::write(conn, req);
    http::response<http::string_body> res;
    http::read(conn, buf, res);
    if (res.result_int() == 100) {
      EXPECT_EQ(i, 1);
      http::response<http::string_body> final_res;
      http::read(conn, buf, final_res);
      res = std::move(final_res);
    }
    ASSERT_EQ(res.result_int(), 200) << i << res.body();
    EXPECT_TRUE(res.keep_alive());
  }
}

TEST(DemoHttp, ModelsAndHealth) {
  ServingOptions so;
  so.served_model = "demo-x";
  so.seed = 99;
  FakeServer s(so);
  Reply m = Request(s.port(), http::verb::get, "/v1/models");
  ASSERT_EQ(m.status, 200);
  Json j = Json::parse(m.body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "demo-x");
  EXPECT_EQ(j["data"][0]["vocab_size"], 32000);
  EXPECT_EQ(j["data"][0]["seed"], 99);
  EXPECT_EQ(j["data"][0]["max_model_len"], 2048);
  Reply h = Request(s.port(), http::verb::get, "/health");
  ASSERT_EQ(h.status, 200);
  Json hj = Json::parse(h.body);
  EXPECT_EQ(hj["status"], "ok");
  EXPECT_EQ(hj["role"], "primary");
  EXPECT_EQ(hj["listen"], "127.0.0.1:" + std::to_string(s.port()));
  EXPECT_EQ(hj["kv_blocks"]["total"], 2048);
}

TEST(DemoHttp, TheScheduleIsServedAndLongPolled) {
  FakeServer s;
  Reply empty = Request(s.port(), http::verb::get, "/v1/schedule?from=0&wait_ms=50");
  ASSERT_EQ(empty.status, 200);
  EXPECT_EQ(empty.headers["Content-Type"], "application/x-ndjson");
  EXPECT_EQ(empty.headers["X-Schedule-Next"], "0");
  EXPECT_EQ(empty.headers["X-Schedule-Ended"], "0");
  auto header = ParseScheduleLine(empty.body.substr(0, empty.body.find('\n')));
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->type, ScheduleLine::Type::kHeader);

  // A long poll returns as soon as a step is there.
  std::thread poster([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Post(s.port(), ChatBody("poll", 3, false), {{"X-Request-Id", "p1"}});
  });
  auto t0 = std::chrono::steady_clock::now();
  Reply polled = Request(s.port(), http::verb::get, "/v1/schedule?from=0&wait_ms=5000");
  auto waited = std::chrono::steady_clock::now() - t0;
  poster.join();
  ASSERT_EQ(polled.status, 200);
  EXPECT_LT(waited, std::chrono::milliseconds(4000));
  auto first = polled.body.find('\n');
  auto step = ParseScheduleLine(polled.body.substr(first + 1, polled.body.find('\n', first + 1) - first - 1));
  ASSERT_TRUE(step.ok()) << polled.body;
  EXPECT_EQ(step->step.name.rfind("prefill step 0 [p1:", 0), 0u) << step->step.name;
  ASSERT_TRUE(WaitUntil([&] { return s.core.schedule().steps() >= 3; }));
  Reply rest = Request(s.port(), http::verb::get, "/v1/schedule?from=1&max=1");
  EXPECT_EQ(rest.headers["X-Schedule-Next"], "2");
  ExpectJsonError(Request(s.port(), http::verb::get, "/v1/schedule?from=-1"), 400, "'from'");
  ExpectJsonError(Request(s.port(), http::verb::get, "/v1/schedule?wait_ms=abc"), 400, "'wait_ms'");
  s.Stop();
}

TEST(DemoHttp, AClientThatGoesAwayIsAborted) {
  FakeServer s({}, TinyEngine(std::chrono::microseconds(1000)));
  for (bool stream : {true, false}) {
    asio::io_context ioc;
    tcp::socket sock(ioc);
    sock.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), s.port()));
    const std::string body = ChatBody("bye", 1500, stream);
    std::string req =
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
        body;
    asio::write(sock, asio::buffer(req));
    ASSERT_TRUE(WaitUntil([&] { return s.core.Health()["running"] == 1; }));
    sock.close();
  }
  ASSERT_TRUE(WaitUntil([&] { return s.core.Health()["requests"]["aborted"] == 2; }));
  EXPECT_TRUE(WaitUntil([&] { return s.core.Health()["running"] == 0; }));
  EXPECT_TRUE(Healthy(s));
}

TEST(DemoHttp, AFollowerNeedsRequestIds) {
  StepFeed feed;
  ServingOptions so;
  so.follow = &feed;
  FakeServer s(so);
  ExpectJsonError(Post(s.port(), ChatBody("x", 3, false)), 400, "X-Request-Id");
  Reply h = Request(s.port(), http::verb::get, "/health");
  EXPECT_EQ(Json::parse(h.body)["role"], "follower");
  feed.Close(Status::Ok());
}

}  // namespace
}  // namespace twinscope::demo
