// The demo server's request parsing, reply formats, text, model shapes, URLs
// and the client's SSE parser: the parts of the wire that need no socket.
#include "server/protocol.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "client/sse.h"
#include "common/model.h"
#include "common/sampling.h"
#include "net/url.h"
#include "server/text.h"

namespace twinscope::demo {
namespace {

using Json = nlohmann::json;

TEST(DemoProtocol, ParsesAFullRequest) {
  auto r = ParseChatRequest(R"({"model":"m","messages":[{"role":"system","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
      "stream":true,"stream_options":{"include_usage":true},"max_tokens":40,"seed":-1,"temperature":0.7,"n":1,
      "unknown_field":{"x":1}})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->model, "m");
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[1].content, "a\nb");
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_EQ(*r->max_tokens, 40);
  EXPECT_EQ(*r->seed, UINT64_MAX);  // -1 modulo 2^64
}

TEST(DemoProtocol, DefaultsWhenFieldsAreAbsentOrNull) {
  auto r = ParseChatRequest(R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":null,"seed":null,
      "stream":null,"model":null})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->stream);
  EXPECT_FALSE(r->max_tokens.has_value());
  EXPECT_FALSE(r->seed.has_value());
  auto m = ParseChatRequest(R"({"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":7})");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m->max_tokens, 7);
}

TEST(DemoProtocol, RejectsBadRequestsNamingTheField) {
  struct Case {
    const char* body;
    const char* says;
  };
  const Case cases[] = {
      {"", "not valid JSON"},
      {"{", "not valid JSON"},
      {"[1,2]", "must be a JSON object"},
      {"{}", "'messages' is a required property"},
      {R"({"messages":"hi"})", "'messages' must be an array"},
      {R"({"messages":[]})", "at least one message"},
      {R"({"messages":[1]})", "messages[0] must be an object"},
      {R"({"messages":[{"content":"x"}]})", "messages[0].role must be a string"},
      {R"({"messages":[{"role":"user"}]})", "messages[0].content is a required property"},
      {R"({"messages":[{"role":"user","content":5}]})", "messages[0].content must be a string or a list"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "is not supported"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})", "'max_tokens' must be at least 1"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":-3})", "'max_tokens' must be at least 1"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1e3})", "'max_tokens' must be an integer"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":99999999999})", "fit in 32 bits"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", "'stream' must be a boolean"},
      {R"({"messages":[{"role":"user","content":"x"}],"seed":1.5})", "'seed' must be an integer"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":2})", "'n' must be 1"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})", "'temperature' must be a number"},
      {R"({"messages":[{"role":"user","content":"x"}],"model":3})", "'model' must be a string"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":1}})", "include_usage"},
  };
  for (const auto& c : cases) {
    auto r = ParseChatRequest(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << c.body << " -> " << r.status().message();
  }
}

TEST(DemoProtocol, ReplyFormatsAreOpenAiShaped) {
  CompletionMeta m{"chatcmpl-x", "demo", 1700000000};
  Json whole = Json::parse(CompletionBody(m, "Hello world", "length", 5, 2));
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "Hello world");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(whole["usage"]["total_tokens"], 7);

  std::string first = ChunkEvent(m, "", true, "");
  ASSERT_EQ(first.rfind("data: ", 0), 0u);
  ASSERT_EQ(first.substr(first.size() - 2), "\n\n");
  Json c = Json::parse(first.substr(6));
  EXPECT_EQ(c["object"], "chat.completion.chunk");
  EXPECT_EQ(c["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  Json last = Json::parse(ChunkEvent(m, "", false, "length").substr(6));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(last["choices"][0]["delta"].contains("content"));
  Json usage = Json::parse(UsageEvent(m, 3, 4).substr(6));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);

  Json err = Json::parse(ErrorBody(400, "bad \"thing\"", "invalid_request_error", "messages"));
  EXPECT_EQ(err["error"]["message"], "bad \"thing\"");
  EXPECT_EQ(err["error"]["code"], 400);
  EXPECT_EQ(err["error"]["param"], "messages");
  Json models = Json::parse(ModelsBody("demo", 1, {{"vocab_size", 32000}}));
  EXPECT_EQ(models["data"][0]["id"], "demo");
  EXPECT_EQ(models["data"][0]["vocab_size"], 32000);
}

TEST(DemoProtocol, RequestIds) {
  EXPECT_TRUE(IsValidRequestId("demo-1"));
  EXPECT_TRUE(IsValidRequestId(std::string(128, 'a')));
  EXPECT_FALSE(IsValidRequestId(""));
  EXPECT_FALSE(IsValidRequestId(std::string(129, 'a')));
  EXPECT_FALSE(IsValidRequestId("a b"));
  EXPECT_FALSE(IsValidRequestId("a\nb"));
}

TEST(DemoText, TokenizingIsDeterministicAndInRange) {
  auto a = TokenizeChat({{"user", "Hello, world! 42"}}, 32000);
  auto b = TokenizeChat({{"user", "Hello, world! 42"}}, 32000);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 2u + 5u + 1u + 2u);  // start, role, 5 pieces (Hello , world ! 42), end; assistant start, role
  for (int32_t t : a) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 32000);
  }
  EXPECT_NE(a, TokenizeChat({{"user", "Hello, world! 43"}}, 32000));
  EXPECT_NE(RequestSampleSeed(1, a), RequestSampleSeed(2, a));
  EXPECT_EQ(TokenizeChat({}, 1000).size(), 2u);
}

TEST(DemoText, RepliesReadAsText) {
  const std::string reply = ExpectedReply(12345, 200, 128256);
  ASSERT_FALSE(reply.empty());
  EXPECT_TRUE(std::isupper(static_cast<unsigned char>(reply[0]))) << reply;
  EXPECT_NE(reply[0], ' ');
  EXPECT_NE(reply.find(' '), std::string::npos);
  // Every character is a letter, a space or punctuation, and each period is followed by a capital.
  for (size_t i = 0; i < reply.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(reply[i]);
    ASSERT_TRUE(std::isalpha(c) || c == ' ' || c == ',' || c == '.') << reply;
    if (c == '.' && i + 2 < reply.size() && reply[i + 1] == ' ') {
      EXPECT_TRUE(std::isupper(static_cast<unsigned char>(reply[i + 2]))) << reply.substr(i, 20);
    }
  }
  EXPECT_EQ(reply, ExpectedReply(12345, 200, 128256));
  EXPECT_NE(reply, ExpectedReply(12346, 200, 128256));
  // Streaming pieces concatenate to the whole reply.
  Detokenizer d;
  std::string pieces;
  for (uint32_t i = 0; i < 200; ++i) pieces += d.Next(SampleToken(12345, i, 128256));
  EXPECT_EQ(pieces, reply);
}

TEST(DemoText, SampleTokensCoverTheVocabulary) {
  std::vector<int> hist(16, 0);
  for (uint32_t i = 0; i < 16000; ++i) {
    int32_t t = SampleToken(99, i, 16);
    ASSERT_GE(t, 0);
    ASSERT_LT(t, 16);
    ++hist[t];
  }
  for (int h : hist) EXPECT_GT(h, 800);  // ~1000 each
}

TEST(DemoModel, PresetsAndValidation) {
  auto m = ModelPreset("1b");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->layers, 16);
  EXPECT_EQ(m->cache_kernel_threads(), 512);  // min(8 * 64, 512)
  EXPECT_NEAR(m->parameters() / 1e9, 1.24, 0.05);
  EXPECT_TRUE(ValidateModel(*m).ok());
  auto small = ModelPreset("small");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->cache_kernel_threads(), 256);  // 4 * 64
  EXPECT_FALSE(ModelPreset("70b").ok());
  EXPECT_NE(ModelPreset("70b").status().message().find("small, 1b, 3b, 8b"), std::string::npos);
  ModelShape bad = *m;
  bad.kv_heads = 5;
  EXPECT_NE(ValidateModel(bad).message().find("kv_heads"), std::string::npos);
  bad = *m;
  bad.head_dim = 48;
  EXPECT_NE(ValidateModel(bad).message().find("head_dim"), std::string::npos);
  auto back = ModelFromJson(m->ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->SameShape(*m));
  EXPECT_FALSE(ModelFromJson(Json{{"layers", 1}}).ok());
}

TEST(DemoUrl, ParsesAndRejects) {
  auto u = ParseHttpUrl("http://127.0.0.1:8001");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8001);
  EXPECT_EQ(u->path, "");
  auto p = ParseHttpUrl("http://localhost/api/");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->port, 80);
  EXPECT_EQ(p->path, "/api");
  auto v6 = ParseHttpUrl("http://[::1]:9000/x");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->ToString(), "http://[::1]:9000/x");
  for (const char* bad : {"https://h", "ftp://h", "http://", "http://h:0", "http://h:70000", "http://h:x",
                          "http://h:", "http://[::1", "http://h/a?b", "http://a b"}) {
    EXPECT_FALSE(ParseHttpUrl(bad).ok()) << bad;
  }
  EXPECT_NE(ParseHttpUrl("https://h").status().message().find("https is not supported"), std::string::npos);
}

TEST(DemoSse, EventsSplitAnywhere) {
  const std::string stream = "data: {\"a\":1}\n\n: comment\n\nevent: x\ndata: two\ndata: lines\r\n\r\ndata: [DONE]\n\n";
  for (size_t step : {size_t(1), size_t(2), size_t(7), stream.size()}) {
    SseParser p;
    std::vector<std::string> got;
    for (size_t i = 0; i < stream.size(); i += step) {
      p.Feed(std::string_view(stream).substr(i, step), [&](std::string_view d) { got.emplace_back(d); });
    }
    ASSERT_EQ(got.size(), 3u) << step;
    EXPECT_EQ(got[0], "{\"a\":1}");
    EXPECT_EQ(got[1], "two\nlines");
    EXPECT_EQ(got[2], "[DONE]");
    EXPECT_EQ(p.buffered(), 0u);
  }
}

}  // namespace
}  // namespace twinscope::demo
