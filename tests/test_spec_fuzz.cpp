// Randomly mutated specs: parsing either succeeds or throws SpecError naming a field — never
// another exception or a crash — and every spec it accepts can be planned and generated.
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ropejit/runtime.h"
#include "ropejit/source.h"
#include "support/spec_builder.h"

using namespace ropejit;
using nlohmann::json;

namespace {

json random_value(std::mt19937_64& rng) {
  switch (rng() % 9) {
    case 0: return nullptr;
    case 1: return static_cast<int64_t>(rng() % 4096) - 64;
    case 2: return std::ldexp(static_cast<double>(rng() % 1000) - 100, static_cast<int>(rng() % 80) - 40);
    case 3: return (rng() & 1) != 0;
    case 4: return "neox";
    case 5: return json::array({1.0, 2.0});
    case 6: return json::object({{"rope_type", "yarn"}});
    case 7: return std::string(1 + rng() % 4, 'x');
    default: return static_cast<int64_t>(1) << (rng() % 40);
  }
}

// Picks a random object inside `j` (the root, "rope" or "io").
json& random_object(json& j, std::mt19937_64& rng) {
  const int pick = static_cast<int>(rng() % 3);
  if (pick == 1 && j.contains("rope") && j["rope"].is_object()) return j["rope"];
  if (pick == 2 && j.contains("io") && j["io"].is_object()) return j["io"];
  return j;
}

void mutate(json& j, std::mt19937_64& rng) {
  json& target = random_object(j, rng);
  if (target.empty()) return;
  auto it = target.begin();
  std::advance(it, static_cast<long>(rng() % target.size()));
  const std::string key = it.key();
  switch (rng() % 4) {
    case 0: target.erase(key); break;
    case 1: target[key] = random_value(rng); break;
    case 2: target[key + "_"] = random_value(rng); break;
    default:
      if (target[key].is_number()) target[key] = target[key].get<double>() * (rng() % 2 ? 0.5 : 3.0) + 1;
      break;
  }
}

}  // namespace

TEST(SpecFuzz, MutatedSpecsAreAcceptedCleanlyOrRejectedWithNamedIssues) {
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<json> bases;
  for (const auto& path : ropejit::test::spec_files()) bases.push_back(json::parse(pretty_json(load_spec_file(path))));
  ASSERT_FALSE(bases.empty());
  int accepted = 0, rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    json j = bases[rng() % bases.size()];
    const int mutations = 1 + static_cast<int>(rng() % 3);
    for (int m = 0; m < mutations; ++m) mutate(j, rng);
    const std::string text = j.dump();
    try {
      const Spec spec = parse_spec(text);
      ++accepted;
      // Accepted specs are canonical-stable and implementable by the default config.
      EXPECT_EQ(spec_hash(parse_spec(canonical_json(spec))), spec_hash(spec)) << text;
      std::string why;
      ASSERT_TRUE(can_implement(spec, &why)) << why << "\n" << text;
      const Source source = generate_source(make_plan(spec, default_config(spec)));
      EXPECT_FALSE(source.text.empty());
    } catch (const SpecError& e) {
      ++rejected;
      ASSERT_FALSE(e.issues().empty()) << text;
      for (const auto& issue : e.issues()) EXPECT_FALSE(issue.message.empty()) << text;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "unexpected exception " << e.what() << " for " << text;
    }
  }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 100);
}
