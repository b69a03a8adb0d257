// The join's typed document (src/views/join_doc.h): join.json is ToJson of MakeJoinDoc and byte for byte
// what the join wrote before the document (SHA-256 of main's join.json for the same twins), a document read
// back from its JSON is the same document (joins of the synthetic twins: block detail, divergence, a
// sampling shadow, a serving run with requests, bounds), and JoinDocFromJson is tolerant where the report
// is (missing parts absent, mistyped values default, bad block rows counted) and refuses only what is
// not a join of a known version.
#include "views/join_doc.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "../report/sha256.h"
#include "join/join_model.h"
#include "join/join_views.h"
#include "join_fixture.h"
#include "join_test_util.h"
#include "served_scene.h"

namespace twinscope {
namespace {

using testing::Dir;
using testing::Join;

using nlohmann::json;
using testing::FakeLaunch;

// ToJson(doc) read back is `doc`, and written again is the same JSON.
void ExpectRoundTrip(const views::JoinDoc& doc) {
  const json j = views::ToJson(doc);
  StatusOr<views::JoinDoc> back = views::JoinDocFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == doc) << "the document read back differs; its JSON:\n"
                            << views::ToJson(*back).dump(1) << "\nwritten:\n"
                            << j.dump(1);
  EXPECT_EQ(views::ToJson(*back).dump(), j.dump());
  // The JSON through text, as join.json is saved and read.
  StatusOr<views::JoinDoc> parsed = views::JoinDocFromJson(json::parse(j.dump()));
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(*parsed == doc);
}

// The fixture's slow launches, and one launch without timing.
std::vector<FakeLaunch> Slow() {
  std::vector<FakeLaunch> v = testing::SlowLaunches();
  v[9].primary_kernel_record = false;
  return v;
}

TEST(JoinDoc, JoinJsonIsTheDocumentWritten) {
  testing::WriteOptions o;
  o.other_kernels = {"rms_norm_kernel"};
  join::JoinedModel m = Join(testing::WriteTwin(Dir(), Slow(), o));
  auto blocks = join::ReadShadowBlocks(m.shadow_path, join::DetailSeqs(m, 32));
  ASSERT_TRUE(blocks.ok());
  const views::JoinDoc doc = views::MakeJoinDoc(m, {}, *blocks);
  EXPECT_EQ(views::JoinJson(m, {}, *blocks).dump(), views::ToJson(doc).dump());
  ASSERT_TRUE(doc.launches && doc.block_detail && doc.why_slow && doc.summary);
  EXPECT_EQ(doc.launches->size(), m.matches.size());
  EXPECT_FALSE(doc.block_detail->empty());
  EXPECT_FALSE(doc.why_slow->empty());
  EXPECT_FALSE(doc.requests);  // no request trace
  // A launch without a kernel record has no primary times (absent from its JSON, not zero).
  size_t untimed = 0;
  for (const auto& l : *doc.launches) untimed += !l.primary.have_kernel && !l.primary.dur_ns && !l.primary.start_ns;
  EXPECT_EQ(untimed, 1u);
  ExpectRoundTrip(doc);
}

// join.json byte for byte as the join wrote it before the typed document: SHA-256 of the JSON (its folder
// written "DIR") that `twinscope join -o` of main at 56a28ed wrote for the same twins (block detail with a
// straggler, fewer SMs, reordered and an untimed launch, losses on both sides; a serving run with a request
// trace, arrivals, an error and a schedule, and without the schedule).
TEST(JoinDoc, JoinJsonIsWhatTheJoinWroteBefore) {
  const std::string dir = Dir();
  auto portable = [&](std::string text, const std::string& folder) {
    for (size_t at = text.find(folder); at != std::string::npos; at = text.find(folder, at + 3))
      text.replace(at, folder.size(), "DIR");
    return text;
  };
  {
    std::vector<FakeLaunch> v = Slow();
    testing::WriteOptions o;
    o.other_kernels = {"rms_norm_kernel"};
    o.primary_counters = {{"launches_seen", 24}, {"cupti_dropped_records", 2}};
    o.shadow_counters = {{"launches_seen", 24}, {"blocks_overflow", 1}, {"launches_matching", 12}};
    const std::string slow = dir + "/slow";
    join::JoinedModel m = Join(testing::WriteTwin(slow, v, o));
    auto blocks = join::ReadShadowBlocks(m.shadow_path, join::DetailSeqs(m, 32));
    ASSERT_TRUE(blocks.ok());
    EXPECT_EQ(testing_report::Sha256Hex(portable(views::JoinJson(m, {}, *blocks).dump(), slow)),
              "ea66a43fa7d002aaa5a94cdde9dea34a1ea9e6dc70dc6e7c1ac50adaf52425af");
  }
  const std::string served = dir + "/served";
  testing::WriteOptions wo;
  wo.other_kernels = {"rms_norm_kernel"};
  wo.primary_clock_realtime_ns = 1'796'113'162'000'000ull * 1000;
  const testing::TwinFiles files = testing::WriteTwin(served, testing::Served(), wo);
  join::JoinOptions o;
  o.requests.trace = testing::ArrivalRequestTrace(served, 1'796'113'162'000'000);
  o.requests.schedule = testing::Schedule(served);
  join::JoinedModel m = Join(files, o);
  auto blocks = join::ReadShadowBlocks(m.shadow_path, join::DetailSeqs(m, 32));
  ASSERT_TRUE(blocks.ok());
  EXPECT_EQ(testing_report::Sha256Hex(portable(views::JoinJson(m, {}, *blocks).dump(), served)),
            "7042dd73af6863cf3d494b8f787fe2eec15f2287a3b61b07d12662861cbe419f");
  join::JoinOptions plain;
  plain.requests.trace = testing::RequestTrace(served);
  m = Join(files, plain);
  blocks = join::ReadShadowBlocks(m.shadow_path, join::DetailSeqs(m, 32));
  ASSERT_TRUE(blocks.ok());
  EXPECT_EQ(testing_report::Sha256Hex(portable(views::JoinJson(m, {}, *blocks).dump(), served)),
            "ce63ad46951ce9478f18f1c4633ab9d11e7c17cb1dffc5a8440b02b66b0cff2d");
}

TEST(JoinDoc, RoundTripOfADivergedJoin) {
  // Steps 0..5; the shadow ran one more (its step 3) and numbered the rest one higher; step 4 of the primary
  // (the shadow's 5) has a launch of another shape.
  std::vector<FakeLaunch> v;
  auto step = [&](const std::string& primary, const std::string& shadow, uint32_t content) {
    for (int i = 0; i < 3; ++i) {
      FakeLaunch l;
      l.path = primary;
      l.shadow_path = shadow;
      l.ordinal = static_cast<uint32_t>(i);
      l.grid = {content, 1, 1};
      l.cpu_ns = 1'000'000 * (v.size() + 1);
      l.in_primary = !primary.empty();
      v.push_back(l);
    }
  };
  for (int k = 0; k < 3; ++k) step("step#" + std::to_string(k), "step#" + std::to_string(k), 8 + k);
  step("", "step#3", 99);
  for (int k = 3; k < 6; ++k) step("step#" + std::to_string(k), "step#" + std::to_string(k + 1), 8 + k);
  v[v.size() - 5].shadow_grid = {77, 1, 1};
  testing::WriteOptions o;
  o.shadow_every = 2;
  join::JoinedModel m = Join(testing::WriteTwin(Dir(), v, o));
  const views::JoinDoc doc = views::MakeJoinDoc(m, {}, {});
  ASSERT_TRUE(doc.divergences);
  EXPECT_FALSE(doc.divergences->empty());
  ExpectRoundTrip(doc);
  // Bounded as the report's copy is.
  join::JsonBounds b;
  b.max_launches = 2;
  b.max_drift_rows = 1;
  b.max_step_rows = 1;
  const views::JoinDoc small = views::MakeJoinDoc(m, b, {});
  EXPECT_EQ(small.drift->size(), 1u);
  EXPECT_EQ(small.steps->size(), 1u);
  EXPECT_EQ(*small.launches_total, m.matches.size());
  ExpectRoundTrip(small);
}

TEST(JoinDoc, RoundTripOfAServingRunWithRequests) {
  const std::string dir = Dir();
  ExpectRoundTrip(views::MakeJoinDoc(testing::JoinServed(dir, true), {}, {}));
  const join::JoinedModel m = testing::JoinServedWithArrivals(dir + "/arrivals", 1'796'113'162'000'000);
  const views::JoinDoc doc = views::MakeJoinDoc(m, {}, {});
  ASSERT_TRUE(doc.requests);
  EXPECT_EQ(doc.requests->rows.size(), m.requests.requests.size());
  bool error = false, unknown = false;
  for (const auto& r : doc.requests->rows) {
    error |= r.error.has_value();
    unknown |= !r.arrival_unix_us.has_value();
  }
  EXPECT_TRUE(error);    // "bad" failed: its error is written
  EXPECT_TRUE(unknown);  // "lost" has no arrival: null
  ExpectRoundTrip(doc);
  join::JsonBounds b;
  b.requests.max_rows = 2;
  b.requests.max_steps = 3;
  const views::JoinDoc small = views::MakeJoinDoc(m, b, {});
  EXPECT_EQ(small.requests->rows.size(), 2u);
  EXPECT_EQ(small.requests->steps.size(), 3u);
  ExpectRoundTrip(small);
}

TEST(JoinDoc, RefusesWhatIsNotAJoinOfAKnownVersion) {
  auto r = views::JoinDocFromJson(json::array());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("twinscope join"), std::string::npos) << r.status().message();
  EXPECT_FALSE(views::JoinDocFromJson({{"format", "twinscope-trace"}, {"version", 1}}).ok());
  r = views::JoinDocFromJson({{"format", "twinscope-join"}, {"version", 2}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("version 2"), std::string::npos) << r.status().message();
  r = views::JoinDocFromJson({{"format", "twinscope-join"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("version null"), std::string::npos) << r.status().message();
}

TEST(JoinDoc, MissingPartsAreAbsentAndMistypedValuesDefault) {
  auto r = views::JoinDocFromJson({{"format", "twinscope-join"}, {"version", 1}});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*r == views::JoinDoc{});
  EXPECT_EQ(views::ToJson(*r), json({{"format", "twinscope-join"}, {"version", 1}}));

  json j = {{"format", "twinscope-join"},
            {"version", 1},
            {"summary", {{"exact", "many"}, {"time_only", 3}, {"time_only_accuracy", {{"agree", 2}}}}},
            {"launches", json::array({{{"kernel", "k"}, {"primary", 7}}, "x", {{"id", 9}, {"region", "r"}}})},
            {"why_slow", 5},
            {"block_detail",
             json::array({{{"launch", 0},
                           {"blocks", json::array({json::array({1, 2, 3, 4, 5}), json::array({1, 2}),
                                                   json::array({1, "2", 3, 4, 5}), json::array({-1, 0, 0, 0, 0})})}}})},
            {"shadow", {{"probe_counters", {{"a", 1}, {"b", "x"}}}, {"sampling", {{"every", 2}}}}},
            {"primary", {{"command_line", "python3 app.py"}, {"loss", {{"missing", 1}, {"findings", 3}}}}}};
  r = views::JoinDocFromJson(j);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const views::JoinDoc& d = *r;
  ASSERT_TRUE(d.summary);
  EXPECT_EQ(d.summary->exact, 0u);
  EXPECT_EQ(d.summary->time_only, 3u);
  EXPECT_EQ(d.summary->time_only_agree, 2u);
  ASSERT_TRUE(d.launches);
  ASSERT_EQ(d.launches->size(), 2u);   // "x" is left out
  EXPECT_EQ((*d.launches)[0].id, 0u);  // no id: its index
  EXPECT_EQ((*d.launches)[0].kernel, "k");
  EXPECT_FALSE((*d.launches)[0].primary.dur_ns);
  EXPECT_EQ((*d.launches)[1].id, 9u);
  EXPECT_FALSE((*d.launches)[1].region);
  EXPECT_FALSE(d.why_slow);  // not a list: absent, as the report says
  ASSERT_TRUE(d.block_detail);
  ASSERT_EQ(d.block_detail->size(), 1u);
  EXPECT_EQ((*d.block_detail)[0].blocks.size(), 2u);  // a negative block index is an integer (the codec judges)
  EXPECT_EQ((*d.block_detail)[0].malformed_rows, 2u);
  ASSERT_TRUE(d.shadow);
  EXPECT_EQ(d.shadow->probe_counters, (std::map<std::string, uint64_t>{{"a", 1}}));
  EXPECT_EQ(d.shadow->sampling.at("every"), 2);
  ASSERT_TRUE(d.primary);
  EXPECT_EQ(d.primary->command_line.text, "python3 app.py");
  ASSERT_TRUE(d.primary->loss);
  EXPECT_EQ(d.primary->loss->values.at("missing"), 1);
  EXPECT_TRUE(d.primary->loss->findings.empty());
  EXPECT_FALSE(d.options);
  EXPECT_FALSE(d.requests);
}

}  // namespace
}  // namespace twinscope
