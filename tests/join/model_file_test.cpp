// The saved model (join/model_file.h): a rich model (every match class,
// divergence regions, requests, why-slow groups, the overlap of concurrent
// twins) saved and read back gives the same views; a missing, stale or
// damaged file is said as such and never read as a model.
#include "join/model_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "join/join_views.h"
#include "join_fixture.h"
#include "join_test_util.h"
#include "served_scene.h"
#include "views/join_doc.h"
#include "views/join_text.h"

namespace twinscope {
namespace {

using testing::Dir;

std::string Printed(const join::JoinedModel& m) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  views::PrintJoin(f, m, 100);
  std::fclose(f);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

struct Rich {
  join::JoinedModel model;
  testing::TwinFiles files;
};

// The served scene (requests with arrival times, a schedule, why-slow groups)
// plus a time-only match and a diverged pair at its end, joined as concurrent twins.
Rich JoinRich(const std::string& dir) {
  auto launches = testing::Served();
  // In decode step 1, a shadow launch of a key and shape the primary never had; in decode step 2, a primary
  // launch the shadow never made: matched by time only (as in join_test's TimeOnlyFallback scene).
  testing::FakeLaunch extra = launches[3];
  extra.ordinal = 9;
  extra.grid = {3, 1, 1};
  extra.cpu_ns += 10'000;
  extra.in_primary = false;
  launches.insert(launches.begin() + 4, extra);
  testing::FakeLaunch missing = launches[5];
  missing.ordinal = 8;
  missing.grid = {4, 1, 1};
  missing.cpu_ns += 10'000;
  missing.in_shadow = false;
  launches.insert(launches.begin() + 6, missing);
  // At the end, a launch at the same place in both with another shape in the shadow: diverged.
  testing::FakeLaunch repacked = launches.back();
  repacked.ordinal = 7;
  repacked.shadow_grid = {5, 1, 1};
  repacked.cpu_ns += 30'000;
  launches.push_back(repacked);
  testing::WriteOptions wo;
  wo.other_kernels = {"rms_norm_kernel"};
  wo.primary_clock_realtime_ns = 1'700'000'000'000'000'000ull;
  Rich r;
  r.files = testing::WriteTwin(dir, launches, wo);
  join::JoinOptions o;
  o.concurrent = true;
  o.requests.trace = testing::ArrivalRequestTrace(dir, 1'700'000'000'000'000);
  o.requests.schedule = testing::Schedule(dir);
  o.normalize_range = {"never_in_a_range_(\\d+)"};
  o.warnings = {"an option's warning"};
  auto m = join::JoinTraces(r.files.primary, r.files.shadow, o);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (m.ok()) r.model = std::move(*m);
  return r;
}

TEST(ModelFile, ARichModelReadsBackWithTheSameViews) {
  const std::string dir = Dir();
  Rich r = JoinRich(dir);
  const join::JoinedModel& m = r.model;
  // The model is rich: every class, regions, requests, groups, the overlap.
  uint64_t kinds[3] = {0, 0, 0};
  for (const auto& mt : m.matches) ++kinds[static_cast<int>(mt.kind)];
  EXPECT_GT(kinds[static_cast<int>(join::MatchKind::kExact)], 0u);
  EXPECT_GT(kinds[static_cast<int>(join::MatchKind::kTime)], 0u);
  EXPECT_GT(kinds[static_cast<int>(join::MatchKind::kDiverged)], 0u);
  EXPECT_FALSE(m.divergences.empty());
  EXPECT_FALSE(m.reasons.empty());
  EXPECT_TRUE(m.requests.present);
  EXPECT_FALSE(m.requests.requests.empty());
  EXPECT_FALSE(m.groups.empty());
  EXPECT_TRUE(m.summary.overlap.computed);
  EXPECT_FALSE(m.steps.empty());
  EXPECT_FALSE(m.drift.empty());

  const std::string path = dir + "/join.model";
  ASSERT_TRUE(join::SaveModel(m, path).ok());
  join::ModelUnusable why = join::ModelUnusable::kDamaged;
  auto back = join::LoadModel(path, r.files.primary, r.files.shadow, &why);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(why, join::ModelUnusable::kNone);
  {  // Written a value at a time, the file is still the one CBOR document nlohmann writes for it.
    std::ifstream f(path, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const nlohmann::json doc = nlohmann::json::from_cbor(bytes);
    EXPECT_EQ(nlohmann::json::to_cbor(doc), bytes);
    EXPECT_EQ(doc["model"]["primary"].size(), m.primary.size());
    EXPECT_EQ(doc["model"]["matches"].size(), m.matches.size());
  }
  EXPECT_FALSE(m.primary.empty()) << "the model's lists are back after saving";
  // Every view of the model is the same: the JSON (whole, with requests), the text.
  EXPECT_EQ(views::JoinJson(*back, {}, {}).dump(1), views::JoinJson(m, {}, {}).dump(1));
  EXPECT_EQ(Printed(*back), Printed(m));
  // And the parts no view prints whole.
  ASSERT_EQ(back->primary.size(), m.primary.size());
  for (size_t i = 0; i < m.primary.size(); ++i) {
    EXPECT_EQ(back->primary[i].cpu_ns, m.primary[i].cpu_ns);
    EXPECT_EQ(back->primary[i].overlapped, m.primary[i].overlapped);
  }
  ASSERT_EQ(back->shadow.size(), m.shadow.size());
  for (size_t i = 0; i < m.shadow.size(); ++i) {
    EXPECT_EQ(back->shadow[i].cpu_ns, m.shadow[i].cpu_ns);
    EXPECT_EQ(back->shadow[i].blocks.span_ns, m.shadow[i].blocks.span_ns);
    EXPECT_TRUE(back->shadow[i].block_durations.empty()) << "not saved: only the join reads them";
  }
  EXPECT_EQ(back->shadow_unmatched, m.shadow_unmatched);
  EXPECT_EQ(back->primary_unmatched, m.primary_unmatched);
  EXPECT_EQ(back->options.requests.trace, m.options.requests.trace);
  EXPECT_EQ(back->options.normalize_range, m.options.normalize_range);
  EXPECT_EQ(back->primary_to_realtime_ns, m.primary_to_realtime_ns);
  EXPECT_EQ(back->requests.steps.size(), m.requests.steps.size());
  EXPECT_EQ(back->primary_side.stats.kernels.size(), m.primary_side.stats.kernels.size());
  EXPECT_EQ(back->shadow_side.stats.shadow_kernels.size(), m.shadow_side.stats.shadow_kernels.size());
  std::filesystem::remove_all(dir);
}

TEST(ModelFile, MissingStaleAndDamagedAreSaidAndNotRead) {
  const std::string dir = Dir();
  Rich r = JoinRich(dir);
  const std::string path = dir + "/join.model";
  join::ModelUnusable why = join::ModelUnusable::kNone;

  auto missing = join::LoadModel(path, r.files.primary, r.files.shadow, &why);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(why, join::ModelUnusable::kMissing);

  ASSERT_TRUE(join::SaveModel(r.model, path).ok());
  // A trace written again after the join (here: its time moved) makes the model stale.
  struct timespec times[2] = {{0, UTIME_OMIT}, {1'000'000'000, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, r.files.shadow.c_str(), times, 0), 0);
  auto stale = join::LoadModel(path, r.files.primary, r.files.shadow, &why);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(why, join::ModelUnusable::kStale);
  EXPECT_NE(stale.status().message().find(r.files.shadow + " changed since the join"), std::string::npos)
      << stale.status().message();

  ASSERT_TRUE(join::SaveModel(r.model, path).ok());
  ASSERT_TRUE(join::LoadModel(path, r.files.primary, r.files.shadow).ok());
  // Cut short.
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  auto cut = join::LoadModel(path, r.files.primary, r.files.shadow, &why);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(why, join::ModelUnusable::kDamaged);
  EXPECT_NE(cut.status().message().find("damaged"), std::string::npos) << cut.status().message();
  // Not a saved model at all (join.json's text).
  std::ofstream(path, std::ios::trunc) << "{\"format\":\"twinscope-join\"}";
  auto other = join::LoadModel(path, r.files.primary, r.files.shadow, &why);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(why, join::ModelUnusable::kDamaged);
  // A saved model of another version.
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << std::string(reinterpret_cast<const char*>(
                         nlohmann::json::to_cbor({{"format", "twinscope-join-model"}, {"version", 99}}).data()),
                     nlohmann::json::to_cbor({{"format", "twinscope-join-model"}, {"version", 99}}).size());
  auto newer = join::LoadModel(path, r.files.primary, r.files.shadow, &why);
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(why, join::ModelUnusable::kDamaged);
  EXPECT_NE(newer.status().message().find("version 99"), std::string::npos) << newer.status().message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace twinscope
