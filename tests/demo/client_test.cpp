// The chat load client against the fake-engine server (streamed and whole
// replies, statistics, the exact reply text), against servers that fail
// (down, 400, silent, a stream split into single bytes) and bad URLs.
#include <gtest/gtest.h>

#include <atomic>

#include "client/chat_client.h"
#include "demo_test_util.h"

namespace twinscope::demo {
namespace {

using namespace testing;  // NOLINT
using Json = nlohmann::json;

TEST(DemoClient, ConcurrentStreamsAgainstTheFakeEngine) {
  FakeServer s({}, TinyEngine(std::chrono::microseconds(1000)));
  ChatLoadOptions o;
  o.url = s.url();
  o.requests = 8;
  o.max_tokens = 35;
  o.seed = 100;
  ChatLoadReport rep = RunChatLoad(o);
  ASSERT_EQ(rep.results.size(), 8u);
  EXPECT_EQ(rep.ok, 8);
  EXPECT_EQ(rep.failed, 0);
  EXPECT_EQ(rep.tokens, 8 * 35);
  EXPECT_GT(rep.tokens_per_s(), 0);
  for (const auto& r : rep.results) {
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.request_id, "demo-" + std::to_string(r.index));
    EXPECT_EQ(r.chunks, 35);
    EXPECT_EQ(r.completion_tokens, 35);
    EXPECT_EQ(r.finish_reason, "length");
    EXPECT_EQ(r.content, ExpectedFor(ChatRequestPrompt(o, r.index), 100 + r.index, 35, 32000));
    EXPECT_GT(r.ttft_ms, 0);
    EXPECT_LE(r.ttft_ms, r.total_ms);
    ASSERT_EQ(r.chunk_ms.size(), 35u);
    EXPECT_TRUE(std::is_sorted(r.chunk_ms.begin(), r.chunk_ms.end()));
  }
  // The requests ran together: one prefill step for most of them and shared decode steps.
  size_t widest = 0;
  for (const auto& st : s.recorder.Get()) widest = std::max(widest, st.seqs.size());
  EXPECT_GE(widest, 4u);
  Json j = rep.ToJson();
  EXPECT_EQ(j["ok"], 8);
  EXPECT_EQ(j["results"].size(), 8u);
  EXPECT_GT(j["latency_ms_p99"].get<double>(), 0);
}

TEST(DemoClient, WholeRepliesAndNoIds) {
  FakeServer s;
  ChatLoadOptions o;
  o.url = s.url();
  o.requests = 3;
  o.max_tokens = 4;
  o.stream = false;
  o.id_prefix = "";
  ChatLoadReport rep = RunChatLoad(o);
  EXPECT_EQ(rep.ok, 3);
  for (const auto& r : rep.results) {
    EXPECT_EQ(r.completion_tokens, 4);
    EXPECT_EQ(r.request_id.rfind("req-", 0), 0u) << r.request_id;  // the server's id, from its reply header
    EXPECT_EQ(r.content, ExpectedFor(ChatRequestPrompt(o, r.index), 0, 4, 32000));
  }
}

TEST(DemoClient, ErrorsArePerRequestAndSayWhat) {
  {
    FakeServer s;
    ChatLoadOptions o;
    o.url = s.url();
    o.requests = 2;
    o.max_tokens = 100000;  // more than the model's context
    ChatLoadReport rep = RunChatLoad(o);
    EXPECT_EQ(rep.failed, 2);
    EXPECT_EQ(rep.results[0].status, 400);
    EXPECT_NE(rep.results[0].error.find("HTTP 400: this model's maximum context length"), std::string::npos)
        << rep.results[0].error;
  }
  {
    // A port nobody listens on.
    asio::io_context ioc;
    tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    const uint16_t port = a.local_endpoint().port();
    a.close();
    ChatLoadOptions o;
    o.url = "http://127.0.0.1:" + std::to_string(port);
    o.requests = 3;
    ChatLoadReport rep = RunChatLoad(o);
    EXPECT_EQ(rep.failed, 3);
    EXPECT_NE(rep.results[2].error.find("connect to http://127.0.0.1:"), std::string::npos) << rep.results[2].error;
  }
  {
    ChatLoadOptions o;
    o.url = "https://example.com";
    ChatLoadReport rep = RunChatLoad(o);
    EXPECT_EQ(rep.failed, o.requests);
    EXPECT_NE(rep.results[0].error.find("https is not supported"), std::string::npos);
  }
}

// A one-connection-at-a-time raw server answering with `reply` written one
// byte at a time (or never answering).
class RawServer {
 public:
  RawServer(std::string reply, bool silent) : reply_(std::move(reply)), silent_(silent), acceptor_(ioc_) {
    tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(ep.protocol());
    acceptor_.bind(ep);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { Serve(); });
  }
  ~RawServer() {
    stop_ = true;
    beast::error_code ec;
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);  // wakes a blocked accept
    acceptor_.close(ec);
    if (thread_.joinable()) thread_.join();
  }
  uint16_t port() const { return port_; }

 private:
  void Serve() {
    beast::error_code ec;
    tcp::socket s = acceptor_.accept(ec);
    if (ec) return;
    std::array<char, 65536> buf;
    s.read_some(asio::buffer(buf), ec);  // the request (small, one read)
    if (silent_) {
      while (!stop_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    for (char c : reply_) {
      asio::write(s, asio::buffer(&c, 1), ec);
      if (ec) return;
    }
    s.shutdown(tcp::socket::shutdown_send, ec);
  }
  std::string reply_;
  bool silent_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
};

std::string Chunked(const std::string& body) {
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
         std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n";
}

TEST(DemoClient, AStreamSplitIntoBytesWithCrlfAndComments) {
  const std::string events =
      ": keep-alive\r\n\r\n"
      "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\r\n\r\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\r\n\r\n"
      "data: {\"choices\":[{\"delta\":{\"content\":\" there\"},\"finish_reason\":\"stop\"}]}\r\n\r\n"
      "data: [DONE]\r\n\r\n";
  RawServer raw(Chunked(events), false);
  ChatLoadOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(raw.port());
  o.requests = 1;
  ChatLoadReport rep = RunChatLoad(o);
  ASSERT_EQ(rep.ok, 1) << rep.results[0].error;
  EXPECT_EQ(rep.results[0].content, "Hi there");
  EXPECT_EQ(rep.results[0].chunks, 2);
  EXPECT_EQ(rep.results[0].tokens(), 2);  // no usage: chunks count
  EXPECT_EQ(rep.results[0].finish_reason, "stop");
}

TEST(DemoClient, BrokenStreamsAndSilentServersAreErrors) {
  {
    RawServer raw(Chunked("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"), false);  // no [DONE]
    ChatLoadOptions o;
    o.url = "http://127.0.0.1:" + std::to_string(raw.port());
    o.requests = 1;
    ChatLoadReport rep = RunChatLoad(o);
    EXPECT_EQ(rep.failed, 1);
    EXPECT_NE(rep.results[0].error.find("without 'data: [DONE]'"), std::string::npos) << rep.results[0].error;
  }
  {
    RawServer raw(Chunked("data: {\"error\":{\"message\":\"boom\"}}\n\ndata: [DONE]\n\n"), false);
    ChatLoadOptions o;
    o.url = "http://127.0.0.1:" + std::to_string(raw.port());
    o.requests = 1;
    ChatLoadReport rep = RunChatLoad(o);
    EXPECT_NE(rep.results[0].error.find("mid-stream: boom"), std::string::npos) << rep.results[0].error;
  }
  {
    RawServer raw("", true);
    ChatLoadOptions o;
    o.url = "http://127.0.0.1:" + std::to_string(raw.port());
    o.requests = 1;
    o.timeout = std::chrono::milliseconds(200);
    ChatLoadReport rep = RunChatLoad(o);
    EXPECT_EQ(rep.failed, 1);
    EXPECT_NE(rep.results[0].error.find("timed out"), std::string::npos) << rep.results[0].error;
  }
}

TEST(DemoClient, Percentiles) {
  EXPECT_EQ(Percentile({}, 50), -1);
  EXPECT_EQ(Percentile({3, 1, 2}, 50), 2);
  EXPECT_EQ(Percentile({3, 1, 2}, 99), 3);
  EXPECT_EQ(Percentile({3, 1, 2}, 0), 1);
}

}  // namespace
}  // namespace twinscope::demo
