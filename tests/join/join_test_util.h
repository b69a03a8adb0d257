// What the join tests share beyond the fixture: the running test's folder and a join that must succeed.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "join/join_model.h"
#include "join_fixture.h"

namespace twinscope::testing {

// A fresh folder for the running test (TestDir with the join tests' prefix).
inline std::string Dir() { return TestDir("twinscope_join"); }

// Joins `f`; a failed join fails the test and yields an empty model.
inline join::JoinedModel Join(const TwinFiles& f, join::JoinOptions o = {}) {
  auto m = join::JoinTraces(f.primary, f.shadow, o);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(*m) : join::JoinedModel{};
}

}  // namespace twinscope::testing
