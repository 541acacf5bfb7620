// op rerotate, measured (issue 16): re-rotating a bf16 K cache costs one extra rounding of the
// stored dtype against recomputing the rotation from the unrotated keys, for a context shift
// and for the LongRoPE short-to-long switch, at positions up to 2^20; and a LongRoPE sequence
// that crosses the switch with its cache re-rotated matches a from-scratch computation.
// Errors are in ulps of the rotated pair's magnitude (a rotation mixes the two elements, so a
// rounding of the larger one reaches the smaller). The numbers printed here are in
// docs/ops.md "Re-rotating the KV cache".
// ropejit-tier: conformance
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ropejit/check/reference.h"
#include "ropejit/fp_convert.h"
#include "ropejit/runtime.h"
#include "support/backends.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;

namespace {

constexpr int kPageSize = 16;

/// Raw (unrotated) bf16 keys, random positions and the spec shape they are used with.
struct Keys {
  int64_t tokens = 0;
  int heads = 2, head_dim = 128;
  std::vector<uint16_t> k;          ///< [T, heads, D] bf16, normal(0, 1)
  std::vector<int32_t> positions;   ///< [T]
};

uint16_t bf16(double v) { return static_cast<uint16_t>(ref::round_to_dtype_bits(DType::bf16, v)); }
double from_bf16(uint16_t bits) { return ref::load_value(DType::bf16, &bits, 0); }

Keys random_keys(int64_t tokens, int heads, int head_dim, std::mt19937_64& rng) {
  Keys keys;
  keys.tokens = tokens;
  keys.heads = heads;
  keys.head_dim = head_dim;
  std::normal_distribution<double> normal(0.0, 1.0);
  keys.k.resize(static_cast<size_t>(tokens * heads * head_dim));
  for (auto& x : keys.k) x = bf16(normal(rng));
  return keys;
}

SpecFields fields(const nlohmann::json& rope, int heads, int head_dim, int64_t max_positions) {
  SpecFields f;
  f.head_dim = head_dim;
  f.rotary_dim = head_dim;
  f.num_q_heads = heads;
  f.num_kv_heads = heads;
  f.max_position_embeddings = max_positions;
  f.rope = rope;
  f.output = "paged_kv";
  f.io_extra = {{"cache_index", "slot_mapping"}, {"page_size", kPageSize}};
  return f;
}

/// The bf16 K cache (slot t holds key t) after the append kernel of `spec` rotates the keys at
/// `positions`; `seq_len` picks the frequencies of run-length-dependent rope types.
std::vector<uint16_t> append(Runtime& runtime, const Spec& spec, const Keys& keys, const std::vector<int32_t>& positions,
                             int64_t seq_len) {
  const int64_t T = keys.tokens, row = int64_t(keys.heads) * keys.head_dim;
  const int64_t pages = (T + kPageSize - 1) / kPageSize;
  std::vector<uint16_t> q(keys.k), k(keys.k), v(keys.k);
  std::vector<uint16_t> k_cache(static_cast<size_t>(pages * kPageSize * row)), v_cache(k_cache.size());
  std::vector<int64_t> slots(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) slots[t] = t;
  Args a;
  a.num_tokens = T;
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.positions = positions.data();
  a.seq_len = seq_len;
  a.k_cache = k_cache.data();
  a.v_cache = v_cache.data();
  a.cache_num_pages = pages;
  a.slot_mapping = slots.data();
  runtime.get(spec).launch(a);
  return k_cache;
}

/// The cache after the rerotate kernel of `spec` moves every key from `from` to `to`.
std::vector<uint16_t> rerotate(Runtime& runtime, const Spec& spec, std::vector<uint16_t> cache, const Keys& keys,
                               const std::vector<int32_t>& from, const std::vector<int32_t>& to, int64_t from_seq_len,
                               int64_t seq_len) {
  std::vector<int64_t> slots(static_cast<size_t>(keys.tokens));
  for (int64_t t = 0; t < keys.tokens; ++t) slots[t] = t;
  Args a;
  a.num_tokens = keys.tokens;
  a.positions = from.data();
  a.new_positions = to.data();
  a.from_seq_len = from_seq_len;
  a.seq_len = seq_len;
  a.k_cache = cache.data();
  a.cache_num_pages = (keys.tokens + kPageSize - 1) / kPageSize;
  a.slot_mapping = slots.data();
  runtime.get(spec).launch(a);
  return cache;
}

/// Error of a cache against the float64 rotation of the raw keys to `positions` with `spec`'s
/// frequencies at `seq_len`, in ulps (bf16: 2^-7 relative) of each pair's magnitude.
struct Errors {
  double max = 0.0, mean = 0.0;
};

Errors pair_errors(const Spec& spec, const Keys& keys, const std::vector<uint16_t>& cache,
                   const std::vector<int32_t>& positions, int64_t seq_len) {
  const ref::RefFreqs freqs = ref::reference_freqs(spec, seq_len, true);
  const int D = keys.head_dim;
  Errors e;
  int64_t count = 0;
  for (int64_t t = 0; t < keys.tokens; ++t)
    for (int h = 0; h < keys.heads; ++h) {
      const int64_t base = (t * keys.heads + h) * D;
      for (int i = 0; i < spec.rotary_dim / 2; ++i) {
        const auto [a, b] = ref::pair_elements(spec.layout, spec.rotary_dim, i);
        const double x = from_bf16(keys.k[base + a]), y = from_bf16(keys.k[base + b]);
        const double angle = ref::reference_angle(spec, positions[t], freqs.inv_freq[i]);
        const auto [ex, ey] = ref::rotate_pair(x, y, angle, freqs.attention_factor);
        const double magnitude = freqs.attention_factor * std::hypot(x, y);
        const double ulp = std::ldexp(1.0, std::ilogb(magnitude) - 7);
        for (const double err : {std::fabs(from_bf16(cache[base + a]) - ex), std::fabs(from_bf16(cache[base + b]) - ey)}) {
          e.max = std::max(e.max, err / ulp);
          e.mean += err / ulp;
          ++count;
        }
      }
    }
  e.mean /= static_cast<double>(std::max<int64_t>(count, 1));
  return e;
}

/// The alternative the kernel does not take, emulated: undo the old rotation and apply the new
/// one as two fp32 rotations (cos and sin of each float32 angle, correctly rounded to float),
/// then round to bf16. The kernel rotates once by the angle difference taken in double.
std::vector<uint16_t> composed_rerotate(const Spec& spec, const Keys& keys, std::vector<uint16_t> cache,
                                        const std::vector<int32_t>& from, const std::vector<int32_t>& to,
                                        int64_t seq_len) {
  const ref::RefFreqs freqs = ref::reference_freqs(spec, seq_len, true);
  const float s = static_cast<float>(freqs.attention_factor);
  for (int64_t t = 0; t < keys.tokens; ++t)
    for (int h = 0; h < keys.heads; ++h) {
      const int64_t base = (t * keys.heads + h) * keys.head_dim;
      for (int i = 0; i < spec.rotary_dim / 2; ++i) {
        const auto [a, b] = ref::pair_elements(spec.layout, spec.rotary_dim, i);
        const double back = ref::reference_angle(spec, from[t], freqs.inv_freq[i]);
        const double forth = ref::reference_angle(spec, to[t], freqs.inv_freq[i]);
        const float c1 = static_cast<float>(std::cos(back)), s1 = static_cast<float>(std::sin(back));
        const float c2 = static_cast<float>(std::cos(forth)) * s, s2 = static_cast<float>(std::sin(forth)) * s;
        const float x = static_cast<float>(from_bf16(cache[base + a])) / s, y = static_cast<float>(from_bf16(cache[base + b])) / s;
        const float x1 = std::fmaf(x, c1, y * s1), y1 = std::fmaf(y, c1, -x * s1);
        cache[base + a] = bf16(std::fmaf(x1, c2, -y1 * s2));
        cache[base + b] = bf16(std::fmaf(y1, c2, x1 * s2));
      }
    }
  return cache;
}

class RerotateAccuracy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ropejit::test::host_backend_built()) GTEST_SKIP() << "SKIPPED: built without the host backend";
  }
  static Runtime& runtime() {
    static Runtime host([] {
      RuntimeOptions o;
      o.backend = BackendKind::host;
      return o;
    }());
    return host;
  }
  std::mt19937_64 rng_{[] {
    const uint64_t seed = std::random_device{}();
    std::printf("[ rerotate accuracy seed %llu ]\n", static_cast<unsigned long long>(seed));
    return seed;
  }()};
};

/// Prints and checks one use: the re-rotated cache is at most one rounding (1 ulp of the pair)
/// worse than the recomputed one, at worst and on average.
void expect_one_rounding(const std::string& use, const Errors& rerotated, const Errors& recomputed) {
  std::printf("[ %s: recomputed max %.3f mean %.4f | re-rotated max %.3f mean %.4f | extra max %.3f mean %.4f ulps "
              "of the pair ]\n",
              use.c_str(), recomputed.max, recomputed.mean, rerotated.max, rerotated.mean,
              rerotated.max - recomputed.max, rerotated.mean - recomputed.mean);
  EXPECT_LE(recomputed.max, 0.51) << use << ": the append itself is one rounding";
  EXPECT_LE(rerotated.max, recomputed.max + 1.0) << use;
  EXPECT_LE(rerotated.mean, recomputed.mean + 0.5) << use;
}

}  // namespace

// StreamingLLM-style shift: keys at p move to p - n, Llama 3.1's rope, p up to 2^20.
TEST_F(RerotateAccuracy, ContextShiftCostsOneRoundingAtPositionsTo2p20) {
  const nlohmann::json llama3 = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0},
                                 {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                                 {"original_max_position_embeddings", 8192}};
  SpecFields f = fields(llama3, 2, 128, int64_t(1) << 21);
  const Spec append_spec = test::make_spec(f);
  f.op = "rerotate";
  const Spec rerotate_spec = test::make_spec(f);
  const Keys keys = random_keys(2048, 2, 128, rng_);
  const int32_t shift = 1 + static_cast<int32_t>(rng_() % (1 << 16));
  std::vector<int32_t> old_positions(keys.tokens), new_positions(keys.tokens);
  for (int64_t t = 0; t < keys.tokens; ++t) {
    old_positions[t] = shift + static_cast<int32_t>(rng_() % ((1 << 20) - shift));
    new_positions[t] = old_positions[t] - shift;
  }
  const int64_t L = 1 << 20;
  const auto written = append(runtime(), append_spec, keys, old_positions, L);
  const auto moved = rerotate(runtime(), rerotate_spec, written, keys, old_positions, new_positions, L, L);
  const auto recomputed = append(runtime(), append_spec, keys, new_positions, L);
  expect_one_rounding(fmt::format("shift by {}", shift), pair_errors(append_spec, keys, moved, new_positions, L),
                      pair_errors(append_spec, keys, recomputed, new_positions, L));
  const auto composed = composed_rerotate(append_spec, keys, written, old_positions, new_positions, L);
  expect_one_rounding(fmt::format("shift by {}, two fp32 rotations (emulated)", shift),
                      pair_errors(append_spec, keys, composed, new_positions, L),
                      pair_errors(append_spec, keys, recomputed, new_positions, L));
}

// The LongRoPE switch: keys written with the short table (length <= O) move to the long one
// (length > O) at their own positions. O = 2^20 so that the keys span positions to 2^20.
TEST_F(RerotateAccuracy, LongRopeSwitchCostsOneRoundingAtPositionsTo2p20) {
  const int64_t O = int64_t(1) << 20;
  std::vector<double> short_factor(48), long_factor(48);
  for (int i = 0; i < 48; ++i) {
    short_factor[i] = 1.0 + 0.03 * i;
    long_factor[i] = 1.0 + 1.4 * i;
  }
  const nlohmann::json longrope = {{"rope_type", "longrope"}, {"rope_theta", 10000.0}, {"short_factor", short_factor},
                                   {"long_factor", long_factor}, {"original_max_position_embeddings", O}};
  SpecFields f = fields(longrope, 2, 96, 32 * O);
  const Spec append_spec = test::make_spec(f);
  f.op = "rerotate";
  const Spec rerotate_spec = test::make_spec(f);
  const Keys keys = random_keys(2048, 2, 96, rng_);
  std::vector<int32_t> positions(keys.tokens);
  for (auto& p : positions) p = static_cast<int32_t>(rng_() % O);
  const auto written = append(runtime(), append_spec, keys, positions, O);           // short table
  const auto moved = rerotate(runtime(), rerotate_spec, written, keys, positions, positions, O, O + 1);
  const auto recomputed = append(runtime(), append_spec, keys, positions, O + 1);    // long table
  expect_one_rounding("LongRoPE short -> long", pair_errors(append_spec, keys, moved, positions, O + 1),
                      pair_errors(append_spec, keys, recomputed, positions, O + 1));
}

// The worked example of docs/ops.md ("Re-rotating the KV cache"): Phi-3.5-mini's LongRoPE
// (O = 4096). A sequence is prefilled and decoded up to O tokens with the short table; when its
// length passes O, its cached keys are re-rotated to the long table once, and decoding goes on
// with the long table. The cache then matches appending every key from scratch with the long
// table.
TEST_F(RerotateAccuracy, PhiSequenceCrossingTheSwitchMatchesARecompute) {
  const Spec phi = load_spec_file(test::source_dir() + "/specs/phi-3.5-mini.json");
  SpecFields f = fields(nlohmann::json::parse(canonical_json(phi))["rope"], 2, 96, phi.max_position_embeddings);
  const Spec append_spec = test::make_spec(f);
  f.op = "rerotate";
  const Spec rerotate_spec = test::make_spec(f);
  const int64_t O = 4096, total = 4100, row = 2 * 96;
  const Keys keys = random_keys(total, 2, 96, rng_);
  std::vector<int32_t> all(total);
  for (int64_t t = 0; t < total; ++t) all[t] = static_cast<int32_t>(t);

  Keys first = keys;  // the O keys cached before the switch, rotated with the short table
  first.tokens = O;
  const std::vector<int32_t> first_positions(all.begin(), all.begin() + O);
  const auto before = append(runtime(), append_spec, first, first_positions, O);
  // The length passes O: one re-rotation of the cached keys to the long table ...
  const auto switched = rerotate(runtime(), rerotate_spec, before, first, first_positions, first_positions, O, total);
  // ... then the next keys are appended with it (at seq_len > O, the long table).
  const auto scratch = append(runtime(), append_spec, keys, all, total);
  std::vector<uint16_t> cache = scratch;
  std::copy(switched.begin(), switched.begin() + O * row, cache.begin());

  expect_one_rounding(fmt::format("Phi-3.5 crossing O = {} at {} tokens", O, total),
                      pair_errors(append_spec, keys, cache, all, total), pair_errors(append_spec, keys, scratch, all, total));
  int64_t differ = 0;
  for (int64_t i = 0; i < total * row; ++i) differ += cache[i] != scratch[i];
  std::printf("[ %lld of %lld cached elements differ from the from-scratch cache by a rounding ]\n",
              static_cast<long long>(differ), static_cast<long long>(total * row));
}
