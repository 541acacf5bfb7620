// Tensor rows (runtime/src/launch/tensor_rows.h): one declaration per tensor gives its checks, its
// KernelParams view and its buffer; these tests hold the three against each other.
// ropejit-tier: unit
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launch/launch_args.h"  // private: launch_buffers, bind_buffers, check_launch
#include "support/launch_test_util.h"
#include "support/spec_builder.h"

using namespace ropejit;
using ropejit::test::SpecFields;
using ropejit::test::Storage;

namespace {

// DeepSeek-V3's MLA shape scaled down: heads of 32 + 16 (trailing rope slice), kv_lora_rank 64.
Spec mla_spec(bool concat_k, bool absorbed_q) {
  SpecFields f;
  f.head_dim = 48;
  f.rotary_dim = 16;
  f.rotary_slice = "trailing";
  f.num_q_heads = 4;
  f.num_kv_heads = 1;
  f.layout = "interleaved";
  f.dtype = "fp32";
  f.output = "paged_kv";
  f.op = "mla_append";
  f.io_extra = {{"page_size", 16}, {"q_output", absorbed_q ? "separate" : "inplace"}};
  nlohmann::json spec = ropejit::test::spec_json(f);
  spec["mla_append"] = {{"kv_lora_rank", 64}, {"concat_k", concat_k}, {"absorbed_q", absorbed_q}};
  return parse_spec(spec.dump());
}

Spec separate_spec() {
  SpecFields f;
  f.head_dim = 64;
  f.rotary_dim = 64;
  f.num_q_heads = 4;
  f.output = "separate";
  f.copy_v = true;
  return ropejit::test::make_spec(f);
}

// A launch of 3 tokens whose token-strided buffers have rows one vector wider than dense.
struct StridedLaunch {
  std::vector<BufferDesc> buffers;
  Args args;
  CheckedLaunch checked;
};

StridedLaunch strided_launch(const Spec& spec, Storage& storage) {
  const int vec = default_config(spec).vec;
  LaunchShape shape;
  shape.tokens = 3;
  shape.batch = 1;
  shape.cache_pages = 2;
  StridedLaunch out;
  out.buffers = launch_buffers(spec, shape);
  for (BufferDesc& b : out.buffers)
    if (b.token_rows) b.row_stride = b.row_elements + vec;
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
