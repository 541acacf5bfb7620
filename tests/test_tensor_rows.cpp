// Tensor rows (runtime/src/launch/tensor_rows.h): one declaration per tensor gives its checks, its
// KernelParams view and its buffer; these tests hold the three against each other.
// ropejit-tier: unit
#include <cstdint>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launch/args_fields.h"  // private: kArgsFields, to set and read each call size by its field
#include "launch/launch_args.h"  // private: launch_buffers, bind_buffers, check_launch
#include "launch/tensor_rows.h"  // private: shape_from_args and bind_row_fields, the conversion under test
#include "support/launch_test_util.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;
using ropejit::test::Storage;

namespace {

// DeepSeek-V3's MLA shape scaled down: heads of 32 + 16 (trailing rope slice), kv_lora_rank 64.
Spec mla_spec(bool concat_k, bool absorbed_q) {
  SpecFields f;
  ropejit::test::set_heads(f, 48, 16, "fp32", "interleaved");
  f.rotary_slice = "trailing";
  f.num_q_heads = 4;
  f.num_kv_heads = 1;
  f.output = "paged_kv";
  f.op = "mla_append";
  f.io_extra = {{"page_size", 16}, {"q_output", absorbed_q ? "separate" : "inplace"}};
  nlohmann::json spec = ropejit::test::spec_json(f);
  spec["mla_append"] = {{"kv_lora_rank", 64}, {"concat_k", concat_k}, {"absorbed_q", absorbed_q}};
  return parse_spec(spec.dump());
}

// 4 q heads of 64 in one of rope's io forms (`io` over the separate output with v).
Spec rope_spec(const nlohmann::json& io = {}) {
  SpecFields f;
  ropejit::test::set_heads(f, 64, 64, "bf16", "neox");
  f.num_q_heads = 4;
  f.output = "separate";
  f.copy_v = true;
  f.io_extra = io;
  return ropejit::test::make_spec(f);
}

Spec separate_spec() { return rope_spec(); }

// A launch of 3 tokens (one sequence, 2 cache pages, 2 blocks a sequence, padded to 4 positions)
// whose token-strided buffers and caches have rows one vector wider than dense.
struct StridedLaunch {
  std::vector<BufferDesc> buffers;
  Args args;
  CheckedLaunch checked;
};

StridedLaunch strided_launch(const Spec& spec, Storage& storage,
                             PositionsType positions_type = PositionsType::int32) {
  const int vec = default_config(spec).vec;
  LaunchShape shape;
  shape.tokens = 3;
  shape.batch = 1;
  shape.max_seq_len = 4;
  shape.cache_pages = 2;
  shape.max_blocks_per_seq = 2;
  shape.positions_type = positions_type;
  StridedLaunch out;
  out.buffers = launch_buffers(spec, shape);
  for (BufferDesc& b : out.buffers)
    if (b.token_rows || b.kind == BufferKind::cache) b.row_stride = b.row_elements + vec;
  out.args = ropejit::test::bound_args(spec, out.buffers, shape, storage);
  out.checked = check_launch(spec, vec, out.args, false);
  return out;
}

const BufferDesc& buffer(const StridedLaunch& l, const std::string& name) {
  for (const BufferDesc& b : l.buffers)
    if (name == b.name) return b;
  throw Error(Status::internal, name + " is not a buffer of this launch");
}

const void* arg_pointer(const Args& a, const char* name) { return field_pointer(*find_args_field(name), a); }

}  // namespace

// A row's buffer binds by field name (pointer and token stride), and the view check_launch
// derives from the same row is that pointer at that stride.
TEST(TensorRows, BufferBindsByNameAndTheViewIsWhatWasBound) {
  Storage storage;
  const StridedLaunch concat = strided_launch(mla_spec(true, false), storage);
  const KernelParams& p = concat.checked.params;
  const BufferDesc& k_nope = buffer(concat, "k_nope");
  EXPECT_EQ(concat.args.k_nope_stride, k_nope.row_stride);
  EXPECT_EQ(p.mla_heads_in.ptr, concat.args.k_nope);
  EXPECT_EQ(p.mla_heads_in.token_stride, k_nope.row_stride);
  EXPECT_EQ(p.mla_heads_in.head_stride, 32);  // dense heads of D - d
  EXPECT_EQ(p.k_concat.ptr, concat.args.k_out);
  EXPECT_EQ(p.k_concat.token_stride, buffer(concat, "k_out").row_stride);
  EXPECT_EQ(p.in[kRoleK].ptr, concat.args.k_pe);
  EXPECT_EQ(p.in[kRoleK].token_stride, buffer(concat, "k_pe").row_stride);
  EXPECT_EQ(p.in[kRoleV].ptr, concat.args.kv_c);
  EXPECT_EQ(p.out[kRoleQ].ptr, p.in[kRoleQ].ptr);  // q in place: one row, in and out
  EXPECT_EQ(buffer(concat, "q").kind, BufferKind::inout);

  const StridedLaunch absorbed = strided_launch(mla_spec(false, true), storage);
  EXPECT_EQ(absorbed.checked.params.out[kRoleQ].ptr, absorbed.args.q_out);
  EXPECT_EQ(absorbed.checked.params.out[kRoleQ].head_stride, 64 + 16);  // q_out heads of kv_lora_rank + d
  EXPECT_EQ(buffer(absorbed, "q").moved_row_elements, 4 * 16);         // absorbed: q's rope part only

  const StridedLaunch separate = strided_launch(separate_spec(), storage);
  for (const char* name : {"q", "k", "v", "q_out", "k_out", "v_out"})
    EXPECT_NE(arg_pointer(separate.args, name), nullptr) << name;
  EXPECT_EQ(separate.checked.params.out[kRoleV].ptr, separate.args.v_out);
  EXPECT_EQ(separate.checked.params.out[kRoleV].token_stride, buffer(separate, "v_out").row_stride);
}

// What a row derives refuses by the row's own field names, with the value and what is allowed.
TEST(TensorRows, ChecksNameTheRowsFields) {
  Storage storage;
  const Spec spec = mla_spec(true, false);
  const Args good = strided_launch(spec, storage).args;
  Args a = good;
  a.k_nope = nullptr;
  ropejit::test::expect_rejected(spec, a, "k_nope", "null is not allowed: required when mla_append.concat_k is true",
                                 false);
  a = good;
  a.k_out = static_cast<char*>(a.k_out) + 4;
  ropejit::test::expect_rejected(spec, a, "k_out", "-byte aligned", false);
  a = good;
  a.k_pe_stride = 17;
  ropejit::test::expect_rejected(spec, a, "k_pe_stride", "17 is not allowed: must be 0 (dense) or >= 16", false);
  a = good;
  a.k_nope_head_stride = 8;
  ropejit::test::expect_rejected(spec, a, "k_nope_head_stride", "8 is not allowed: must be 0 (dense) or >= 32",
                                 false);
}

// The padded output's rows: [B, H, S, D] views with max_seq_len bound from the shape; positions
// of either element type, aligned to their own size.
TEST(TensorRows, PaddedOutputsAndPositionsFollowTheirRows) {
  Storage storage;
  const Spec padded = rope_spec({{"output", "padded_bhsd"}, {"positions", "varlen"}});
  const StridedLaunch l = strided_launch(padded, storage);
  EXPECT_EQ(l.args.max_seq_len, 4);
  EXPECT_EQ(l.args.batch, 1);
  const TensorRef& k_out = l.checked.params.out[kRoleK];
  EXPECT_EQ(k_out.ptr, l.args.k_out);
  EXPECT_EQ(k_out.token_stride, 64);
  EXPECT_EQ(k_out.head_stride, 4 * 64);
  EXPECT_EQ(k_out.batch_stride, 2 * 4 * 64);  // Hkv heads of S rows
  EXPECT_EQ(buffer(l, "q_out").rows, 4);      // B * S rows of [Hq, D]
  EXPECT_EQ(l.checked.params.cu_seqlens, l.args.cu_seqlens);
  Args a = l.args;
  a.cu_seqlens = nullptr;
  a.num_tokens = 0;  // padding rows are written with no token: cu_seqlens and the outputs stay required
  ropejit::test::expect_rejected(padded, a, "cu_seqlens", "null is not allowed: required when the spec's "
                                 "io.positions is varlen", false);

  const Spec explicit_positions = rope_spec();
  for (PositionsType type : {PositionsType::int32, PositionsType::int64}) {
    const StridedLaunch p = strided_launch(explicit_positions, storage, type);
    EXPECT_EQ(p.args.positions_type, type);
    EXPECT_EQ(p.checked.params.positions_are_int64, type == PositionsType::int64);
    EXPECT_EQ(buffer(p, "positions").element_bytes, type == PositionsType::int64 ? 8 : 4);
    a = p.args;
    a.positions = static_cast<const char*>(a.positions) + 4;
    if (type == PositionsType::int32) {
      EXPECT_EQ(check_launch(explicit_positions, 8, a, false).params.positions, a.positions);
    } else {
      ropejit::test::expect_rejected(explicit_positions, a, "positions", "must be 8-byte aligned", false);
    }
  }
}

// FP8 q_out is the row's element rule (the spec's q output dtype), not a patch by name: one-byte
// codes, the static q_scale bound beside it, and the launch fields say so.
// Args and LaunchShape convert through the dim rows alone: each call size's ropejit_args field
// comes back as its dim symbol, and a buffer bound at that shape stores the same fields.
TEST(TensorRows, ShapeFromArgsReadsEveryCallSize) {
  Args a;
  int64_t value = 5;
  for (const CallSize& size : call_sizes())
    if (size.offset == 0) set_field_integer(kArgsFields[args_field_index(size.args_field)], a, value++);
  a.positions_type = PositionsType::int64;
  const LaunchShape shape = launch_detail::shape_from_args(a);
  const Spec spec = ropejit::test::make_spec({});
  for (const CallSize& size : call_sizes())
    EXPECT_EQ(dim_value(size.symbol, spec, shape),
              field_integer(kArgsFields[args_field_index(size.args_field)], a) + size.offset) << size.symbol;
  EXPECT_EQ(shape.positions_type, PositionsType::int64);
  for (const CallSize& size : call_sizes()) {  // the other way: a buffer binding the field stores the shape's size
    BufferDesc b{"q", BufferKind::input, 1, 1, 1, 2, 1, false};
    b.bound[0] = {size.args_field.data(), FieldUse::required};
    Args out;
    launch_detail::bind_row_fields(b, shape, out);
    if (size.offset == 0)
      EXPECT_EQ(field_integer(kArgsFields[args_field_index(size.args_field)], out),
                field_integer(kArgsFields[args_field_index(size.args_field)], a)) << size.args_field;
  }
}

TEST(TensorRows, Fp8QOutTakesTheSpecsQOutputDtype) {
  const Spec fp8 = rope_spec({{"q_output_dtype", "fp8_e4m3"}, {"q_scale", "static"}});
  LaunchShape shape;
  shape.tokens = 3;
  const std::vector<BufferDesc> buffers = launch_buffers(fp8, shape);
  for (const BufferDesc& b : buffers) {
    if (!b.is_data()) continue;  // positions
    const bool q_out = b.name == std::string("q_out");
    EXPECT_EQ(b.element_bytes, q_out ? 1 : 2) << b.name;
    EXPECT_EQ(b.element_type, q_out ? "fp8_e4m3" : "bf16") << b.name;
    bool scale = false;
    for (const BoundField& f : b.bound) scale = scale || (f.name && f.name == std::string("q_scale"));
    EXPECT_EQ(scale, q_out) << b.name;
  }
  for (const LaunchField& f : launch_fields(fp8)) {
    if (f.name == "q_out") EXPECT_EQ(f.dtype, "fp8_e4m3");
    if (f.name == "k_out") EXPECT_EQ(f.dtype, "bf16");
    if (f.name == "q_scale") EXPECT_EQ(f.use, FieldUse::required);
  }
  const Spec computed = rope_spec({{"q_output_dtype", "fp8_e4m3"}, {"q_scale", "per_token_head"}});
  for (const LaunchField& f : launch_fields(computed)) {
    if (f.name == "q_scale") EXPECT_EQ(f.use, FieldUse::unused);
    if (f.name == "q_scale_out") EXPECT_TRUE(f.whole_output);
  }
}

// The caches' and block tables' rows: pages a page stride apart in the spec's layout, the cache
// sizes bound from the shape, the index aligned to its int32 elements.
TEST(TensorRows, CacheRowsBindPagedViews) {
  Storage storage;
  const Spec paged = rope_spec({{"output", "paged_kv"}, {"page_size", 4}, {"cache_index", "block_tables"},
                                {"cache_layout", "hnd"}, {"positions", "varlen"}});
  const StridedLaunch l = strided_launch(paged, storage);
  EXPECT_EQ(l.args.cache_num_pages, 2);
  EXPECT_EQ(l.args.max_blocks_per_seq, 2);
  EXPECT_EQ(l.args.v_cache_page_stride, buffer(l, "v_cache").row_stride);
  for (int role : {kRoleK, kRoleV}) {
    const TensorRef want = cache_tensor(paged, role == kRoleK ? l.args.k_cache : l.args.v_cache,
                                        buffer(l, role == kRoleK ? "k_cache" : "v_cache").row_stride);
    const TensorRef& got = l.checked.params.out[role];
    EXPECT_EQ(got.ptr, want.ptr);
    EXPECT_EQ(got.token_stride, want.token_stride);
    EXPECT_EQ(got.head_stride, 4 * 64);  // hnd: a head's page_size rows
    EXPECT_EQ(got.batch_stride, want.batch_stride);
  }
  EXPECT_EQ(l.checked.params.block_tables, l.args.block_tables);
  EXPECT_EQ(buffer(l, "k_cache").moved_rows, 3);  // a slot a token
  for (const LaunchField& f : launch_fields(paged))
    if (f.name == "k_cache") {
      EXPECT_EQ(f.stride_field, "k_cache_page_stride");
      EXPECT_FALSE(f.whole_output);
    }
  Args a = l.args;
  a.block_tables = reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(a.block_tables) + 2);
  ropejit::test::expect_rejected(paged, a, "block_tables", "must be 4-byte aligned", false);
  a = l.args;
  a.v_cache = nullptr;
  ropejit::test::expect_rejected(paged, a, "v_cache", "null is not allowed: required when the spec's io.output is "
                                 "paged_kv", false);
  a = l.args;
  a.k_cache_page_stride = 8;
  ropejit::test::expect_rejected(paged, a, "k_cache_page_stride", "8 is not allowed: must be 0 (dense) or >=",
                                 false);
}

// Every array field of ropejit_args is some spec's tensor row: a new pointer field without a row
// (which no launch could take) fails here. Each shipped spec is tried with io forms and with a
// LayerNorm QK-norm (its biases), no shipped spec having one.
TEST(TensorRows, EveryArrayFieldIsARowOfSomeSpec) {
  const std::vector<nlohmann::json> norms = {nullptr, {{"type", "layernorm"}, {"bias", "per_head"}}};
  const std::vector<nlohmann::json> ios = {
      nlohmann::json::object(),
      {{"output", "padded_bhsd"}, {"positions", "varlen"}, {"copy_v", true}},
      {{"positions", "offset"}},
      {{"input", "packed_qkv"}, {"qkv_bias", true}},
      {{"output", "separate"}, {"q_output_dtype", "fp8_e4m3"}, {"q_scale", "per_token_head"}},
      {{"output", "paged_kv"}, {"page_size", 16}, {"cache_index", "block_tables"}, {"positions", "varlen"},
       {"copy_v", true}, {"cache_dtype", "fp8_e4m3"}, {"cache_scale", "per_token_head"}}};
  std::set<std::string> rows;
  for (const std::string& path : ropejit::test::spec_files()) {
    std::ifstream in(path);
    const nlohmann::json base = nlohmann::json::parse(in);
    for (const nlohmann::json& io : ios)
      for (const nlohmann::json& norm : norms) {
        nlohmann::json spec = base;
        spec["io"].update(io);
        if (!norm.is_null()) spec["qk_norm"] = norm;
        Spec parsed;
        try {
          parsed = parse_spec(spec.dump());
        } catch (const SpecError&) {
          continue;  // an io form or norm this op does not take
        }
        for (const BufferDesc& b : launch_buffers(parsed, LaunchShape{})) rows.insert(b.name);
      }
  }
  for (const ArgsField& f : kArgsFields)
    if (f.kind == ArgsFieldKind::pointer) EXPECT_TRUE(rows.count(std::string(f.name))) << f.name;
}
