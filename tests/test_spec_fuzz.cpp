// Randomly mutated specs. Parsing either succeeds or throws SpecError — never another exception
// or a crash — and a rejection names, by JSON pointer, the mutated field or a field whose rule
// reads it. Every accepted spec can be planned and generated, and a bounded sample of the
// accepted ones is compiled and run on the host backend against the float64 reference.
// Seeds are random per run and printed on failure; ROPEJIT_FUZZ_SEED=<seed> replays one.
// ropejit-tier: unit
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ropejit/runtime.h"
#include "ropejit/source.h"
#include "ropejit/check/harness.h"
#include "support/backends.h"
#include "support/spec_builder.h"

using namespace ropejit;
using nlohmann::json;

namespace {

constexpr int kTrials = 3000;

uint64_t fuzz_seed() {
  if (const char* s = std::getenv("ROPEJIT_FUZZ_SEED")) return std::strtoull(s, nullptr, 10);
  return (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
}

std::string seed_trace(uint64_t seed) {
  return "seed " + std::to_string(seed) + " (ROPEJIT_FUZZ_SEED=" + std::to_string(seed) + " replays it)";
}

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

// Picks a random object inside `j` (the root, "rope" or "io"); `pointer` gets its JSON pointer.
json& random_object(json& j, std::mt19937_64& rng, std::string& pointer) {
  const int pick = static_cast<int>(rng() % 3);
  pointer = pick == 1 ? "/rope" : "/io";
  if (pick == 1 && j.contains("rope") && j["rope"].is_object()) return j["rope"];
  if (pick == 2 && j.contains("io") && j["io"].is_object()) return j["io"];
  pointer.clear();
  return j;
}

// Applies one random mutation; returns the JSON pointer of the member it erased, replaced,
// scaled or added, or "" when it changed nothing.
std::string mutate(json& j, std::mt19937_64& rng) {
  std::string base;
  json& target = random_object(j, rng, base);
  if (target.empty()) return {};
  auto it = target.begin();
  std::advance(it, static_cast<long>(rng() % target.size()));
  const std::string key = it.key();
  switch (rng() % 4) {
    case 0: target.erase(key); return base + "/" + key;
    case 1: target[key] = random_value(rng); return base + "/" + key;
    case 2: target[key + "_"] = random_value(rng); return base + "/" + key + "_";
    default:
      if (!target[key].is_number()) return {};
      target[key] = target[key].get<double>() * (rng() % 2 ? 0.5 : 3.0) + 1;
      return base + "/" + key;
  }
}

// One fuzzed document: a spec from specs/ with 1-3 mutations.
struct Mutant {
  std::string text;
  std::vector<std::string> mutated;  // JSON pointers of the members changed
};

Mutant random_mutant(const std::vector<json>& bases, std::mt19937_64& rng) {
  json j = bases[rng() % bases.size()];
  Mutant m;
  const int mutations = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < mutations; ++i)
    if (std::string pointer = mutate(j, rng); !pointer.empty()) m.mutated.push_back(pointer);
  m.text = j.dump();
  return m;
}

std::vector<json> base_documents() {
  std::vector<json> bases;
  for (const auto& path : ropejit::test::spec_files()) bases.push_back(json::parse(pretty_json(load_spec_file(path))));
  return bases;
}

std::string parent_of(const std::string& pointer) { return pointer.substr(0, pointer.rfind('/')); }

bool inside(const std::string& inner, const std::string& outer) {
  return inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 && inner[outer.size()] == '/';
}

// Whether the validator (spec/src/spec_validate.cpp) may report an issue at `issue`
// because of a change at `mutated`: the same member; one inside the other (a block replaced
// or erased, a key missing from it); two members of the rope or io block (rope_type decides
// which keys apply and which are required, beta_fast/beta_slow and low/high_freq_factor bound
// each other, input/output/qkv_bias decide copy_v and positions); or one of the rules that
// check a field against another block's field.
bool related(const std::string& issue, const std::string& mutated) {
  if (issue == mutated || inside(issue, mutated) || inside(mutated, issue)) return true;
  if (parent_of(issue) == parent_of(mutated) && !parent_of(issue).empty()) return true;
  static const std::vector<std::set<std::string>> cross_field_rules = {
      // rotary_dim: explicit, or floor(head_dim * partial_rotary_factor), even, <= head_dim;
      // longrope's factor lists hold rotary_dim / 2 numbers.
      // io.mrope_section and io.axes.pairs sum to rotary_dim / 2 (the same for rerotate.from's factor lists).
      {"/head_dim", "/rotary_dim", "/partial_rotary_factor", "/rope/short_factor", "/rope/long_factor",
       "/io/mrope_section", "/io/mrope_interleaved", "/io/axes/pairs", "/rerotate/from/short_factor",
       "/rerotate/from/long_factor"},
      {"/num_q_heads", "/num_kv_heads"},                                       // Hkv divides Hq
      {"/max_position_embeddings", "/rope/original_max_position_embeddings",   // llama3: O < M
       "/rerotate/from/original_max_position_embeddings"},
      {"/rope/rope_type", "/io/positions"},  // mrope positions leave dynamic NTK and LongRoPE no length
      // proportional's pairs span the whole head (rotary_dim = head_dim); its share gives >= 1 pair.
      {"/rope/rope_type", "/rerotate/from/rope_type", "/head_dim", "/rotary_dim", "/partial_rotary_factor",
       "/rope/partial_rotary_factor", "/rerotate/from/partial_rotary_factor"},
      // the op decides copy_v and rules out other io values, qk_norm, other ops' blocks, rope types
      // (inverse_rope: none whose tables need the run length) and kv head counts (mla_append: 1).
      {"/op", "/io/copy_v", "/io/output", "/io/input", "/io/qkv_bias", "/io/q_output", "/io/positions", "/qk_norm",
       "/rerotate", "/attn_temperature", "/mla_append", "/io/page_size", "/rope/rope_type", "/num_kv_heads"},
      {"/mla_append/concat_k", "/head_dim", "/rotary_dim", "/partial_rotary_factor"},  // k_nope needs d < D
      // an NVFP4 cache: op rope, 16-value blocks of head_dim and rotary_dim (32 for neox), no
      // all-heads norm; per-token q scales: no per-head norm.
      {"/io/cache_dtype", "/op", "/head_dim", "/rotary_dim", "/partial_rotary_factor", "/layout", "/qk_norm",
       "/qk_norm/scope"},
      {"/io/q_scale", "/qk_norm", "/qk_norm/scope"},
      {"/inverse", "/op", "/io/angles"},  // an inverse rotation: op rope, computed angles
      // fp8_ds_mla: op mla_append, bf16 / fp16, kv_lora_rank of 512s, rotary_dim of 8s; fp8_indexer:
      // op rope, one kv head; fp8_deepseek_v4: V4's 512 / 64 trailing bf16 head, a per-head norm.
      {"/io/cache_layout", "/op", "/dtype", "/mla_append", "/mla_append/kv_lora_rank", "/rotary_dim", "/head_dim",
       "/partial_rotary_factor", "/num_kv_heads", "/num_q_heads", "/rotary_slice", "/qk_norm", "/qk_norm/scope"},
      // the caller's cos/sin (io.angles cos_sin_cache) leave the rope block rope_type default alone;
      // computed angles need its rope_theta.
      {"/io/angles", "/io/cos_sin_dtype", "/rope/rope_theta", "/rope/rope_type"},
  };
  // A block erased or replaced changes every member of it a rule reads.
  const auto changed = [&](const std::string& member) { return member == mutated || inside(member, mutated); };
  for (const auto& rule : cross_field_rules)
    if (rule.count(issue) && std::any_of(rule.begin(), rule.end(), changed)) return true;
  return false;
}

std::string describe(const Mutant& m) {
  std::string out = "mutated:";
  for (const auto& p : m.mutated) out += " " + p;
  return out + "\n" + m.text;
}

}  // namespace

TEST(SpecFuzz, MutatedSpecsAreAcceptedCleanlyOrRejectedNamingTheMutatedField) {
  const uint64_t seed = fuzz_seed();
  SCOPED_TRACE(seed_trace(seed));
  std::mt19937_64 rng(seed);
  const std::vector<json> bases = base_documents();
  ASSERT_FALSE(bases.empty());
  int accepted = 0, rejected = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const Mutant m = random_mutant(bases, rng);
    try {
      const Spec spec = parse_spec(m.text);
      ++accepted;
      // Accepted specs are canonical-stable and implementable by the default config.
      EXPECT_EQ(spec_hash(parse_spec(canonical_json(spec))), spec_hash(spec)) << m.text;
      std::string why;
      ASSERT_TRUE(can_implement(spec, &why)) << why << "\n" << m.text;
      const Source source = generate_source(make_plan(spec, default_config(spec)));
      EXPECT_FALSE(source.text.empty());
    } catch (const SpecError& e) {
      ++rejected;
      const std::string what = e.what();
      // Every base spec is valid, so whatever is rejected was made invalid by a mutation.
      ASSERT_FALSE(m.mutated.empty()) << "an unmutated spec was rejected: " << what << "\n" << m.text;
      ASSERT_FALSE(e.issues().empty()) << m.text;
      EXPECT_EQ(e.code(), Status::invalid_spec) << what;
      EXPECT_EQ(e.field(), e.issues().front().pointer) << "Error::field() is the first issue's pointer\n" << what;
      bool names_a_mutated_field = false;
      for (const auto& issue : e.issues()) {
        // Each issue names its field by JSON pointer, in the message too ("/rope/factor: ...").
        EXPECT_EQ(issue.pointer.rfind('/', 0), 0u) << "not a JSON pointer: \"" << issue.pointer << "\"\n" << what
                                                   << "\n" << describe(m);
        EXPECT_FALSE(issue.message.empty()) << describe(m);
        EXPECT_NE(what.find(issue.to_string()), std::string::npos) << what;
        for (const auto& p : m.mutated) names_a_mutated_field = names_a_mutated_field || related(issue.pointer, p);
      }
      EXPECT_TRUE(names_a_mutated_field) << "no issue names a mutated field or one whose rule reads it:\n"
                                         << what << "\n" << describe(m);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "unexpected exception " << e.what() << " for " << m.text;
    }
  }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 100);
}

// A bounded sample of the accepted mutants, compiled for the host backend and run once each on
// random inputs with poisoned outputs at an odd token count (check/include/ropejit/check/harness.h: every
// output element against the float64 reference, every other byte untouched). The sample: the
// first mutant of each rope_type seen (every type the mutations reach runs in every run) plus
// a uniform sample of the rest, kRunsPerSeed (25) in all, never a spec equal to a base spec
// (canonical hash) or one already picked.
TEST(SpecFuzz, SampledAcceptedMutantsRunCorrectlyOnTheHostBackend) {
  if (!ropejit::test::host_backend_built()) GTEST_SKIP() << "SKIPPED: built without the host backend";
  constexpr size_t kRunsPerSeed = 25;
  // Mutants wider than this many elements per token are compiled but not run: heads and
  // head_dim mutate up to 1024 each, and the float64 reference of a few dozen such tokens
  // would cost seconds apiece; their indexing is what the smaller ones already run.
  constexpr int64_t kMaxRunElementsPerToken = int64_t(1) << 16;

  const uint64_t seed = fuzz_seed();
  SCOPED_TRACE(seed_trace(seed));
  std::mt19937_64 rng(seed), pick(seed ^ 0x9e3779b97f4a7c15ull), cases(seed + 1);
  const std::vector<json> bases = base_documents();
  ASSERT_FALSE(bases.empty());

  std::set<std::string> seen;  // canonical hashes: the bases and every mutant offered
  for (const auto& b : bases) seen.insert(spec_hash(parse_spec(b.dump())).hex());
  std::map<RopeType, Spec> first_of_type;
  std::vector<Spec> sampled;
  int64_t offered = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const Mutant m = random_mutant(bases, rng);
    std::optional<Spec> spec;
    try {
      spec = parse_spec(m.text);
    } catch (const SpecError&) {
      continue;  // the test above checks rejections
    }
    if (!seen.insert(spec_hash(*spec).hex()).second) continue;  // same as a base spec, or a repeat
    if (first_of_type.emplace(spec->rope.type, *spec).second) continue;
    // Reservoir sampling: each later mutant is in `sampled` with probability kRunsPerSeed / offered.
    ++offered;
    if (sampled.size() < kRunsPerSeed) {
      sampled.push_back(*spec);
    } else if (const uint64_t slot = pick() % uint64_t(offered); slot < kRunsPerSeed) {
      sampled[slot] = *spec;
    }
  }
  ASSERT_EQ(sampled.size(), kRunsPerSeed) << "too few distinct accepted mutants";
  // Shuffled, then cut to make room for the first of each rope type: still a uniform sample.
  std::shuffle(sampled.begin(), sampled.end(), pick);
  sampled.resize(kRunsPerSeed - first_of_type.size());
  std::vector<Spec> picked;
  for (const auto& [type, spec] : first_of_type) picked.push_back(spec);
  picked.insert(picked.end(), sampled.begin(), sampled.end());

  RuntimeOptions options;
  options.backend = BackendKind::host;
  options.disk_cache = false;  // random mutants rarely recur: caching them would only fill the disk
  Runtime runtime(options);
  size_t compiled = 0, ran = 0;
  for (const Spec& spec : picked) {
    const std::string text = canonical_json(spec);
    std::optional<Kernel> kernel;
    try {
      kernel = runtime.get(spec);
    } catch (const Error& e) {
      ADD_FAILURE() << "an accepted spec does not compile: " << e.what() << "\n" << e.log().substr(0, 4000) << "\n"
                    << text;
      continue;
    }
    ++compiled;
    if (int64_t(total_heads(spec)) * spec.head_dim > kMaxRunElementsPerToken) continue;
    check::CaseOptions o;
    o.tokens = 3 + 2 * static_cast<int64_t>(cases() % 30);  // odd, 3..61
    o.positions_type = cases() % 2 ? PositionsType::int64 : PositionsType::int32;
    o.strided = spec.io.output != OutputForm::padded_bhsd && cases() % 2 == 0;
    // Half the cases run past max_position_embeddings (dynamic NTK's scaling, LongRoPE's long
    // factors); positions stay within the 2^20 the conformance suite checks angles at.
    o.max_position = std::min<int64_t>(spec.max_position_embeddings * (cases() % 2 ? 2 : 1), int64_t(1) << 20);
    o.seed = cases() | 1;
    try {
      const check::CaseReport report = check::run_case(runtime, *kernel, o);
      EXPECT_TRUE(report.ok()) << "tokens " << o.tokens << " max_position " << o.max_position
                               << (o.strided ? " strided" : "") << "\n"
                               << report.summary() << text;
      ++ran;
    } catch (const Error& e) {
      ADD_FAILURE() << "running an accepted spec threw: " << e.what() << "\ntokens " << o.tokens << "\n" << text;
    }
  }
  EXPECT_EQ(compiled, picked.size());
  // Huge mutants are rare (a head count or head_dim mutated to a power of two near 1024): most
  // of the sample runs.
  EXPECT_GE(ran, picked.size() / 2) << ran << " of " << picked.size() << " ran";
  std::cout << "[ fuzzed   ] " << picked.size() << " accepted mutants compiled (" << first_of_type.size()
            << " rope types), " << ran << " run against the reference; " << seed_trace(seed) << "\n";
}
