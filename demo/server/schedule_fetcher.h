// A live follower's link to its primary (--follow http://HOST:PORT): a thread
// that long-polls the primary's GET /v1/schedule and pushes every line into
// the follower's StepFeed, from step 0 on, until the end line. The primary
// may start after the follower: connection errors are retried until
// `contact_timeout` passes without an answer (then the feed closes with that
// error, and so does a primary that answers with an error or a bad line).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "net/url.h"
#include "server/schedule.h"

namespace twinscope::demo {

struct FetcherOptions {
  std::chrono::milliseconds contact_timeout{300000};  // longest time without an answer from the primary
  std::chrono::milliseconds poll_wait{1000};          // the long-poll's wait_ms
  std::chrono::milliseconds retry{200};               // pause after a failed connection
};

class ScheduleFetcher {
 public:
  ScheduleFetcher(HttpUrl primary, StepFeed& feed, FetcherOptions options = {});
  ~ScheduleFetcher();  // Stop()
  void Start();
  void Stop();  // from any thread; the feed is left as it is

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace twinscope::demo
