// The mirror's request log as a replay needs it: a request line (body, headers, credentials redacted)
// written before the request is forwarded, an end line with streaming and cancellation, mode 0600, the
// bound on body bytes, fsyncs in batches.
#include "mirror/request_log.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "mirror/mirror.h"
#include "mirror/request_trace.h"
#include "mirror_harness.h"
#include "upstream_server.h"

namespace twinscope::mirror {
namespace {

using testing::ChatBody;
using testing::StartMirror;
using testing::TempLogPath;
using testing::TestClient;
using testing::TestUpstream;
using testing::UpstreamBehavior;
using Json = nlohmann::json;
using namespace std::chrono_literals;

std::vector<Json> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<Json> v;
  for (std::string l; std::getline(in, l);) v.push_back(Json::parse(l));
  return v;
}

std::string Header(const Json& line, const std::string& name) {
  for (const auto& h : line["headers"])
    if (h[0].get<std::string>() == name) return h[1];
  return "<absent>";
}

TEST(RequestLog, RequestLineHoldsBodyAndHeadersWithCredentialsRedactedAndTheFileIsPrivate) {
  TestUpstream primary;
  const std::string path = TempLogPath("reqlog_body");
  std::remove(path.c_str());
  {
    // An earlier file readable by all is made private too.
    std::ofstream(path) << "";
    chmod(path.c_str(), 0644);
  }
  auto m = StartMirror(primary.url(), "", [&](MirrorOptions& o) { o.log_path = path; });
  TestClient c(m->port());
  const std::string body = ChatBody(7);
  ASSERT_EQ(c.Request(http::verb::post, "/v1/chat/completions?x=1", body,
                      {{"X-Request-Id", "rq-1"},
                       {"Authorization", "Bearer sk-secret"},
                       {"Cookie", "session=secret"},
                       {"Content-Type", "application/json"},
                       {"X-Custom", "kept"}})
                .status,
            200);
  const std::string binary("\xff\x00\x01\xfe", 4);
  ASSERT_EQ(c.Request(http::verb::put, "/bin", binary, {{"X-Request-Id", "rq-2"}}).status, 200);
  m->Shutdown();
  m->Wait();
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const auto lines = Lines(path);
  ASSERT_EQ(lines.size(), 4u);
  const Json& q = lines[0];
  EXPECT_EQ(q["type"], "request");
  EXPECT_EQ(q["id"], "rq-1");
  EXPECT_EQ(q["method"], "POST");
  EXPECT_EQ(q["path"], "/v1/chat/completions?x=1");
  EXPECT_EQ(q["body"], body);
  EXPECT_EQ(q["replayable"], true);
  EXPECT_EQ(Header(q, "Authorization"), "[redacted]");
  EXPECT_EQ(Header(q, "Cookie"), "[redacted]");
  EXPECT_EQ(Header(q, "X-Custom"), "kept");
  EXPECT_EQ(Header(q, "Content-Type"), "application/json");
  EXPECT_EQ(Header(q, "X-Request-Id"), "<absent>") << "the id is the line's own field";
  EXPECT_EQ(std::string(Json(lines).dump()).find("secret"), std::string::npos) << "no credential anywhere";
  // The binary body is kept exactly, as base64.
  const Json* b = nullptr;
  for (const auto& l : lines)
    if (l["type"] == "request" && l["id"] == "rq-2") b = &l;
  ASSERT_NE(b, nullptr);
  std::string decoded;
  ASSERT_TRUE(Base64Decode((*b)["body_base64"].get<std::string>(), &decoded));
  EXPECT_EQ(decoded, binary);
  std::remove(path.c_str());
}

TEST(RequestLog, ARequestThePrimaryNeverAnswersIsAlreadyInTheLog) {
  UpstreamBehavior hang;
  hang.hang = true;
  TestUpstream primary(hang);
  const std::string path = TempLogPath("reqlog_hang");
  std::remove(path.c_str());
  auto m = StartMirror(primary.url(), "", [&](MirrorOptions& o) { o.log_path = path; });
  std::thread client([port = m->port()] {
    TestClient c(port);
    c.Request(http::verb::post, "/v1/x", ChatBody(3), {{"X-Request-Id", "never-answered"}}, 3s);
  });
  ASSERT_TRUE(TestUpstream::WaitFor([&] { return primary.requests() == 1; }));
  // Before any reply (and with the mirror still running): on disk, synced by the writer.
  bool found = false;
  TestUpstream::WaitFor(
      [&] {
        for (const auto& l : Lines(path))
          if (l["type"] == "request" && l["id"] == "never-answered" && l["body"] == ChatBody(3)) found = true;
        return found;
      },
      2s);
  EXPECT_TRUE(found);
  EXPECT_TRUE(TestUpstream::WaitFor([&] { return m->counters().log_syncs >= 1; }, 2s)) << "fsynced within sync_every";
  m->ShutdownNow();
  m->Wait();
  client.join();
  std::remove(path.c_str());
}

TEST(RequestLog, StreamedAndCancelledRequestsGetTheirEndLine) {
  TestUpstream primary;
  const std::string path = TempLogPath("reqlog_cancel");
  std::remove(path.c_str());
  auto m = StartMirror(primary.url(), "", [&](MirrorOptions& o) { o.log_path = path; });
  {
    TestClient c(m->port());
    ASSERT_EQ(c.Request(http::verb::get, "/stream?n=2&gap_ms=1", "", {{"X-Request-Id", "whole"}}).status, 200);
  }
  {
    TestClient c(m->port());
    ASSERT_TRUE(c.Connect());
    http::request<http::string_body> req{http::verb::post, "/stream?n=200&gap_ms=20", 11};
    req.set(http::field::host, "x");
    req.set("X-Request-Id", "cut");
    req.prepare_payload();
    http::write(c.stream(), req);
    http::response_parser<http::buffer_body> p;
    http::read_header(c.stream(), c.buffer(), p);
    char piece[256];
    p.get().body().data = piece;
    p.get().body().size = sizeof piece;
    beast::error_code ec;
    http::read_some(c.stream(), c.buffer(), p, ec);
    c.Close();
  }
  ASSERT_TRUE(TestUpstream::WaitFor([&] { return m->counters().client_disconnects == 1; }, 3s));
  m->Shutdown();
  m->Wait();
  Json whole, cut;
  for (const auto& l : Lines(path)) {
    if (l["type"] != "end") continue;
    (l["id"] == "whole" ? whole : cut) = l;
  }
  EXPECT_EQ(whole["streamed"], true);
  EXPECT_FALSE(whole.contains("cancelled_at"));
  EXPECT_EQ(cut["client_disconnected"], true);
  ASSERT_TRUE(cut.contains("cancelled_at")) << cut.dump();
  EXPECT_GT(cut["cancelled_at"]["bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(cut["cancelled_at"]["bytes"], cut["response_bytes"]);
  std::remove(path.c_str());
}

TEST(RequestLog, PastTheBodyBoundRequestsAreLoggedWithoutBodyAndNamedNotReplayable) {
  TestUpstream primary;
  const std::string path = TempLogPath("reqlog_bound");
  std::remove(path.c_str());
  const std::string body(600, 'a');
  auto m = StartMirror(primary.url(), "", [&](MirrorOptions& o) {
    o.log_path = path;
    o.log_max_body_bytes = 1000;  // room for one body of 600
  });
  TestClient c(m->port());
  ASSERT_EQ(c.Request(http::verb::post, "/a", body, {{"X-Request-Id", "fits"}}).status, 200);
  ASSERT_EQ(c.Request(http::verb::post, "/a", body, {{"X-Request-Id", "over"}}).status, 200)
      << "the bound never touches the traffic";
  EXPECT_EQ(m->counters().log_not_replayable, 1u);
  EXPECT_EQ(m->not_replayable_ids(), std::vector<std::string>{"over"});
  m->Shutdown();
  m->Wait();
  for (const auto& l : Lines(path)) {
    if (l["type"] != "request") continue;
    if (l["id"] == "fits") {
      EXPECT_EQ(l["body"], body);
    } else {
      EXPECT_EQ(l["replayable"], false);
      EXPECT_FALSE(l.contains("body"));
      EXPECT_NE(l["not_replayable"].get<std::string>().find("bound on body bytes (1000)"), std::string::npos);
    }
  }
  std::remove(path.c_str());
}

TEST(RequestLog, TheWriterSyncsInBatchesNotPerLine) {
  const std::string path = TempLogPath("reqlog_sync");
  std::remove(path.c_str());
  RequestLog log;
  RequestLogOptions o;
  o.sync_every = std::chrono::milliseconds(100);
  ASSERT_TRUE(log.Open(path, o).ok());
  for (int i = 0; i < 2000; ++i) log.WriteRequest("{\"i\":" + std::to_string(i) + "}", std::to_string(i), true);
  log.Close();
  EXPECT_EQ(log.written(), 2000u);
  EXPECT_GE(log.syncs(), 1u) << "the last batch is synced at Close";
  EXPECT_LT(log.syncs(), 50u) << "not one fsync per line";
  EXPECT_EQ(Lines(path).size(), 2000u);
  std::remove(path.c_str());
}

TEST(RequestLog, AWriteErrorNamesTheRequestsNotReplayable) {
  RequestLog log;
  ASSERT_TRUE(log.Open("/dev/full", RequestLogOptions{}).ok());
  log.WriteRequest("{\"id\":\"lost\"}", "lost", true);
  log.Close();
  EXPECT_GE(log.write_errors(), 1u);
  EXPECT_EQ(log.not_replayable_ids(), std::vector<std::string>{"lost"});
}

}  // namespace
}  // namespace twinscope::mirror
