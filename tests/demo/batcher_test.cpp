// Continuous batching, the paged KV-cache allocator, the schedule format and
// lockstep: a follower given a primary's schedule lines reproduces the
// primary's engine steps exactly (random workloads against a model of the
// rules, every step also checked by the CPU engine's cache bookkeeping).
#include "server/batcher.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>
#include <set>

#include "common/sampling.h"
#include "server/cpu_engine.h"
#include "server/schedule.h"
#include "server/text.h"

namespace twinscope::demo {
namespace {

BatcherOptions Opts(int max_batch = 8, int64_t blocks = 64, int step_tokens = 256) {
  BatcherOptions o;
  o.max_batch = max_batch;
  o.max_step_tokens = step_tokens;
  o.block_size = 16;
  o.num_blocks = blocks;
  o.max_model_len = 512;
  o.graph_sizes = DefaultGraphSizes(max_batch);
  return o;
}

SeqRequest Req(const std::string& id, int prompt, int max_tokens, uint64_t seed = 1) {
  return {id, SyntheticPrompt(seed, prompt, 32000), max_tokens, seed};
}

std::vector<int32_t> Tokens(const EngineStep& es) {
  std::vector<int32_t> t;
  for (const auto& q : es.seqs) t.push_back(SampleToken(q.sample_seed, q.sample_index, 32000));
  return t;
}

// Runs one planned step like the serving loop does; returns its schedule line.
std::string RunPlanned(Batcher& b, ScheduledStep& step, EngineStep* es_out = nullptr) {
  EngineStep es = b.Build(step);
  step.finished = b.Complete(step, Tokens(es));
  if (es_out) *es_out = es;
  return FormatStep(step);
}

TEST(DemoBatcher, PrefillsThenDecodesWithPadding) {
  Batcher b(Opts());
  ASSERT_TRUE(b.Enqueue(Req("a", 20, 3)).ok());
  ASSERT_TRUE(b.Enqueue(Req("b", 5, 2)).ok());
  ASSERT_TRUE(b.Enqueue(Req("c", 7, 2)).ok());
  auto s0 = b.Plan(0);
  ASSERT_TRUE(s0);
  EXPECT_EQ(s0->kind, StepKind::kPrefill);
  EXPECT_EQ(s0->padded, 32);
  EXPECT_EQ(s0->name, "prefill step 0 [a:20,b:5,c:7]");
  EngineStep es;
  RunPlanned(b, *s0, &es);
  ASSERT_EQ(es.seqs.size(), 3u);
  EXPECT_EQ(es.seqs[0].input_ids.size(), 20u);
  EXPECT_EQ(es.seqs[0].context_len, 20);
  EXPECT_EQ(es.seqs[0].sample_index, 0);
  EXPECT_EQ(es.seqs[0].block_table.size(), 2u);  // ceil((20 + 3) / 16)
  EXPECT_EQ(es.seqs[0].slots.front(), int64_t(es.seqs[0].block_table[0]) * 16);
  EXPECT_TRUE(s0->finished.empty());

  auto s1 = b.Plan(1);
  ASSERT_TRUE(s1);
  EXPECT_EQ(s1->kind, StepKind::kDecode);
  EXPECT_EQ(s1->padded, 4);  // 3 sequences -> the graph of 4
  EXPECT_EQ(s1->name, "decode step 1 [a:1,b:1,c:1]");
  RunPlanned(b, *s1, &es);
  EXPECT_EQ(es.seqs[0].first_position, 20);
  EXPECT_EQ(es.seqs[0].context_len, 21);
  EXPECT_EQ(es.seqs[0].sample_index, 1);
  EXPECT_EQ(s1->finished, (std::vector<std::string>{"b", "c"}));  // max_tokens 2: prefill + one decode
  auto s2 = b.Plan(2);
  ASSERT_TRUE(s2);
  EXPECT_EQ(s2->padded, 1);
  RunPlanned(b, *s2);
  EXPECT_EQ(s2->finished, std::vector<std::string>{"a"});
  EXPECT_FALSE(b.Plan(3));
  EXPECT_EQ(b.free_blocks(), 64);
}

TEST(DemoBatcher, AdmitsInOrderWithinBatchTokensAndBlocks) {
  Batcher b(Opts(/*max_batch=*/2, /*blocks=*/6, /*step_tokens=*/40));
  ASSERT_TRUE(b.Enqueue(Req("a", 30, 2)).ok());  // 2 blocks
  ASSERT_TRUE(b.Enqueue(Req("b", 20, 2)).ok());  // would pass the 40-token budget: next step
  ASSERT_TRUE(b.Enqueue(Req("c", 1, 2)).ok());   // behind b (first come, first served)
  auto s0 = b.Plan(0);
  ASSERT_TRUE(s0);
  EXPECT_EQ(s0->batch.size(), 1u);
  RunPlanned(b, *s0);
  auto s1 = b.Plan(1);
  ASSERT_TRUE(s1);
  EXPECT_EQ(s1->kind, StepKind::kPrefill);
  EXPECT_EQ(s1->name, "prefill step 1 [b:20]");  // max_batch 2 leaves no room for c
  RunPlanned(b, *s1);
  EXPECT_EQ(b.waiting(), 1u);
  EXPECT_EQ(b.Plan(2)->kind, StepKind::kDecode);
  // Requests that can never run.
  EXPECT_NE(b.WhyNotFits(600, 10).find("maximum context length is 512"), std::string::npos);
  EXPECT_NE(b.WhyNotFits(41, 1).find("--max-prefill-tokens"), std::string::npos);
  EXPECT_NE(b.WhyNotFits(40, 100).find("KV-cache blocks"), std::string::npos);
  EXPECT_FALSE(b.Enqueue(Req("d", 40, 100)).ok());
  EXPECT_FALSE(b.Enqueue(Req("a", 1, 1)).ok());  // already in flight
}

TEST(DemoBatcher, AbortsReleaseBlocksAndAreListedInTheNextStep) {
  Batcher b(Opts());
  ASSERT_TRUE(b.Enqueue(Req("a", 10, 10)).ok());
  ASSERT_TRUE(b.Enqueue(Req("b", 10, 10)).ok());
  auto s0 = b.Plan(0);
  RunPlanned(b, *s0);
  ASSERT_TRUE(b.Enqueue(Req("w", 10, 10)).ok());
  EXPECT_TRUE(b.Abort("w"));  // waiting: gone at once, never listed
  EXPECT_TRUE(b.Abort("a"));
  EXPECT_FALSE(b.Abort("zzz"));
  EXPECT_EQ(b.free_blocks(), 64 - 2);
  auto s1 = b.Plan(1);
  ASSERT_TRUE(s1);
  EXPECT_EQ(s1->aborted, std::vector<std::string>{"a"});
  EXPECT_EQ(s1->name, "decode step 1 [b:1]");
  RunPlanned(b, *s1);
  EXPECT_TRUE(b.Abort("b"));
  EXPECT_FALSE(b.Plan(2));  // nothing to run: the abort waits for the next step
  ASSERT_TRUE(b.Enqueue(Req("c", 3, 1)).ok());
  auto s2 = b.Plan(2);
  ASSERT_TRUE(s2);
  EXPECT_EQ(s2->aborted, std::vector<std::string>{"b"});
}

TEST(DemoSchedule, LinesRoundTrip) {
  ScheduledStep s;
  s.index = 7;
  s.kind = StepKind::kPrefill;
  s.padded = 12;
  s.batch = {{"r1", 5, 40, 123}, {"r2", 7, 1, UINT64_MAX}};
  s.aborted = {"r0"};
  s.finished = {"r2"};
  s.name = StepName(s.kind, s.index, s.batch);
  s.start_us = 10;
  s.dur_us = 20;
  auto parsed = ParseScheduleLine(FormatStep(s));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->type, ScheduleLine::Type::kStep);
  const auto& p = parsed->step;
  EXPECT_EQ(p.index, 7u);
  EXPECT_EQ(p.name, "prefill step 7 [r1:5,r2:7]");
  EXPECT_EQ(p.batch[1].seed, UINT64_MAX);
  EXPECT_EQ(p.batch[0].max_tokens, 40);
  EXPECT_EQ(p.aborted, s.aborted);
  EXPECT_EQ(p.finished, s.finished);
  EXPECT_EQ(p.dur_us, 20);
  EXPECT_EQ(FormatStep(p), FormatStep(s));

  ScheduleHeader h;
  h.model = *ModelPreset("3b");
  h.block_size = 16;
  h.max_batch = 64;
  h.graph_sizes = {1, 2, 4};
  h.engine = "gpu";
  auto ph = ParseScheduleLine(FormatHeader(h));
  ASSERT_TRUE(ph.ok()) << ph.status().message();
  EXPECT_TRUE(ph->header.model.SameShape(h.model));
  EXPECT_EQ(ph->header.graph_sizes, h.graph_sizes);
  auto pe = ParseScheduleLine(FormatEnd({42, "shutdown"}));
  ASSERT_TRUE(pe.ok());
  EXPECT_EQ(pe->end.steps, 42u);
}

TEST(DemoSchedule, BadLinesSayWhy) {
  struct Case {
    const char* line;
    const char* says;
  };
  const Case cases[] = {
      {"nope", "not valid JSON"},
      {"[]", "not a JSON object"},
      {R"({"type":"x"})", "'type' must be"},
      {R"({"type":"step"})", "'step' must be"},
      {R"({"type":"step","step":1,"kind":"both"})", "'kind'"},
      {R"({"type":"step","step":1,"kind":"decode","padded":0,"batch":[{"id":"a","tokens":1}]})", "'padded'"},
      {R"({"type":"step","step":1,"kind":"decode","padded":1,"batch":[]})", "'batch'"},
      {R"({"type":"step","step":1,"kind":"decode","padded":1,"batch":[{"id":"a b","tokens":1}]})", "'id'"},
      {R"({"type":"step","step":1,"kind":"decode","padded":1,"batch":[{"id":"a","tokens":0}]})", "'tokens'"},
      {R"({"type":"step","step":1,"kind":"prefill","padded":3,"batch":[{"id":"a","tokens":3}]})", "'max_tokens'"},
      {R"({"type":"step","step":1,"kind":"prefill","padded":3,"batch":[{"id":"a","tokens":3,"max_tokens":2,"seed":-1}]})",
       "'seed'"},
      {R"({"type":"step","step":1,"kind":"decode","padded":1,"batch":[{"id":"a","tokens":1}],"aborted":[3]})",
       "'aborted'"},
      {R"({"type":"header","version":2})", "version 2 is not supported"},
      {R"({"type":"header","version":1})", "'model' is missing"},
      {R"({"type":"end"})", "'steps'"},
  };
  for (const auto& c : cases) {
    auto r = ParseScheduleLine(c.line);
    ASSERT_FALSE(r.ok()) << c.line;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << c.line << " -> " << r.status().message();
  }
}

TEST(DemoSchedule, LogKeepsTheTailAndTheEnd) {
  ScheduleLog log(/*keep_steps=*/3);
  log.SetHeader("H");
  for (int i = 0; i < 5; ++i) log.Append(i, "S" + std::to_string(i));
  auto gone = log.Read(1, 10);
  EXPECT_TRUE(gone.gone);
  EXPECT_EQ(gone.oldest, 2u);
  auto s = log.Read(2, 2);
  EXPECT_EQ(s.header, "H");
  EXPECT_EQ(s.steps, (std::vector<std::string>{"S2", "S3"}));
  EXPECT_EQ(s.next, 4u);
  EXPECT_FALSE(s.ended);
  log.End("E");
  auto tail = log.Read(4, 10);
  EXPECT_EQ(tail.steps, std::vector<std::string>{"S4"});
  EXPECT_TRUE(tail.ended);
  EXPECT_EQ(tail.end_line, "E");
  EXPECT_TRUE(log.Read(5, 10).ended);
  EXPECT_EQ(log.steps(), 5u);
}

TEST(DemoSchedule, FileReaderStopsAtTheFirstBadLine) {
  const std::string path = ::testing::TempDir() + "demo_sched_" + std::to_string(getpid()) + ".jsonl";
  {
    std::ofstream f(path);
    f << FormatEnd({0, "x"}) << "\n\n"
      << "{broken\n"
      << FormatEnd({1, "y"}) << "\n";
  }
  StepFeed feed;
  ReadScheduleFile(path, feed);
  ASSERT_TRUE(feed.Front());
  feed.Pop();
  EXPECT_TRUE(feed.drained());
  EXPECT_NE(feed.close_status().message().find(":3: schedule line: not valid JSON"), std::string::npos)
      << feed.close_status().message();
  StepFeed missing;
  ReadScheduleFile(path + ".absent", missing);
  EXPECT_TRUE(missing.drained());
  EXPECT_NE(missing.close_status().message().find("cannot read the schedule"), std::string::npos);
  std::remove(path.c_str());
}

bool SameEngineStep(const EngineStep& a, const EngineStep& b, bool compare_prefill_ids, std::string* why) {
  if (a.index != b.index || a.kind != b.kind || a.padded != b.padded || a.name != b.name ||
      a.seqs.size() != b.seqs.size()) {
    *why = "step header: '" + a.name + "' vs '" + b.name + "'";
    return false;
  }
  for (size_t i = 0; i < a.seqs.size(); ++i) {
    const auto &x = a.seqs[i], &y = b.seqs[i];
    const bool ids = compare_prefill_ids || a.kind == StepKind::kDecode ? x.input_ids == y.input_ids
                                                                        : x.input_ids.size() == y.input_ids.size();
    if (!ids || x.first_position != y.first_position || x.slots != y.slots || x.block_table != y.block_table ||
        x.context_len != y.context_len || x.sample_seed != y.sample_seed || x.sample_index != y.sample_index) {
      *why = a.name + ": sequence " + std::to_string(i) + " differs";
      return false;
    }
  }
  return true;
}

// A random workload for a primary: arrivals and client aborts between steps.
// Returns the schedule lines (header first) and the engine steps it ran; every
// step also goes through the CPU engine's checks.
struct PrimaryRun {
  std::vector<std::string> lines;
  std::vector<EngineStep> steps;
  std::map<std::string, std::vector<int32_t>> prompts;
  std::map<std::string, int> generated, max_tokens;
  std::set<std::string> aborted;
};

PrimaryRun RunRandomPrimary(uint64_t seed, const BatcherOptions& opt) {
  std::mt19937_64 rng(seed);
  Batcher b(opt);
  CpuEngineOptions eo;
  eo.model = *ModelPreset("small");
  eo.block_size = opt.block_size;
  eo.num_blocks = opt.num_blocks;
  eo.max_batch = opt.max_batch;
  eo.max_step_tokens = opt.max_step_tokens;
  eo.max_model_len = opt.max_model_len;
  CpuEngine engine(eo);
  PrimaryRun run;
  ScheduleHeader h;
  h.model = eo.model;
  h.block_size = opt.block_size;
  h.max_batch = opt.max_batch;
  run.lines.push_back(FormatHeader(h));
  std::vector<std::string> live;
  int next_id = 0;
  uint64_t index = 0;
  for (int tick = 0; tick < 400 || b.running() + b.waiting() > 0; ++tick) {
    if (tick < 400 && rng() % 3 == 0) {
      for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) {
        const std::string id = "r" + std::to_string(next_id++);
        const int p = 1 + static_cast<int>(rng() % 120), m = 1 + static_cast<int>(rng() % 40);
        SeqRequest r{id, SyntheticPrompt(rng(), p, 32000), m, rng()};
        run.prompts[id] = r.prompt;
        run.max_tokens[id] = m;
        EXPECT_TRUE(b.Enqueue(std::move(r)).ok());
        live.push_back(id);
      }
    }
    if (!live.empty() && rng() % 17 == 0) {
      const std::string id = live[rng() % live.size()];
      if (b.Abort(id)) run.aborted.insert(id);
    }
    auto step = b.Plan(index);
    if (!step) continue;
    // The rules: a decode step holds every running sequence, padded to the next graph size.
    EXPECT_LE(step->batch.size(), static_cast<size_t>(opt.max_batch));
    if (step->kind == StepKind::kDecode) {
      EXPECT_EQ(step->batch.size(), b.running());
      EXPECT_EQ(step->padded, b.PaddedDecodeBatch(static_cast<int>(step->batch.size())));
    } else {
      int tokens = 0;
      for (const auto& e : step->batch) tokens += e.tokens;
      EXPECT_EQ(step->padded, tokens);
      EXPECT_LE(tokens, opt.max_step_tokens);
    }
    EngineStep es = b.Build(*step);
    std::vector<int32_t> tokens;
    Status st = engine.Run(es, &tokens);
    EXPECT_TRUE(st.ok()) << st.message();
    step->finished = b.Complete(*step, tokens);
    for (const auto& e : step->batch) ++run.generated[e.id];
    run.lines.push_back(FormatStep(*step));
    run.steps.push_back(std::move(es));
    ++index;
  }
  run.lines.push_back(FormatEnd({index, "shutdown"}));
  EXPECT_EQ(b.free_blocks(), opt.num_blocks);
  return run;
}

TEST(DemoLockstep, RandomWorkloadsFollowTheRules) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    PrimaryRun run = RunRandomPrimary(seed, Opts(/*max_batch=*/12, /*blocks=*/96, /*step_tokens=*/300));
    ASSERT_GT(run.steps.size(), 100u);
    for (const auto& [id, m] : run.max_tokens) {
      if (run.aborted.count(id)) {
        EXPECT_LE(run.generated[id], m);
      } else {
        EXPECT_EQ(run.generated[id], m) << "seed " << seed << " " << id;
      }
    }
  }
}

// Replays `lines` on a fresh Batcher as the serving loop's follower does.
std::vector<EngineStep> Follow(const std::vector<std::string>& lines, const BatcherOptions& opt,
                               const std::map<std::string, std::vector<int32_t>>* prompts, std::string* error) {
  Batcher f(opt);
  std::vector<EngineStep> out;
  for (const auto& text : lines) {
    auto line = ParseScheduleLine(text);
    if (!line.ok()) {
      *error = line.status().message();
      return out;
    }
    if (line->type != ScheduleLine::Type::kStep) continue;
    const ScheduledStep& step = line->step;
    std::vector<SeqRequest> admitted;
    if (step.kind == StepKind::kPrefill) {
      for (const auto& e : step.batch) {
        auto prompt = prompts ? prompts->at(e.id) : SyntheticPrompt(e.seed, e.tokens, 32000);
        admitted.push_back({e.id, prompt, e.max_tokens, e.seed});
      }
    }
    Status s = f.Follow(step, std::move(admitted));
    if (!s.ok()) {
      *error = s.message();
      return out;
    }
    EngineStep es = f.Build(step);
    if (f.Complete(step, Tokens(es)) != step.finished) {
      *error = step.name + ": finished sequences differ";
      return out;
    }
    out.push_back(std::move(es));
  }
  if (f.running() != 0) *error = "sequences still running after the end";
  return out;
}

TEST(DemoLockstep, AFollowerReproducesThePrimarysStepsExactly) {
  for (uint64_t seed = 11; seed <= 15; ++seed) {
    const BatcherOptions opt = Opts(/*max_batch=*/12, /*blocks=*/96, /*step_tokens=*/300);
    PrimaryRun run = RunRandomPrimary(seed, opt);
    ASSERT_FALSE(run.aborted.empty()) << "the workload should abort some requests";
    std::string error;
    // With the requests themselves (through the mirror): identical steps, token for token.
    auto followed = Follow(run.lines, opt, &run.prompts, &error);
    ASSERT_EQ(error, "");
    ASSERT_EQ(followed.size(), run.steps.size());
    for (size_t i = 0; i < followed.size(); ++i) {
      std::string why;
      ASSERT_TRUE(SameEngineStep(run.steps[i], followed[i], true, &why)) << "seed " << seed << ": " << why;
    }
    // A replay from the file alone, with another pool size: the same steps; prompts are
    // synthesized (same lengths, other ids).
    BatcherOptions other_pool = opt;
    other_pool.num_blocks = 200;
    auto replayed = Follow(run.lines, other_pool, nullptr, &error);
    ASSERT_EQ(error, "");
    ASSERT_EQ(replayed.size(), run.steps.size());
    for (size_t i = 0; i < replayed.size(); ++i) {
      EXPECT_EQ(replayed[i].name, run.steps[i].name);
      EXPECT_EQ(replayed[i].padded, run.steps[i].padded);
      ASSERT_EQ(replayed[i].seqs.size(), run.steps[i].seqs.size());
      for (size_t k = 0; k < replayed[i].seqs.size(); ++k) {
        EXPECT_EQ(replayed[i].seqs[k].context_len, run.steps[i].seqs[k].context_len);
        EXPECT_EQ(replayed[i].seqs[k].sample_index, run.steps[i].seqs[k].sample_index);
      }
    }
  }
}

TEST(DemoLockstep, AFollowerRejectsAScheduleThatDoesNotFit) {
  const BatcherOptions opt = Opts(8, 64, 256);
  Batcher primary(opt);
  ASSERT_TRUE(primary.Enqueue(Req("a", 10, 5)).ok());
  auto s0 = primary.Plan(0);
  std::string l0 = RunPlanned(primary, *s0);
  auto s1 = primary.Plan(1);
  std::string l1 = RunPlanned(primary, *s1);

  auto step = [](const std::string& l) { return ParseScheduleLine(l)->step; };
  auto admit = [](const ScheduledStep& s) {
    std::vector<SeqRequest> v;
    for (const auto& e : s.batch) v.push_back({e.id, SyntheticPrompt(e.seed, e.tokens, 32000), e.max_tokens, e.seed});
    return v;
  };
  {
    Batcher f(opt);  // a decode step for a sequence this follower never saw
    Status s = f.Follow(step(l1), {});
    EXPECT_NE(s.message().find("decodes 'a', which is not running here"), std::string::npos) << s.message();
  }
  {
    Batcher f(opt);
    ASSERT_TRUE(f.Follow(step(l0), admit(step(l0))).ok());
    Status s = f.Follow(step(l0), admit(step(l0)));  // the same prefill twice
    EXPECT_NE(s.message().find("already running"), std::string::npos) << s.message();
  }
  {
    Batcher f(Opts(8, /*blocks=*/0, 256));  // no room
    Status s = f.Follow(step(l0), admit(step(l0)));
    EXPECT_NE(s.message().find("KV-cache blocks"), std::string::npos) << s.message();
  }
  {
    Batcher f(opt);
    ScheduledStep renamed = step(l0);
    renamed.name = "prefill step 0 [b:10]";
    EXPECT_NE(f.Follow(renamed, admit(renamed)).message().find("does not match its batch"), std::string::npos);
  }
  {
    Batcher f(Opts(/*max_batch=*/1, 64, 256));
    ScheduledStep two = step(l0);
    two.batch.push_back({"b", 3, 2, 9});
    two.padded += 3;
    two.name = StepName(two.kind, two.index, two.batch);
    EXPECT_NE(f.Follow(two, admit(two)).message().find("--max-batch"), std::string::npos);
  }
}

}  // namespace
}  // namespace twinscope::demo
