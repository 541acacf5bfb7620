#pragma once
// Test helper: edits of an accepted spec, each refused with the error text it must name.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "support/spec_builder.h"

namespace ropejit::test {

/// An edit of a spec's JSON and a piece of the error it must give.
using SpecEdit = std::pair<std::function<void(nlohmann::json&)>, std::string>;

/// Expects `base` accepted and every edit of it refused with a message containing its text.
inline void expect_refusals(const nlohmann::json& base, const std::vector<SpecEdit>& edits) {
  EXPECT_EQ(spec_error(base), "accepted");
  for (const auto& [edit, want] : edits) {
    nlohmann::json spec = base;
    edit(spec);
    const std::string error = spec_error(spec);
    EXPECT_NE(error.find(want), std::string::npos) << spec.dump() << "\n" << error;
  }
}

}  // namespace ropejit::test
