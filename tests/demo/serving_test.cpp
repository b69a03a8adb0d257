// The serving loop with the CPU engine, no HTTP: requests get exactly their
// deterministic tokens, aborts, drains and engine failures end requests
// cleanly, and a follower runs a primary's schedule (file replay, attached
// requests, late requests, a schedule that does not fit).
#include <gtest/gtest.h>

#include <fstream>

#include "demo_test_util.h"

namespace twinscope::demo {
namespace {

using namespace testing;  // NOLINT
using Json = nlohmann::json;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "demo_" + name + "_" + std::to_string(getpid()) + ".jsonl";
}

std::vector<Json> ReadLines(const std::string& path) {
  std::vector<Json> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty()) out.push_back(Json::parse(line));
  }
  return out;
}

SubmitRequest Sub(const std::string& id, const std::string& text, int max_tokens, uint64_t seed = 0) {
  SubmitRequest r;
  r.id = id;
  r.prompt = TokenizeChat({{"user", text}}, 32000);
  r.max_tokens = max_tokens;
  r.sample_seed = RequestSampleSeed(seed, r.prompt);
  return r;
}

std::string TextOf(const Sequence& s) {
  Detokenizer d;
  std::string out;
  for (int32_t t : s.Read(0).tokens) out += d.Next(t);
  return out;
}

bool Done(const std::shared_ptr<Sequence>& s) { return s->Read(SIZE_MAX).done; }

TEST(DemoServing, RequestsGetTheirTokensAndTheTraceNamesTheirSteps) {
  ServingOptions so;
  so.trace_requests = TempPath("trace");
  so.schedule_out = TempPath("schedule");
  CpuEngine engine(TinyEngine());
  StepRecorder rec;
  rec.Attach(engine);
  std::vector<std::shared_ptr<Sequence>> seqs;
  {
    ServingCore core(so, engine);
    ASSERT_TRUE(core.Start().ok());
    for (int i = 0; i < 5; ++i) {
      auto r = core.Submit(Sub("r" + std::to_string(i), "hello " + std::to_string(i), 10 + i, i));
      ASSERT_TRUE(r.seq) << r.error;
      seqs.push_back(r.seq);
    }
    ASSERT_TRUE(WaitUntil([&] { return std::all_of(seqs.begin(), seqs.end(), Done); }));
    EXPECT_EQ(core.Submit(Sub("r0", "again", 3)).status, 200);  // finished ids may come again
    auto dup = core.Submit(Sub("dup", "x", 50));
    ASSERT_TRUE(dup.seq);
    auto dup2 = core.Submit(Sub("dup", "x", 50));
    EXPECT_EQ(dup2.status, 409);
    auto huge = core.Submit(Sub("big", "x", 100000));
    EXPECT_EQ(huge.status, 400);
    EXPECT_NE(huge.error.find("maximum context length"), std::string::npos);
    Json h = core.Health();
    EXPECT_EQ(h["status"], "ok");
    EXPECT_EQ(h["role"], "primary");
    core.Drain();
    core.Wait();
    EXPECT_EQ(core.exit_code(), 0);
    EXPECT_EQ(core.Submit(Sub("late", "x", 3)).status, 503);
  }
  for (int i = 0; i < 5; ++i) {
    const auto v = seqs[i]->Read(0);
    EXPECT_EQ(v.finish_reason, "length");
    EXPECT_EQ(static_cast<int>(v.tokens.size()), 10 + i);
    EXPECT_EQ(TextOf(*seqs[i]), ExpectedFor("hello " + std::to_string(i), i, 10 + i, 32000));
  }
  // The trace: one line per request with the steps it ran in; each step's name lists it.
  auto trace = ReadLines(so.trace_requests);
  auto sched = ReadLines(so.schedule_out);
  ASSERT_GE(sched.size(), 3u);
  EXPECT_EQ(sched.front()["type"], "header");
  EXPECT_EQ(sched.back()["type"], "end");
  EXPECT_EQ(sched.back()["reason"], "shutdown");
  std::map<uint64_t, std::string> names;
  for (const auto& l : sched) {
    if (l["type"] == "step") names[l["step"].get<uint64_t>()] = l["name"];
  }
  int checked = 0;
  for (const auto& t : trace) {
    if (t["id"] != "r3") continue;
    ++checked;
    EXPECT_EQ(t["status"], 200);
    EXPECT_EQ(t["completion_tokens"], 13);
    ASSERT_EQ(t["steps"].size(), 13u);  // one prefill + 12 decode steps
    EXPECT_EQ(t["prefill_step"], t["steps"][0]);
    for (const auto& st : t["steps"]) {
      EXPECT_NE(names[st.get<uint64_t>()].find("r3:"), std::string::npos) << names[st.get<uint64_t>()];
    }
    EXPECT_GE(t["first_token_us"].get<int64_t>(), t["queued_us"].get<int64_t>());
  }
  EXPECT_EQ(checked, 1);
  bool dup_logged = false;
  for (const auto& t : trace) dup_logged = dup_logged || t["id"] == "dup";
  EXPECT_TRUE(dup_logged);
  std::remove(so.trace_requests.c_str());
  std::remove(so.schedule_out.c_str());
}

TEST(DemoServing, ACancelledRequestIsAbortedBeforeTheNextStep) {
  CpuEngine engine(TinyEngine(std::chrono::microseconds(2000)));
  ServingCore core({}, engine);
  ASSERT_TRUE(core.Start().ok());
  auto a = core.Submit(Sub("a", "x", 1000)).seq;
  auto b = core.Submit(Sub("b", "y", 30)).seq;
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(WaitUntil([&] { return a->generated() >= 3; }));
  core.Cancel(a);
  ASSERT_TRUE(WaitUntil([&] { return Done(a) && Done(b); }));
  EXPECT_EQ(a->Read(0).finish_reason, "abort");
  EXPECT_LT(a->generated(), 1000u);
  EXPECT_EQ(b->Read(0).finish_reason, "length");
  auto slice = core.schedule().Read(0, 100000);
  bool listed = false;
  for (const auto& line : slice.steps) {
    auto p = ParseScheduleLine(line);
    ASSERT_TRUE(p.ok());
    if (!p->step.aborted.empty()) {
      EXPECT_EQ(p->step.aborted, std::vector<std::string>{"a"});
      listed = true;
    }
  }
  EXPECT_TRUE(listed);
  Json h = core.Health();
  EXPECT_EQ(h["requests"]["aborted"], 1);
  EXPECT_EQ(h["kv_blocks"]["free"], h["kv_blocks"]["total"]);
}

TEST(DemoServing, AnEngineFailureFailsEveryRequestAndStops) {
  CpuEngine engine(TinyEngine());
  engine.fail_at_step = 2;
  ServingCore core({}, engine);
  ASSERT_TRUE(core.Start().ok());
  auto a = core.Submit(Sub("a", "x", 20)).seq;
  ASSERT_TRUE(a);
  core.Wait();
  EXPECT_TRUE(core.stopped());
  EXPECT_EQ(core.exit_code(), 1);
  auto v = a->Read(0);
  EXPECT_TRUE(v.done);
  EXPECT_EQ(v.error_status, 500);
  EXPECT_NE(v.error.find("failing on purpose"), std::string::npos);
  EXPECT_EQ(core.Health()["status"], "failed");
  EXPECT_FALSE(core.healthy());
  auto end = core.schedule().Read(0, 100);
  ASSERT_TRUE(end.ended);
  EXPECT_NE(end.end_line.find("engine error"), std::string::npos);
  EXPECT_EQ(core.Submit(Sub("b", "y", 2)).status, 503);
}

// Runs a primary over `n` requests (seeded arrivals) and returns its schedule file and steps.
std::vector<EngineStep> RunPrimary(const std::string& schedule, int n, int max_tokens) {
  ServingOptions so;
  so.schedule_out = schedule;
  CpuEngine engine(TinyEngine(std::chrono::microseconds(300)));
  StepRecorder rec;
  rec.Attach(engine);
  ServingCore core(so, engine);
  EXPECT_TRUE(core.Start().ok());
  std::vector<std::shared_ptr<Sequence>> seqs;
  for (int i = 0; i < n; ++i) {
    seqs.push_back(core.Submit(Sub("q" + std::to_string(i), "text " + std::to_string(i), max_tokens + i % 3, i)).seq);
    if (i % 3 == 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // arrivals spread over steps
  }
  EXPECT_TRUE(WaitUntil([&] { return std::all_of(seqs.begin(), seqs.end(), Done); }));
  core.Drain();
  core.Wait();
  return rec.Get();
}

TEST(DemoServing, AFollowerReplaysAScheduleFileWithoutClients) {
  const std::string schedule = TempPath("primary");
  auto primary = RunPrimary(schedule, 9, 12);
  ASSERT_GT(primary.size(), 12u);

  StepFeed feed;
  ReadScheduleFile(schedule, feed);
  ServingOptions so;
  so.follow = &feed;
  so.follow_wait = std::chrono::milliseconds(0);
  so.exit_after_schedule = true;
  so.trace_requests = TempPath("follower_trace");
  CpuEngine engine(TinyEngine(std::chrono::microseconds(0)));
  StepRecorder rec;
  rec.Attach(engine);
  ServingCore core(so, engine);
  ASSERT_TRUE(core.Start().ok());
  core.Wait();  // stops by itself at the end line
  EXPECT_EQ(core.exit_code(), 0);
  auto followed = rec.Get();
  ASSERT_EQ(followed.size(), primary.size());
  for (size_t i = 0; i < primary.size(); ++i) {
    EXPECT_EQ(followed[i].name, primary[i].name);
    EXPECT_EQ(followed[i].padded, primary[i].padded);
    ASSERT_EQ(followed[i].seqs.size(), primary[i].seqs.size());
    for (size_t k = 0; k < primary[i].seqs.size(); ++k) {
      EXPECT_EQ(followed[i].seqs[k].slots, primary[i].seqs[k].slots);
      EXPECT_EQ(followed[i].seqs[k].sample_seed, primary[i].seqs[k].sample_seed);
      EXPECT_EQ(followed[i].seqs[k].sample_index, primary[i].seqs[k].sample_index);
    }
  }
  Json h = core.Health();
  EXPECT_EQ(h["follow"]["synthesized"], 9);
  EXPECT_EQ(h["follow"]["ended"], true);
  auto trace = ReadLines(so.trace_requests);
  ASSERT_EQ(trace.size(), 9u);
  EXPECT_EQ(trace[0]["synthesized"], true);
  std::remove(schedule.c_str());
  std::remove(so.trace_requests.c_str());
}

// A follower fed by hand, as the live fetcher feeds it.
struct FedFollower {
  explicit FedFollower(std::chrono::milliseconds wait = std::chrono::milliseconds(2000)) : engine(TinyEngine()) {
    so.follow = &feed;
    so.follow_wait = wait;
    rec.Attach(engine);
    core = std::make_unique<ServingCore>(so, engine);
    EXPECT_TRUE(core->Start().ok());
  }
  void PushHeader(const ModelShape& m) {
    ScheduleHeader h;
    h.model = m;
    h.block_size = 16;
    h.max_batch = 16;
    feed.Push(*ParseScheduleLine(FormatHeader(h)));
  }
  void PushStep(uint64_t index, StepKind kind, std::vector<StepEntry> batch, int padded,
                std::vector<std::string> finished = {}) {
    ScheduledStep s;
    s.index = index;
    s.kind = kind;
    s.batch = std::move(batch);
    s.padded = padded;
    s.finished = std::move(finished);
    s.name = StepName(kind, index, s.batch);
    feed.Push(*ParseScheduleLine(FormatStep(s)));
  }
  ServingOptions so;
  StepFeed feed;
  CpuEngine engine;
  StepRecorder rec;
  std::unique_ptr<ServingCore> core;
};

TEST(DemoServing, AFollowerAttachesRequestsByIdAndSynthesizesMissingOnes) {
  FedFollower f(std::chrono::milliseconds(150));
  auto local = Sub("x1", "local one", 3, 5);
  auto mine = f.core->Submit(local);
  ASSERT_TRUE(mine.seq);
  EXPECT_EQ(f.core->Submit(Sub("x1", "local one", 3, 5)).status, 409);
  SubmitRequest generated = Sub("", "no id", 3);
  generated.id = "req-1";
  generated.id_generated = true;
  EXPECT_EQ(f.core->Submit(generated).status, 400);

  f.PushHeader(TinyModel());
  // Step 0 admits x1 (here) and x2 (never sent here: runs synthesized after follow_wait).
  const int p1 = static_cast<int>(local.prompt.size());
  f.PushStep(0, StepKind::kPrefill, {{"x1", p1, 3, local.sample_seed}, {"x2", 4, 2, 77}}, p1 + 4);
  f.PushStep(1, StepKind::kDecode, {{"x1", 1}, {"x2", 1}}, 2, {"x2"});
  f.PushStep(2, StepKind::kDecode, {{"x1", 1}}, 1, {"x1"});
  ASSERT_TRUE(WaitUntil([&] { return Done(mine.seq); }));
  EXPECT_EQ(TextOf(*mine.seq), ExpectedFor("local one", 5, 3, 32000));
  // x2 arrives late: it reads what its synthesized sequence produced.
  auto late = f.core->Submit(Sub("x2", "whatever", 2));
  ASSERT_TRUE(late.seq);
  EXPECT_TRUE(Done(late.seq));
  EXPECT_EQ(late.seq->Read(0).tokens.size(), 2u);
  // A request the schedule never reaches fails when the schedule ends.
  auto never = f.core->Submit(Sub("x9", "never", 2));
  ASSERT_TRUE(never.seq);
  f.feed.Push(*ParseScheduleLine(FormatEnd({3, "shutdown"})));
  f.feed.Close(Status::Ok());
  ASSERT_TRUE(WaitUntil([&] { return Done(never.seq); }));
  EXPECT_EQ(never.seq->Read(0).error_status, 503);
  Json h = f.core->Health();
  EXPECT_EQ(h["follow"]["synthesized"], 1);
  EXPECT_EQ(h["follow"]["attached"], 1);
  EXPECT_EQ(h["follow"]["mismatched"], 1);  // the late x2 brought another prompt
  EXPECT_EQ(h["follow"]["ended"], true);
  EXPECT_EQ(f.core->Submit(Sub("x10", "after", 2)).status, 503);
  EXPECT_EQ(f.rec.Get().size(), 3u);
  f.core->StopNow();
  f.core->Wait();
  EXPECT_EQ(f.core->exit_code(), 0);
}

TEST(DemoServing, AFollowerStopsOnAScheduleItCannotRun) {
  {
    FedFollower f;
    auto other = *ModelPreset("1b");
    f.PushHeader(other);
    ASSERT_TRUE(WaitUntil([&] { return f.core->Health()["follow"]["ended"] == true; }));
    EXPECT_NE(f.core->Health()["follow"]["error"].get<std::string>().find("start it with the primary's --model"),
              std::string::npos);
    EXPECT_EQ(f.core->exit_code(), 1);
  }
  {
    FedFollower f;
    f.PushHeader(TinyModel());
    f.PushStep(1, StepKind::kDecode, {{"a", 1}}, 1);  // step 0 is missing
    ASSERT_TRUE(WaitUntil([&] { return f.core->Health()["follow"]["ended"] == true; }));
    EXPECT_NE(f.core->Health()["follow"]["error"].get<std::string>().find("step 1 came where step 0 was due"),
              std::string::npos);
  }
  {
    FedFollower f(std::chrono::milliseconds(20));
    f.PushHeader(TinyModel());
    f.PushStep(0, StepKind::kPrefill, {{"a", 4, 3, 1}}, 4);
    f.feed.Close(Status::Error("the primary went away"));
    ASSERT_TRUE(WaitUntil([&] { return f.core->Health()["follow"]["ended"] == true; }));
    EXPECT_EQ(f.core->Health()["follow"]["error"], "the primary went away");
    EXPECT_EQ(f.core->exit_code(), 1);
  }
}

}  // namespace
}  // namespace twinscope::demo
