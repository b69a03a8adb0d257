// Per-request views of a joined serving run (src/join/requests.h) on synthetic
// twin traces whose step ranges are named as the demo server names them, with
// a request trace and a schedule written by the test: each request's steps,
// kernel time, share, target launches and matches, bounds, and bad input.
#include "join/requests.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "join/join_model.h"
#include "join/join_views.h"
#include "join_fixture.h"
#include "join_test_util.h"
#include "served_scene.h"
#include "views/join_doc.h"
#include "views/join_text.h"

namespace twinscope {
namespace {

using testing::Dir;

using nlohmann::json;
using testing::FakeLaunch;
using testing::JoinServed;
using testing::kOddId;
using testing::RequestTrace;
using testing::Schedule;
using testing::Served;

TEST(StepRange, OnlyTheLeadingKindAndIndexAreRead) {
  uint64_t i = 0;
  std::string k;
  EXPECT_TRUE(join::ParseStepRange("decode step 17 [r3:1,r5:1]#0", &i, &k));
  EXPECT_EQ(i, 17u);
  EXPECT_EQ(k, "decode");
  EXPECT_TRUE(join::ParseStepRange("prefill step 0 [r0:5,a", &i, &k));  // cut at a '/' inside an id
  EXPECT_EQ(i, 0u);
  EXPECT_EQ(k, "prefill");
  EXPECT_TRUE(join::ParseStepRange("decode step 12#1", &i, &k));
  EXPECT_EQ(i, 12u);
  EXPECT_TRUE(join::ParseStepRange("mixed step 7 [a:1,b:96]#0", &i, &k));
  EXPECT_EQ(i, 7u);
  EXPECT_EQ(k, "mixed");
  for (const char* no : {"warmup decode batch 8#0", "capture decode batch 8#0", "warmup step 0 [w:1]#0",
                         "mixed steps 2", "decode steps 1 [x:1]", "decode step x [r:1]", "decode step 1x [r:1]",
                         "decode step ", "step#3", "decode step 99999999999999999999999 [r:1]", ""})
    EXPECT_FALSE(join::ParseStepRange(no, &i, &k)) << no;
}

TEST(Requests, EachRequestGetsItsStepsKernelTimeShareAndMatches) {
  join::JoinedModel m = JoinServed(Dir(), true);
  const join::RequestTable& t = m.requests;
  ASSERT_TRUE(t.present);
  EXPECT_EQ(t.lines, 5u);
  EXPECT_EQ(t.bad_lines, 1u);
  EXPECT_NE(t.first_bad.find("line 3: not a JSON object"), std::string::npos) << t.first_bad;
  ASSERT_EQ(t.requests.size(), 3u);
  EXPECT_EQ(t.schedule_steps, 5u);
  EXPECT_EQ(t.primary_steps_without_request, 1u);  // step 5
  EXPECT_EQ(t.steps_without_kernels, 0u);
  ASSERT_EQ(t.steps.size(), 6u);

  // A step: two target launches of 10 us (+ two others of 500 ns), batch and padding from the schedule.
  const join::ServedStep& s1 = t.steps[1];
  // The step's range whole: the '/' in the odd request id does not cut it (TopLevelRange).
  EXPECT_EQ(t.steps[0].range, std::string("prefill step 0 [r0:5,") + testing::kOddId + ":3]#0");
  EXPECT_EQ(s1.range, std::string("decode step 1 [r0:1,") + testing::kOddId + ":1]#0");
  EXPECT_EQ(s1.index, 1u);
  EXPECT_EQ(s1.kind, "decode");
  EXPECT_EQ(s1.batch, 2);
  EXPECT_EQ(s1.padded, 2);
  EXPECT_EQ(s1.kernels, 4u);
  EXPECT_EQ(s1.kernel_ns, 21'000u);
  EXPECT_EQ(s1.targets, 2u);
  EXPECT_EQ(s1.target_ns, 20'000u);
  EXPECT_EQ(s1.target_launches.size(), 2u);
  EXPECT_EQ(s1.shadow_exact, 2u);
  EXPECT_EQ(t.steps[4].shadow_exact, 1u);  // its second launch is not in the shadow
  EXPECT_EQ(t.steps[5].batch, -1);         // no schedule line, no request: unknown

  const join::ServedRequest& r0 = t.requests[0];
  EXPECT_EQ(r0.id, "r0");
  EXPECT_EQ(r0.steps, (std::vector<uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(r0.prefill_steps, 1u);
  EXPECT_EQ(r0.decode_steps, 3u);
  EXPECT_EQ(r0.kernels, 16u);
  EXPECT_EQ(r0.kernel_ns, 21'000u * 3 + 61'000u);  // step 2 holds the 50 us launch
  // Its share: 5 of the prefill's 8 tokens, half of each decode step.
  EXPECT_EQ(r0.kernel_share_ns, 21'000u * 5 / 8 + 21'000u / 2 * 2 + 61'000u / 2);
  EXPECT_EQ(r0.target_launches, 8u);
  EXPECT_EQ(r0.shadow_exact, 8u);
  EXPECT_EQ(r0.first_token_us, 900);
  EXPECT_GT(r0.last_end_ns, r0.first_start_ns);

  const join::ServedRequest& odd = t.requests[1];
  EXPECT_EQ(odd.id, kOddId);
  EXPECT_EQ(odd.decode_steps, 4u);
  EXPECT_EQ(odd.target_launches, 10u);
  EXPECT_EQ(odd.shadow_exact, 9u);
  EXPECT_EQ(odd.kernel_share_ns, 21'000u * 3 / 8 + 21'000u / 2 * 2 + 61'000u / 2 + 71'000u);

  EXPECT_EQ(t.requests[2].status, 400);
  EXPECT_TRUE(t.requests[2].steps.empty());
  bool warned = false;
  for (const auto& w : m.warnings) warned |= w.find("1 lines that are not requests") != std::string::npos;
  EXPECT_TRUE(warned);
}

// The server's arrival time (CLOCK_REALTIME us) goes onto the primary's CUPTI
// clock through the primary header's clock pair; without a pair CUPTI's clock
// is taken as realtime, as the join does for concurrent twins.
// A request the schedule leaves out of a step's batch gets no share of that step's kernel time, and it is said
// (it got a share of each step it named before).
TEST(Requests, ARequestOutsideTheScheduledBatchGetsNoShareAndIsSaid) {
  const std::string dir = Dir();
  testing::WriteOptions wo;
  wo.other_kernels = {"rms_norm_kernel"};
  const testing::TwinFiles files = testing::WriteTwin(dir, Served(), wo);
  join::JoinOptions o;
  o.requests.trace = RequestTrace(dir);
  o.requests.schedule = Schedule(dir);
  {
    std::ofstream f(o.requests.trace, std::ios::app);
    f << R"({"id":"stray","status":200,"prompt_tokens":2,"steps":[1,2]})"
      << "\n";
  }
  join::JoinedModel m = Join(files, o);
  const join::RequestTable& t = m.requests;
  ASSERT_EQ(t.requests.size(), 4u);
  const join::ServedRequest& stray = t.requests[3];
  ASSERT_EQ(stray.id, "stray");
  EXPECT_EQ(stray.steps.size(), 2u);
  EXPECT_EQ(stray.kernel_ns, t.steps[1].kernel_ns + t.steps[2].kernel_ns);  // the steps it ran in, whole
  EXPECT_EQ(stray.kernel_share_ns, 0u);
  // The shares of step 1's batch add up to the step (r0 and the odd id, one token each).
  EXPECT_EQ(
      t.requests[0].kernel_share_ns + t.requests[1].kernel_share_ns,
      t.steps[0].kernel_ns + t.steps[1].kernel_ns + t.steps[2].kernel_ns + t.steps[3].kernel_ns + t.steps[4].kernel_ns);
  bool said = false;
  for (const std::string& w : t.warnings) said |= w.find("2 steps that a request names leave it out") == 0;
  EXPECT_TRUE(said) << "no warning of the two steps outside the batch";
}

// An engine's mixed steps (prefill chunks and decode tokens in one step, "mixed step N [..]", a version 2
// schedule with each entry's computed-token offset): they are steps of the primary, and each request's part
// in them is its own: b's second prompt chunk is a prefill step of b, a's token in the same step a decode.
TEST(Requests, MixedStepsAreStepsAndEachRequestsPartIsItsOwn) {
  const std::string dir = Dir();
  const std::vector<std::string> names = {"prefill step 0 [a:4]", "mixed step 1 [a:1,b:3]", "mixed step 2 [a:1,b:2]",
                                          "decode step 3 [a:1,b:1]"};
  std::vector<FakeLaunch> launches;
  uint64_t at = 1'000'000;
  for (size_t s = 0; s < names.size(); ++s) {
    FakeLaunch l;
    l.path = names[s] + "#0";
    l.grid = {static_cast<uint32_t>(s + 1), 1, 1};
    l.cpu_ns = at;
    at += 100'000;
    launches.push_back(l);
  }
  const testing::TwinFiles files = testing::WriteTwin(dir, launches, testing::WriteOptions{});
  join::JoinOptions o;
  o.requests.trace = dir + "/requests-primary.jsonl";
  o.requests.schedule = dir + "/schedule-primary.jsonl";
  {
    std::ofstream f(o.requests.trace);
    f << R"({"id":"a","status":200,"prompt_tokens":4,"completion_tokens":4,"prefill_step":0,"steps":[0,1,2,3]})"
      << "\n"
      << R"({"id":"b","status":200,"prompt_tokens":5,"completion_tokens":2,"prefill_step":1,"steps":[1,2,3]})"
      << "\n";
    std::ofstream g(o.requests.schedule);
    g << R"({"type":"header","version":2,"engine":"transformers"})"
      << "\n"
      << R"({"type":"step","step":0,"kind":"prefill","batch":[{"id":"a","tokens":4,"offset":0}]})"
      << "\n"
      << R"({"type":"step","step":1,"kind":"mixed","batch":[{"id":"a","tokens":1,"offset":4},{"id":"b","tokens":3,"offset":0}]})"
      << "\n"
      << R"({"type":"step","step":2,"kind":"mixed","batch":[{"id":"a","tokens":1,"offset":5},{"id":"b","tokens":2,"offset":3}]})"
      << "\n"
      << R"({"type":"step","step":3,"kind":"decode","batch":[{"id":"a","tokens":1,"offset":6},{"id":"b","tokens":1,"offset":5}]})"
      << "\n";
  }
  join::JoinedModel m = Join(files, o);
  const join::RequestTable& t = m.requests;
  ASSERT_EQ(t.requests.size(), 2u);
  ASSERT_EQ(t.steps.size(), 4u);
  EXPECT_EQ(t.steps_without_kernels, 0u);  // the mixed steps' kernels are the primary's steps
  EXPECT_EQ(t.steps[1].kind, "mixed");
  EXPECT_EQ(t.steps[2].kind, "mixed");
  EXPECT_EQ(t.steps[1].tokens, 4);
  EXPECT_EQ(t.steps[2].tokens, 3);
  EXPECT_GT(t.steps[1].kernels, 0u);
  const join::ServedRequest& a = t.requests[0];
  const join::ServedRequest& b = t.requests[1];
  EXPECT_EQ(a.prefill_steps, 1u);
  EXPECT_EQ(a.decode_steps, 3u);
  EXPECT_EQ(b.prefill_steps, 2u);  // its prompt in two chunks: steps 1 and 2
  EXPECT_EQ(b.decode_steps, 1u);
  // Step 1's kernel time: a 1/4, b 3/4; step 2's: a 1/3, b 2/3.
  const double k1 = static_cast<double>(t.steps[1].kernel_ns), k2 = static_cast<double>(t.steps[2].kernel_ns),
               k3 = static_cast<double>(t.steps[3].kernel_ns);
  EXPECT_NEAR(static_cast<double>(b.kernel_share_ns), k1 * 3 / 4 + k2 * 2 / 3 + k3 / 2, 3.0);
  EXPECT_NEAR(static_cast<double>(a.kernel_share_ns),
              static_cast<double>(t.steps[0].kernel_ns) + k1 / 4 + k2 / 3 + k3 / 2, 3.0);
  for (const std::string& w : t.warnings) EXPECT_EQ(w.find("no step ranges"), std::string::npos) << w;
}

TEST(Requests, ArrivalIsPutOnThePrimarysClock) {
  const int64_t base_us = 1'796'113'162'000'000;
  const std::string dir = Dir();
  join::JoinedModel m = testing::JoinServedWithArrivals(dir + "/pair", base_us);
  EXPECT_EQ(m.primary_to_realtime_ns, base_us * 1000);
  const auto& rq = m.requests.requests;
  ASSERT_EQ(rq.size(), 6u);
  std::vector<std::pair<std::string, uint64_t>> got, want = {{"r0", 1'001'000},  {kOddId, 0}, {"skew", 1'100'000},
                                                             {"bad", 1'500'000}, {"lost", 0}, {"late", 2'200'000}};
  for (const auto& r : rq) got.emplace_back(r.id, r.arrival_ns);
  EXPECT_EQ(got, want);
  EXPECT_EQ(rq[0].arrival_unix_us, base_us + 1001);
  EXPECT_EQ(rq[1].arrival_unix_us, -1);

  join::JoinedModel plain = testing::JoinServedWithArrivals(dir + "/no_pair", 0);
  EXPECT_EQ(plain.primary_to_realtime_ns, 0);
  ASSERT_EQ(plain.requests.requests.size(), 6u);
  EXPECT_EQ(plain.requests.requests[0].arrival_ns, 1'001'000u);
}

// join.json's rows carry each request's arrival: the server's arrival_unix_us as
// the trace gave it, and the model's arrival on the primary's clock relative to
// its first kernel like the rows' GPU times (signed: r0 arrives 1 us before the
// first kernel at 1,002,000 ns); null where the model has none. A join without
// arrival times writes nulls, and a reader of older files finds no keys.
TEST(Requests, JsonHoldsEachRequestsArrival) {
  const int64_t base_us = 1'796'113'162'000'000;
  const std::string dir = Dir();
  join::JoinedModel m = testing::JoinServedWithArrivals(dir + "/pair", base_us);
  ASSERT_EQ(m.primary_t0_ns, 1'002'000u);
  const json rows = views::JoinJson(m, {}, {})["requests"]["rows"];
  ASSERT_EQ(rows.size(), m.requests.requests.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const join::ServedRequest& r = m.requests.requests[i];
    ASSERT_EQ(rows[i]["id"], r.id);
    ASSERT_TRUE(rows[i].contains("arrival_unix_us") && rows[i].contains("arrival_ns")) << r.id;
    EXPECT_EQ(rows[i]["arrival_unix_us"], r.arrival_unix_us < 0 ? json(nullptr) : json(r.arrival_unix_us)) << r.id;
    const int64_t rel = static_cast<int64_t>(r.arrival_ns) - static_cast<int64_t>(m.primary_t0_ns);
    EXPECT_EQ(rows[i]["arrival_ns"], r.arrival_ns ? json(rel) : json(nullptr)) << r.id;
  }
  // Hand-checked against the scene (served_scene.h, ArrivalRequestTrace).
  std::vector<std::pair<json, json>> got,
      want = {{base_us + 1001, -1'000},  {nullptr, nullptr}, {base_us + 1100, 98'000},
              {base_us + 1500, 498'000}, {nullptr, nullptr}, {base_us + 2200, 1'198'000}};
  for (const auto& r : rows) got.emplace_back(r["arrival_unix_us"], r["arrival_ns"]);
  EXPECT_EQ(got, want);

  join::JoinedModel plain = JoinServed(dir + "/none", true);
  for (const auto& r : views::JoinJson(plain, {}, {})["requests"]["rows"]) {
    EXPECT_TRUE(r.at("arrival_unix_us").is_null()) << r["id"];
    EXPECT_TRUE(r.at("arrival_ns").is_null()) << r["id"];
  }
}

TEST(Requests, WithoutAScheduleBatchesComeFromTheTrace) {
  join::JoinedModel m = JoinServed(Dir(), false);
  const join::RequestTable& t = m.requests;
  ASSERT_EQ(t.steps.size(), 6u);
  EXPECT_EQ(t.steps[0].batch, 2);
  EXPECT_EQ(t.steps[0].padded, -1);
  EXPECT_EQ(t.steps[4].batch, 1);
  // The share splits by the tokens the trace implies (prompt tokens in the prefill step): the same answer.
  EXPECT_EQ(t.requests[0].kernel_share_ns, 21'000u * 5 / 8 + 21'000u / 2 * 2 + 61'000u / 2);
}

TEST(Requests, BlockPicturesIncludeEachRequestsSlowestMatchedLaunch) {
  join::JoinedModel m = JoinServed(Dir(), true);
  std::vector<uint64_t> seqs = join::RequestDetailSeqs(m, 16);
  ASSERT_EQ(seqs.size(), 2u);  // r0: step 2's slow launch; the odd id: step 4's; the 400 has no step
  auto path_of = [&](uint64_t seq) {
    for (const auto& s : m.shadow)
      if (s.seq == seq) return s.path + "/" + std::to_string(s.ordinal);
    return std::string();
  };
  EXPECT_EQ(path_of(seqs[0]).rfind("decode step 2 ", 0), 0u) << path_of(seqs[0]);
  EXPECT_NE(path_of(seqs[0]).find("/1"), std::string::npos);
  EXPECT_EQ(path_of(seqs[1]).rfind("decode step 4 ", 0), 0u) << path_of(seqs[1]);
  // DetailSeqs puts them right after the why-slow launches.
  std::vector<uint64_t> all = join::DetailSeqs(m, 32);
  for (uint64_t s : seqs) EXPECT_NE(std::find(all.begin(), all.end(), s), all.end());
  EXPECT_EQ(join::RequestDetailSeqs(m, 1).size(), 1u);
}

TEST(Requests, JsonNamesEveryTargetLaunchByItsLaunchIdAndIsBounded) {
  join::JoinedModel m = JoinServed(Dir(), true);
  json j = views::JoinJson(m, {}, {});
  ASSERT_TRUE(j.contains("requests"));
  const json& rq = j["requests"];
  EXPECT_EQ(rq["total"], 3);
  EXPECT_EQ(rq["read"]["bad_lines"], 1);
  ASSERT_EQ(rq["rows"].size(), 3u);
  EXPECT_EQ(rq["rows"][0]["steps"], json({0, 1, 2, 3}));
  EXPECT_EQ(rq["rows"][1]["id"], kOddId);
  EXPECT_EQ(rq["rows"][2]["error"], "max_tokens must be an integer");
  ASSERT_EQ(rq["steps"].size(), 6u);
  std::map<int64_t, const json*> launch_by_id;
  for (const auto& l : j["launches"]) launch_by_id[l["id"].get<int64_t>()] = &l;
  int unmatched = 0;
  for (const auto& s : rq["steps"]) {
    ASSERT_EQ(s["target_launches"].size(), 2u);
    for (const auto& tl : s["target_launches"]) {
      int64_t id = tl[2];
      if (id < 0) {
        ++unmatched;
        continue;
      }
      ASSERT_TRUE(launch_by_id.count(id));
      const json& l = *launch_by_id[id];
      EXPECT_EQ(l["key"]["path"].get<std::string>().rfind(
                    s["kind"].get<std::string>() + " step " + s["step"].dump() + " ", 0),
                0u);
      EXPECT_EQ(l["primary"]["start_ns"], tl[0]);
      EXPECT_EQ(l["primary"]["dur_ns"], tl[1]);
    }
  }
  EXPECT_EQ(unmatched, 1);  // step 4's second launch

  join::JsonBounds b;
  b.requests.max_rows = 1;
  b.requests.max_steps = 5;
  json small = views::JoinJson(m, b, {})["requests"];
  EXPECT_EQ(small["total"], 3);
  ASSERT_EQ(small["rows"].size(), 1u);
  ASSERT_EQ(small["steps"].size(), 5u);  // r0's four first, then the lowest other
  EXPECT_EQ(small["steps"][4]["step"], 4);
}

TEST(Requests, StatsTextIsShortAndNamesTheFigures) {
  join::JoinedModel m = JoinServed(Dir(), true);
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  views::PrintJoin(f, m, 0);
  std::fclose(f);
  std::string text(buf, len);
  std::free(buf);
  EXPECT_NE(text.find("requests (requests-primary.jsonl): 3, 2 with status 200"), std::string::npos) << text;
  EXPECT_NE(text.find("target launches in its steps 18, matched in the shadow 17 exactly (94.4%)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("1 step ranges of the primary are named by no request"), std::string::npos) << text;
  EXPECT_NE(text.find("  r0 "), std::string::npos) << text;
}

TEST(Requests, MissingTraceAndStepsWithoutKernelsAreSaid) {
  const std::string dir = Dir();
  auto files = testing::WriteTwin(dir, Served());
  join::JoinOptions o;
  o.requests.trace = dir + "/no-such.jsonl";
  auto m = join::JoinTraces(files.primary, files.shadow, o);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->requests.present);
  EXPECT_TRUE(m->requests.requests.empty());
  ASSERT_FALSE(m->requests.warnings.empty());
  EXPECT_NE(m->requests.warnings[0].find("cannot be read"), std::string::npos);

  std::ofstream(dir + "/late.jsonl") << R"({"id":"late","status":200,"steps":[3,9]})"
                                     << "\n";
  o.requests.trace = dir + "/late.jsonl";
  m = join::JoinTraces(files.primary, files.shadow, o);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->requests.steps_without_kernels, 1u);
  EXPECT_EQ(m->requests.requests[0].steps_without_kernels, 1u);
  EXPECT_EQ(m->requests.requests[0].target_launches, 2u);

  // No request trace at all: no table, no "requests" in the JSON.
  m = join::JoinTraces(files.primary, files.shadow, {});
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->requests.present);
  EXPECT_FALSE(views::JoinJson(*m, {}, {}).contains("requests"));
}

// Mutated request traces and schedules (bytes flipped, cut, duplicated) never crash the join; every line
// is either a request or counted as bad.
TEST(Requests, MutatedInputsAreCountedNeverFatal) {
  const std::string dir = Dir();
  auto files = testing::WriteTwin(dir, Served());
  std::string good;
  {
    std::ifstream f(RequestTrace(dir));
    good.assign(std::istreambuf_iterator<char>(f), {});
  }
  std::string sched;
  {
    std::ifstream f(Schedule(dir));
    sched.assign(std::istreambuf_iterator<char>(f), {});
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string a = good, b = sched;
    for (std::string* s : {&a, &b}) {
      int edits = 1 + static_cast<int>(rng() % 8);
      for (int e = 0; e < edits && !s->empty(); ++e) {
        size_t at = rng() % s->size();
        switch (rng() % 4) {
          case 0:
            (*s)[at] = static_cast<char>(rng());
            break;
          case 1:
            s->erase(at, rng() % 20);
            break;
          case 2:
            s->insert(at, s->substr(rng() % s->size(), rng() % 30));
            break;
          default:
            s->insert(at, "\n");
            break;
        }
      }
    }
    std::ofstream(dir + "/m.jsonl", std::ios::trunc) << a;
    std::ofstream(dir + "/s.jsonl", std::ios::trunc) << b;
    join::JoinOptions o;
    o.requests = {dir + "/m.jsonl", dir + "/s.jsonl"};
    auto m = join::JoinTraces(files.primary, files.shadow, o);
    ASSERT_TRUE(m.ok());
    const auto& t = m->requests;
    uint64_t blank = 0;
    {
      std::ifstream f(dir + "/m.jsonl");
      for (std::string line; std::getline(f, line);) blank += line.find_first_not_of(" \t\r") == std::string::npos;
    }
    EXPECT_EQ(t.lines, t.requests.size() + t.bad_lines + blank);
    (void)views::JoinJson(*m, {}, {});
  }
}

}  // namespace
}  // namespace twinscope
