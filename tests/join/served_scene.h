// A small serving run with known answers, shared by the per-request view
// tests (tests/join/requests_test.cpp) and the joined exports' tests
// (tests/export): twin traces whose step ranges are named as the demo server
// names them, a request trace and a step schedule.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "join/join_model.h"
#include "join_fixture.h"

namespace twinscope::testing {

// A request id with every character that would confuse a parser of range names.
inline constexpr char kOddId[] = "a/b,c:1]";

// Steps 0 (prefill: r0 5 tokens, the odd id 3), 1-3 (decode, both), 4 (decode, the odd id alone), and 5
// (decode, in the primary only, named by no request); two target launches per step ("layers"), each
// followed in the primary by one other kernel of 500 ns. Step 2's second launch is slow (50 us), step 4's
// first one slower (60 us); step 4's second launch is missing from the shadow.
inline std::vector<FakeLaunch> Served() {
  const std::string odd = kOddId;
  std::vector<std::string> names = {"prefill step 0 [r0:5," + odd + ":3]", "decode step 1 [r0:1," + odd + ":1]",
                                    "decode step 2 [r0:1," + odd + ":1]",  "decode step 3 [r0:1," + odd + ":1]",
                                    "decode step 4 [" + odd + ":1]",       "decode step 5 [zz:1]"};
  std::vector<FakeLaunch> v;
  uint64_t t = 1'000'000;
  for (size_t s = 0; s < names.size(); ++s) {
    for (uint32_t i = 0; i < 2; ++i) {
      FakeLaunch l;
      l.path = names[s] + "#0";
      l.ordinal = i;
      l.grid = {s == 0 ? 8u : 2u, 1, 1};
      l.cpu_ns = t;
      t += 100'000;
      v.push_back(l);
    }
  }
  v[2 * 2 + 1].dur_ns = 50'000;
  v[4 * 2].dur_ns = 60'000;
  v[4 * 2 + 1].in_shadow = false;
  return v;
}

inline std::string RequestTrace(const std::string& dir) {
  std::string p = dir + "/requests-primary.jsonl";
  std::ofstream f(p);
  f << R"({"id":"r0","status":200,"finish_reason":"length","prompt_tokens":5,"max_tokens":4,"completion_tokens":4,)"
       R"("queued_us":10,"first_token_us":900,"done_us":4000,"prefill_step":0,"steps":[0,1,2,3]})"
    << "\n\n"
    << "this line is not JSON\n"
    << nlohmann::json(
           {{"id", kOddId}, {"status", 200}, {"prompt_tokens", 3}, {"prefill_step", 0}, {"steps", {0, 1, 2, 3, 4}}})
           .dump()
    << "\n"
    << R"({"id":"bad","status":400,"error":"max_tokens must be an integer","steps":[]})"
    << "\n";
  return p;
}

inline std::string Schedule(const std::string& dir) {
  std::string p = dir + "/schedule.jsonl";
  std::ofstream f(p);
  f << R"({"type":"header","version":1})"
    << "\n";
  f << nlohmann::json({{"type", "step"},
                       {"step", 0},
                       {"kind", "prefill"},
                       {"padded", 8},
                       {"batch", {{{"id", "r0"}, {"tokens", 5}}, {{"id", kOddId}, {"tokens", 3}}}}})
           .dump()
    << "\n";
  for (int s = 1; s <= 3; ++s)
    f << nlohmann::json({{"type", "step"},
                         {"step", s},
                         {"kind", "decode"},
                         {"padded", 2},
                         {"batch", {{{"id", "r0"}, {"tokens", 1}}, {{"id", kOddId}, {"tokens", 1}}}}})
             .dump()
      << "\n";
  f << nlohmann::json({{"type", "step"},
                       {"step", 4},
                       {"kind", "decode"},
                       {"padded", 1},
                       {"batch", {{{"id", kOddId}, {"tokens", 1}}}}})
           .dump()
    << "\n";
  f << R"({"type":"end","steps":6,"reason":"shutdown"})"
    << "\n";
  return p;
}

// A request trace with arrival times (the demo server's `arrival_unix_us`,
// CLOCK_REALTIME) for the twins of Served(), whose primary header pairs CUPTI
// time 0 with `realtime_base_us`; arrivals are given after that base, so on the
// primary's clock r0 arrives at 1,001,000 ns, 1 us after the trace's first
// record. Steps' GPU spans on that clock (launches 100 us apart from 1 ms, each
// kernel 2 us after its launch, 10 us, then a 500 ns kernel 100 ns later):
// step 0 [1,002,000, 1,112,600], 1 [1,202,000, 1,312,600], 2 [1,402,000,
// 1,552,600], 3 [1,602,000, 1,712,600], 4 [1,802,000, 1,912,600].
// - r0: arrives 1,001,000, first token 120 us later, done 800 us later; steps
//   0-3, all inside its life.
// - the odd id: no times at all; steps 0-4.
// - "skew": arrives 1,100,000, done 700 us later, steps 0-4: steps 0 and 4 lie
//   outside its life (as when the server's clock and CUPTI's disagree).
// - "bad": a 400 at 1,500,000, done at once, no steps.
// - "lost": no arrival time and no steps.
// - "late": arrives 2,200,000, done 100 us later; its only step (6) has no
//   kernel in the primary.
inline std::string ArrivalRequestTrace(const std::string& dir, int64_t realtime_base_us) {
  std::string p = dir + "/requests-arrivals.jsonl";
  std::ofstream f(p);
  auto at = [&](int64_t us) { return realtime_base_us + us; };
  for (const nlohmann::json& j :
       {nlohmann::json({{"id", "r0"},
                        {"status", 200},
                        {"finish_reason", "length"},
                        {"prompt_tokens", 5},
                        {"max_tokens", 4},
                        {"completion_tokens", 4},
                        {"arrival_unix_us", at(1001)},
                        {"queued_us", 1},
                        {"first_token_us", 120},
                        {"done_us", 800},
                        {"prefill_step", 0},
                        {"steps", {0, 1, 2, 3}}}),
        nlohmann::json(
            {{"id", kOddId}, {"status", 200}, {"prompt_tokens", 3}, {"prefill_step", 0}, {"steps", {0, 1, 2, 3, 4}}}),
        nlohmann::json({{"id", "skew"},
                        {"status", 200},
                        {"arrival_unix_us", at(1100)},
                        {"first_token_us", 300},
                        {"done_us", 700},
                        {"steps", {0, 1, 2, 3, 4}}}),
        nlohmann::json({{"id", "bad"},
                        {"status", 400},
                        {"error", "max_tokens must be an integer"},
                        {"arrival_unix_us", at(1500)},
                        {"done_us", 0},
                        {"steps", nlohmann::json::array()}}),
        nlohmann::json({{"id", "lost"}, {"status", 200}, {"steps", nlohmann::json::array()}}),
        nlohmann::json(
            {{"id", "late"}, {"status", 200}, {"arrival_unix_us", at(2200)}, {"done_us", 100}, {"steps", {6}}})})
    f << j.dump() << "\n";
  return p;
}

// The twins of Served() with the primary's clock pair {0 -> realtime_base_us}, joined
// with ArrivalRequestTrace() and the schedule.
inline join::JoinedModel JoinServedWithArrivals(const std::string& dir, int64_t realtime_base_us) {
  WriteOptions wo;
  wo.other_kernels = {"rms_norm_kernel"};
  wo.primary_clock_realtime_ns = static_cast<uint64_t>(realtime_base_us) * 1000;
  auto files = WriteTwin(dir, Served(), wo);
  join::JoinOptions o;
  o.requests.trace = ArrivalRequestTrace(dir, realtime_base_us);
  o.requests.schedule = Schedule(dir);
  auto m = join::JoinTraces(files.primary, files.shadow, o);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(*m) : join::JoinedModel{};
}

inline join::JoinedModel JoinServed(const std::string& dir, bool with_schedule) {
  WriteOptions wo;
  wo.other_kernels = {"rms_norm_kernel"};
  auto files = WriteTwin(dir, Served(), wo);
  join::JoinOptions o;
  o.requests.trace = RequestTrace(dir);
  if (with_schedule) o.requests.schedule = Schedule(dir);
  auto m = join::JoinTraces(files.primary, files.shadow, o);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(*m) : join::JoinedModel{};
}

}  // namespace twinscope::testing
