// Tunables, config validity, the heuristic default and the work decomposition.
#include "ropejit/config.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "codegen_ops.h"
#include "ropejit/json_fields.h"
#include "ropejit/json_limits.h"

namespace ropejit {

namespace {

int enum_index_count(std::string_view name) {
  if (name == "sincos") return static_cast<int>(kSinCosNames.size());
  return static_cast<int>(kGridNames.size());
}

}  // namespace

const std::vector<Tunable>& tunables() {
  static const std::vector<Tunable> table = [] {
    std::vector<Tunable> t = {
        {"block_threads", {64, 128, 256, 512, 1024}},
        {"vec", {1, 2, 4, 8}},
        {"heads_per_thread", {1, 2, 4, 8}},
        {"sincos", {}},
        {"grid", {}},
        {"ahead", {0, 1}},
        {"spread", {0, 1}},
    };
    for (auto& row : t)
      if (row.values.empty())
        for (int i = 0; i < enum_index_count(row.name); ++i) row.values.push_back(i);
    return t;
  }();
  return table;
}

void set_tunable(Config& c, std::string_view name, int value) {
  if (name == "block_threads") c.block_threads = value;
  else if (name == "vec") c.vec = value;
  else if (name == "heads_per_thread") c.heads_per_thread = value;
  else if (name == "sincos") c.sincos = kSinCosNames.at(static_cast<size_t>(value)).value;
  else if (name == "grid") c.grid = kGridNames.at(static_cast<size_t>(value)).value;
  else if (name == "ahead") c.ahead = value != 0;
  else if (name == "spread") c.spread = value != 0;
  else throw Error(Status::internal, fmt::format("tunable \"{}\" has no setter in config.cpp", name));
}

std::optional<std::string> config_problem(const Spec& spec, const Config& c) {
  const int d = spec.rotary_dim, D = spec.head_dim;
  if (c.block_threads < 32 || c.block_threads > 1024 || c.block_threads % 32 != 0)
    return fmt::format("block_threads {} is not allowed: must be a multiple of 32 in [32, 1024]",
                       c.block_threads);
  if (c.vec != 1 && c.vec != 2 && c.vec != 4 && c.vec != 8)
    return fmt::format("vec {} is not allowed: must be 1, 2, 4 or 8", c.vec);
  if (c.vec * dtype_size(spec.dtype) > 16)
    return fmt::format("vec {} is not allowed for {}: a vector access is at most 16 bytes", c.vec,
                       to_string(spec.dtype));
  // neox: vec divides the half, or one lane takes the whole slice in a few vectors.
  if (spec.layout == Layout::neox && (d / 2) % c.vec != 0 &&
      (d % c.vec != 0 || d / c.vec > kMaxSliceVectors))
    return fmt::format("vec {} does not divide the rotated half {} (neox), nor rotary_dim {} in at "
                       "most {} vectors (one lane rotating the whole slice)",
                       c.vec, d / 2, d, kMaxSliceVectors);
  if (spec.layout == Layout::interleaved && (c.vec < 2 || d % c.vec != 0))
    return fmt::format("vec {} must be even and divide rotary_dim {} (interleaved)", c.vec, d);
  // Every head starts a vector: otherwise a head's loads are misaligned and the dense row
  // width is no multiple of vec (the stride check would refuse an explicit dense stride).
  if (D % c.vec != 0)
    return fmt::format("vec {} does not divide head_dim {}", c.vec, D);
  if ((rotary_tail_moves(spec) || spec.io.copy_v) && (D - d) % c.vec != 0)
    return fmt::format("vec {} does not divide the pass-through tail {} = head_dim - rotary_dim",
                       c.vec, D - d);
  if (c.heads_per_thread < 1 || c.heads_per_thread > 64)
    return fmt::format("heads_per_thread {} is not allowed: must be in [1, 64]", c.heads_per_thread);
  if (c.sincos == SinCosMode::table && !op_facts(spec.op).table_sincos)
    return fmt::format("sincos table is not allowed for op {}: its angles are not one position's angles",
                       to_string(spec.op));
  if (c.sincos == SinCosMode::table && caller_cos_sin(spec))
    return std::string("sincos table is not allowed with io.angles cos_sin_cache: the caller's cache is the table");
  if (c.sincos == SinCosMode::table && frequencies_depend_on_run_length(spec.rope.type))
    return fmt::format("sincos table is not allowed for rope_type {}: its frequencies change at run time",
                       to_string(spec.rope.type));
  if (nvfp4_cache(spec)) {
    const WorkShape w = work_shape(spec, c);
    if (!blocks_in_lane_groups(w, c.vec, rotary_begin(spec), pass_begin(spec), kNvfp4Block))
      return fmt::format("vec {} does not fit NVFP4 blocks: each 16-value block of a head row must lie in {} lanes "
                         "of one head (head_dim {}, rotary_dim {}: multiples of 16, and 32 for the neox half)",
                         c.vec, std::max(1, kNvfp4Block / c.vec), D, d);
  }
  if (deepseek_v4_cache(spec) &&
      !blocks_in_lane_groups(work_shape(spec, c), c.vec, rotary_begin(spec), pass_begin(spec), kDeepseekV4Block))
    return fmt::format("vec {} does not fit DeepSeek-V4's cell: each 64-value block of the head must lie in {} lanes "
                       "of one head", c.vec, std::max(1, kDeepseekV4Block / c.vec));
  if (spec.hadamard && work_shape(spec, c).whole_heads)
    return fmt::format("vec {} leaves a head of {} elements more lanes than a warp holds: the Hadamard transform "
                       "meets a head's values within one warp (a wider vec)", c.vec, D);
  if ((q_scale_per_head(spec) || cache_scale_per_head(spec)) && work_shape(spec, c).whole_heads)
    return fmt::format("vec {} leaves a head of {} elements more lanes than a warp holds: per-head FP8 scales "
                       "reduce a head's amax within one warp (a wider vec)", c.vec, D);
  if (c.spread) {
    const WorkShape w = work_shape(spec, c);
    if (!w.tail_spread || w.lanes >= kWarpLanes)
      return fmt::format("spread is not allowed for this spec at vec {}: no partial head of a warp's lanes whose "
                         "pass-through vectors it would spread (a QK-norm, per-head FP8 scales or the Hadamard "
                         "transform, rotary_dim < head_dim, a tail that moves)", c.vec);
  }
  if (c.ahead) {
    const auto no_loads_ahead = codegen_detail::codegen_op(spec.op).no_loads_ahead;
    if (!no_loads_ahead)
      return fmt::format("ahead is not allowed for op {}: its kernel has no loads ahead", to_string(spec.op));
    if (auto why = no_loads_ahead(spec, c)) return fmt::format("ahead is not allowed: {}", *why);
  }
  return std::nullopt;
}

int lane_load_bytes(const Spec& spec, const Config& c) {
  const WorkShape w = work_shape(spec, c);
  const int vectors = cooperative_heads(spec) ? max_lane_vectors(w)
                      : w.whole_slice         ? spec.rotary_dim / c.vec
                      : spec.layout == Layout::interleaved ? 1 : 2;
  const int element = op_facts(spec.op).cache_lanes ? cache_dtype_size(spec.io.cache_dtype, spec.dtype)
                                                     : dtype_size(spec.dtype);
  return vectors * c.vec * element;
}

namespace codegen_detail {

// An FP8 cache moves one byte per element, so the per-element work weighs twice or four times as
// much against memory: appending, a thread takes a kv head's q heads, its k and its v (shape.cuh
// role slots), each role with code of its own (the k and v rounding not in the q heads' loop).
// An FP8 q_out likewise: the q heads' loop holds only q's rounding (and per-head scales).
void rope_default_heads(const Spec& spec, Config& c) {
  if (!quantized_cache(spec) && spec.io.q_output_dtype == CacheDType::auto_) return;
  Config trial = c;
  trial.heads_per_thread = total_heads(spec) / spec.num_kv_heads;
  const bool slots = work_shape(spec, trial).role_slots && trial.heads_per_thread <= 16;  // MQA: too few threads
  if (slots && !config_problem(spec, trial)) c = trial;
}

}  // namespace codegen_detail

Config default_config(const Spec& spec) {
  Config c;
  c.block_threads = 256;
  c.sincos = SinCosMode::compute;
  c.grid = GridMode::blocks;
  c.vec = 1;
  for (int v : {8, 4, 2}) {
    Config trial = c;
    trial.vec = v;
    if (!config_problem(spec, trial)) {
      c.vec = v;
      break;
    }
  }
  if (spec.layout == Layout::interleaved && c.vec < 2) c.vec = 2;  // rotary_dim is even
  // Reuse each sin/cos over a few heads, keeping enough threads for short batches.
  const int heads = total_heads(spec);
  c.heads_per_thread = heads >= 16 ? 4 : (heads >= 4 ? 2 : 1);
  // A QK-norm head's lanes reduce in warp shuffles; the per-item work around the heads loop
  // (row lookup, the block's shared angles, the norm's setup) weighs more than without a norm,
  // so from 8 heads on a thread takes 4, and below 16 heads half of them: two head groups per
  // row (Gemma 4's 12 heads of 32 lanes: 6 heads, 47% of the H100 memory time in the static
  // model; 4 heads spill 16 bytes on sm_80 at the 64-register cap). A head wider than a warp is
  // owned whole by one thread (WorkShape::whole_heads): one head keeps its norm pass and lanes
  // in registers (4 spill at the 64-register cap).
  // A head spread over a whole warp (WorkShape::tail_spread, DeepSeek-V4's 512-element heads) moves
  // 32 vectors per lane row and head: there a thread takes the count in [4, 16] that leaves the
  // fewest empty head slots in a row's last group (V4's 64 + 1 heads: 13, 51% of the H100 memory
  // time in the static model; 4 heads, 17 groups, 60-62%).
  // An all-heads norm (qk_norm.scope all, per-token q scales): the most heads a thread whose
  // row stays on chip with every value held from its one read (shape.cuh row_holds_words; OLMo 2:
  // 2 heads, 256 threads a token; 4 heads read again: latency-bound in the static model; Wan's
  // 40 + 40 interleaved heads: 8, 5 a thread held, against 976 µs predicted at 4 heads read
  // twice), else the most that keep the row on chip at all.
  if (all_heads_segment(spec)) {
    for (const bool hold : {true, false}) {
      Config best = c;
      for (int h : {8, 4, 2, 1}) {
        Config trial = c;
        trial.heads_per_thread = h;
        const WorkShape w = work_shape(spec, trial);
        if ((hold ? row_holds_words(w) : w.row_on_chip) && !config_problem(spec, trial)) {
          best = trial;
          break;
        }
      }
      if (!(best == c)) {
        c = best;
        break;
      }
    }
  } else if (cooperative_heads(spec)) {
    const WorkShape w = work_shape(spec, c);
    if (w.whole_heads) c.heads_per_thread = 1;
    // A head of one vector a lane (interleaved 128 at vec 8: 16 lanes) pays the norm's per-head
    // reduction for half the elements a neox lane has: 8 heads a thread (Flux's 24 + 24 heads: issue
    // 58 % of the H100 memory time, loads ahead, against 69 % at 4, the same estimate).
    else if (heads >= 32 && w.rot_vectors == 1 && !w.tail_spread) c.heads_per_thread = 8;
    else if (heads >= 16) c.heads_per_thread = 4;
    else if (heads >= 8) c.heads_per_thread = (heads + 1) / 2;
    if (w.tail_spread && w.lanes == kWarpLanes && heads >= 16) {
      int best = 4;
      for (int h = 4; h <= 16; ++h)
        if ((heads + h - 1) / h * h - heads <= (heads + best - 1) / best * best - heads) best = h;
      c.heads_per_thread = best;
    }
  }
  // The op's own choice (MLA's latent rows, re-rotation's cache walk, rope's FP8 role slots).
  if (const auto default_heads = codegen_detail::codegen_op(spec.op).default_heads) default_heads(spec, c);
  // Loads ahead where a lane loads at most one 16-byte access of each head and a thread owns two
  // heads or more: such kernels keep 16 bytes a thread in flight, too few for Little's law (the
  // H200 ran them at 67-90 % of the copy ceiling, docs/PERF.md); the next head's loads double it.
  // Only with separate inputs and no bias: the packed, padded and biased paths spill at the
  // 64-register cap with two heads' words held.
  Config ahead = c;
  ahead.ahead = true;
  if (c.heads_per_thread >= 2 && lane_load_bytes(spec, c) <= 16 && spec.io.input == InputForm::separate &&
      spec.io.output != OutputForm::padded_bhsd && !spec.io.qkv_bias && !config_problem(spec, ahead))
    c = ahead;
  return c;
}

Config default_config(const Spec& spec, int64_t tokens) {
  Config c = default_config(spec);
  if (tokens > kDecodeTokens) return c;
  // A decode step: one round trip, not one a head. Each thread takes one head, its loads issued
  // with the position's, before the angles (docs/PERF.md, issue 43's decode latency).
  Config trial = c;
  trial.heads_per_thread = 1;
  trial.ahead = true;
  if (!config_problem(spec, trial)) return trial;
  trial.heads_per_thread = c.heads_per_thread;
  return config_problem(spec, trial) ? c : trial;
}

std::string config_name(const Config& c) {
  return fmt::format("bt{}.v{}.h{}.{}.{}{}{}", c.block_threads, c.vec, c.heads_per_thread, to_string(c.sincos),
                     to_string(c.grid), c.ahead ? ".ahead" : "", c.spread ? ".spread" : "");
}

bool rotary_tail_moves(const Spec& spec) { return codegen_detail::codegen_op(spec.op).tail_moves(spec); }

WorkShape work_shape(const Spec& spec, const Config& c) { return codegen_detail::codegen_op(spec.op).work_shape(spec, c); }

LaunchDims launch_dims(const Spec& spec, const Config& c, int64_t rows, int sm_count, int blocks_per_sm) {
  const int64_t items = work_items(work_shape(spec, c), rows);
  int64_t blocks = std::max<int64_t>(1, (items + c.block_threads - 1) / c.block_threads);
  // Persistent: the blocks that stay resident on every SM; the kernel's grid-stride loop does
  // the rest (more would queue a second wave behind the first).
  if (c.grid == GridMode::persistent) {
    const int per_sm = blocks_per_sm > 0 ? blocks_per_sm : std::max(1, 2048 / c.block_threads);
    blocks = std::min<int64_t>(blocks, int64_t{std::max(1, sm_count)} * per_sm);
  }
  blocks = std::min<int64_t>(blocks, 0x7fffffff);
  return {static_cast<unsigned>(blocks), static_cast<unsigned>(c.block_threads)};
}

std::string config_to_json(const Config& c) {
  nlohmann::ordered_json j;
  j["block_threads"] = c.block_threads;
  j["vec"] = c.vec;
  j["heads_per_thread"] = c.heads_per_thread;
  j["sincos"] = std::string(to_string(c.sincos));
  j["grid"] = std::string(to_string(c.grid));
  if (c.ahead) j["ahead"] = true;  // absent: false (configs from before it read the same)
  if (c.spread) j["spread"] = true;  // likewise
  return j.dump();
}

Config config_from_json(std::string_view text) {
  if (auto problem = json_text_problem(text)) throw Error(Status::invalid_argument, "config: " + *problem);
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw Error(Status::invalid_argument, "config: not a JSON object: " + clip_for_message(text));
  JsonFields f(Status::invalid_argument, "config ");
  std::vector<std::string_view> keys;
  for (const auto& t : tunables()) keys.push_back(t.name);
  f.check_keys(j, "", keys);
  // Each key is optional (absent: the default); an int64 or uint64 beyond int is refused, never wrapped.
  constexpr auto optional = JsonFields::Presence::optional;
  constexpr int64_t lo = std::numeric_limits<int>::min(), hi = std::numeric_limits<int>::max();
  Config c;
  c.block_threads = static_cast<int>(
      f.integer_field(j, "", "block_threads", lo, hi, optional).value_or(c.block_threads));
  c.vec = static_cast<int>(f.integer_field(j, "", "vec", lo, hi, optional).value_or(c.vec));
  c.heads_per_thread = static_cast<int>(
      f.integer_field(j, "", "heads_per_thread", lo, hi, optional).value_or(c.heads_per_thread));
  c.sincos = f.enum_field<SinCosMode>(j, "", "sincos", optional).value_or(c.sincos);
  c.grid = f.enum_field<GridMode>(j, "", "grid", optional).value_or(c.grid);
  if (const nlohmann::json* ahead = f.member(j, "", "ahead", optional)) c.ahead = f.boolean(*ahead, "/ahead").value_or(false);
  if (const nlohmann::json* spread = f.member(j, "", "spread", optional))
    c.spread = f.boolean(*spread, "/spread").value_or(false);
  return c;
}

}  // namespace ropejit
