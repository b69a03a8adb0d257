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
