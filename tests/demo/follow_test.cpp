// Lockstep over HTTP: a follower long-polls a live primary's GET /v1/schedule
// (ScheduleFetcher) while the same requests reach both servers, as the
// mirror sends them. The follower runs the primary's steps exactly and stops
// at the schedule's end; an unreachable primary ends following with a clear
// error.
#include <gtest/gtest.h>

#include "client/chat_client.h"
#include "demo_test_util.h"
#include "server/schedule_fetcher.h"

namespace twinscope::demo {
namespace {

using namespace testing;  // NOLINT

TEST(DemoFollow, ALiveFollowerRunsThePrimarysStepsExactly) {
  FakeServer primary({}, TinyEngine(std::chrono::microseconds(1500)));
  StepFeed feed;
  ServingOptions so;
  so.follow = &feed;
  so.exit_after_schedule = true;
  FakeServer follower(so, TinyEngine(std::chrono::microseconds(200)));
  auto url = ParseHttpUrl(primary.url());
  ASSERT_TRUE(url.ok());
  FetcherOptions fo;
  fo.poll_wait = std::chrono::milliseconds(200);
  ScheduleFetcher fetcher(*url, feed, fo);
  fetcher.Start();

  // The mirror's job: every request to both, with one id.
  ChatLoadOptions o;
  o.requests = 6;
  o.max_tokens = 25;
  o.seed = 3;
  o.id_prefix = "m-";
  ChatLoadReport to_primary, to_follower;
  std::thread a([&] {
    ChatLoadOptions p = o;
    p.url = primary.url();
    to_primary = RunChatLoad(p);
  });
  std::thread b([&] {
    ChatLoadOptions f = o;
    f.url = follower.url();
    to_follower = RunChatLoad(f);
  });
  a.join();
  b.join();
  ASSERT_EQ(to_primary.ok, 6);
  ASSERT_EQ(to_follower.ok, 6) << to_follower.results[0].error;
  for (int i = 0; i < 6; ++i) EXPECT_EQ(to_follower.results[i].content, to_primary.results[i].content);

  primary.Stop();  // drains, ends the schedule; the follower sees the end line and stops
  follower.core.Wait();
  EXPECT_EQ(follower.core.exit_code(), 0);
  auto p = primary.recorder.Get(), f = follower.recorder.Get();
  ASSERT_EQ(f.size(), p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    ASSERT_EQ(f[i].name, p[i].name);
    EXPECT_EQ(f[i].padded, p[i].padded);
    ASSERT_EQ(f[i].seqs.size(), p[i].seqs.size());
    for (size_t k = 0; k < p[i].seqs.size(); ++k) {
      EXPECT_EQ(f[i].seqs[k].input_ids, p[i].seqs[k].input_ids);
      EXPECT_EQ(f[i].seqs[k].slots, p[i].seqs[k].slots);
      EXPECT_EQ(f[i].seqs[k].sample_index, p[i].seqs[k].sample_index);
    }
  }
  auto h = follower.core.Health();
  EXPECT_EQ(h["follow"]["synthesized"], 0);
  EXPECT_EQ(h["follow"]["mismatched"], 0);
  fetcher.Stop();
}

TEST(DemoFollow, AnUnreachablePrimaryEndsFollowingWithAClearError) {
  asio::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const uint16_t port = a.local_endpoint().port();
  a.close();
  StepFeed feed;
  FetcherOptions fo;
  fo.contact_timeout = std::chrono::milliseconds(300);
  fo.retry = std::chrono::milliseconds(20);
  ScheduleFetcher fetcher(*ParseHttpUrl("http://127.0.0.1:" + std::to_string(port)), feed, fo);
  fetcher.Start();
  ASSERT_TRUE(WaitUntil([&] { return feed.drained(); }));
  EXPECT_NE(
      feed.close_status().message().find("no answer from http://127.0.0.1:" + std::to_string(port) + "/v1/schedule"),
      std::string::npos)
      << feed.close_status().message();
  fetcher.Stop();
}

TEST(DemoFollow, APrimaryThatDroppedOldStepsSaysSo) {
  ServingOptions so;
  so.schedule_keep = 2;
  FakeServer primary(so);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(Post(primary.port(), ChatBody("x", 4, false)).status, 200);
  ASSERT_GT(primary.core.schedule().steps(), 2u);
  StepFeed feed;
  ScheduleFetcher fetcher(*ParseHttpUrl(primary.url()), feed);
  fetcher.Start();
  ASSERT_TRUE(WaitUntil([&] { return feed.drained(); }));
  EXPECT_NE(feed.close_status().message().find("answered 410: step 0 is no longer held here"), std::string::npos)
      << feed.close_status().message();
  fetcher.Stop();
}

}  // namespace
}  // namespace twinscope::demo
