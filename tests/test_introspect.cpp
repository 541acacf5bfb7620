// Spec introspection: launch_fields agrees with the buffers a launch binds and with the launch
// checks for every io form; the C API reports the validated (derived) values, the kernels'
// frequencies and the launch fields, and names every bad argument.
// ropejit-tier: unit
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launch/launch_args.h"  // private: launch_buffers and check_launch, which public launch_fields must agree with
#include "ropejit/freqs.h"
#include "ropejit/introspect.h"
#include "ropejit/ropejit.h"
#include "support/launch_test_util.h"
#include "support/spec_builder.h"

using namespace ropejit;
using nlohmann::json;
using ropejit::test::SpecFields;
using ropejit::test::Storage;

namespace {

/// Bytes of each element type name launch_fields reports.
const std::map<std::string, int> kTypeBytes = {{"bf16", 2}, {"fp16", 2}, {"fp32", 4}, {"int32", 4},
                                               {"int64", 8}, {"fp8_e4m3", 1}, {"fp8_e5m2", 1}};

const LaunchField& field_of(const std::vector<LaunchField>& fields, std::string_view name) {
  for (const LaunchField& f : fields)
    if (f.name == name) return f;
  throw std::runtime_error("no launch field " + std::string(name));
}

/// Expects field `name` used as `use`, with element type `dtype` and `dims` when an array.
void expect_field(const Spec& spec, std::string_view name, FieldUse use, std::string_view dtype = {},
                  std::vector<std::string_view> dims = {}) {
  const std::vector<LaunchField> fields = launch_fields(spec);
  const LaunchField& f = field_of(fields, name);
  EXPECT_EQ(f.use, use) << name << " is " << to_string(f.use);
  EXPECT_EQ(f.dtype, dtype) << name;
  EXPECT_EQ(f.dims, dims) << name;
}

/// check_launch's verdict: "" when accepted, else the argument it names.
std::string refused_field(const Spec& spec, const Args& a) {
  try {
    check_launch(spec, default_config(spec).vec, a, false);
    return "";
  } catch (const Error& e) {
    return e.field().empty() ? std::string("?") : e.field();
  }
}

/// launch_fields against launch_buffers and check_launch: each buffer's field has its use, element
/// size and (from the dims) its element count; Args bound from the buffers launch, and leaving out
/// each required field, or setting each unused field (shape fields excepted), is refused naming it.
void expect_fields_agree(const Spec& spec) {
  SCOPED_TRACE(canonical_json(spec));
  const bool fp8 = quantized_cache(spec);
  LaunchShape shape{5, 2, 8, PositionsType::int32, 6, 3, fp8 ? 0.5f : 0.0f, fp8 ? 2.0f : 0.0f};
  const std::vector<LaunchField> fields = launch_fields(spec);
  const std::vector<BufferDesc> buffers = launch_buffers(spec, shape);
  for (const BufferDesc& b : buffers) {
    const LaunchField& f = field_of(fields, b.name);
    EXPECT_EQ(f.use, b.use) << b.name;
    int64_t elements = 1;
    for (int64_t n : field_shape(f, spec, shape)) elements *= n;
    EXPECT_EQ(elements, b.rows * b.row_elements) << b.name;
    const std::string type = f.dtype == "int32|int64" ? "int32" : std::string(f.dtype);
    ASSERT_TRUE(kTypeBytes.count(type)) << b.name << ": " << f.dtype;
    EXPECT_EQ(kTypeBytes.at(type), b.element_bytes) << b.name;
  }
  for (const LaunchField& f : fields) {
    const bool bound = std::any_of(buffers.begin(), buffers.end(), [&](const BufferDesc& b) { return f.name == b.name; });
    EXPECT_EQ(bound, !f.dims.empty()) << f.name << ": an array exactly when a launch binds it";
  }

  Storage storage;
  const Args args = test::bound_args(spec, buffers, shape, storage);
  ASSERT_EQ(refused_field(spec, args), "");
  for (const LaunchField& f : fields) {
    if (f.name == "num_tokens") continue;  // 0 tokens is a valid launch
    Args probe = args;
    const ArgsField& row = kArgsFields[args_field_index(f.name)];
    if (f.use == FieldUse::unused) {
      if (is_shape_field(f.name)) continue;  // range-checked, not refused as unused
      test::set_off_default(probe, row, storage.at(0));
      EXPECT_EQ(refused_field(spec, probe), f.name) << f.name << " set where unused";
    } else {
      std::memset(reinterpret_cast<char*>(&probe) + row.offset, 0, row.size);
      EXPECT_EQ(refused_field(spec, probe), f.use == FieldUse::required ? std::string(f.name) : "")
          << f.name << " left out (" << to_string(f.use) << ")";
    }
  }
}

SpecFields small_fields() {
  SpecFields f;
  f.num_q_heads = 4;
  f.num_kv_heads = 2;
  f.head_dim = 64;
  f.rotary_dim = 64;
  return f;
}

SpecFields paged_fields(const std::string& cache_dtype, const std::string& cache_index, const std::string& layout) {
  SpecFields f = small_fields();
  f.output = "paged_kv";
  f.positions = cache_index == "block_tables" ? "varlen" : "explicit";
  f.io_extra = {{"cache_dtype", cache_dtype}, {"cache_index", cache_index}, {"page_size", 4},
                {"cache_layout", layout}};
  return f;
}

}  // namespace

TEST(Introspect, LaunchFieldsListEveryArgsFieldButStructSize) {
  const std::vector<LaunchField> fields = launch_fields(test::make_spec({}));
  std::vector<std::string> expected;
  for (size_t i = 1; const char* name = ropejit_struct_field("ropejit_args", i, nullptr); ++i) expected.push_back(name);
  ASSERT_EQ(fields.size(), expected.size());
  for (size_t i = 0; i < fields.size(); ++i) EXPECT_EQ(fields[i].name, expected[i]);
}

TEST(Introspect, SeparateInplaceExplicit) {
  const Spec spec = test::make_spec(small_fields());
  expect_field(spec, "num_tokens", FieldUse::required);
  expect_field(spec, "q", FieldUse::required, "bf16", {"T", "Hq", "D"});
  expect_field(spec, "k", FieldUse::required, "bf16", {"T", "Hkv", "D"});
  expect_field(spec, "q_stride", FieldUse::optional);
  expect_field(spec, "v", FieldUse::unused);
  expect_field(spec, "v_stride", FieldUse::unused);
  expect_field(spec, "qkv", FieldUse::unused);
  expect_field(spec, "q_out", FieldUse::unused);
  expect_field(spec, "positions", FieldUse::required, "int32|int64", {"T"});
  expect_field(spec, "positions_type", FieldUse::optional);
  expect_field(spec, "cu_seqlens", FieldUse::unused);
  expect_field(spec, "seq_len", FieldUse::optional);
  expect_field(spec, "k_cache", FieldUse::unused);
  expect_field(spec, "k_scale", FieldUse::unused);
  expect_fields_agree(spec);
}

TEST(Introspect, PackedQkvWithBias) {
  SpecFields f = small_fields();
  f.input = "packed_qkv";
  f.qkv_bias = true;
  f.dtype = "fp16";
  const Spec spec = test::make_spec(f);
  expect_field(spec, "qkv", FieldUse::required, "fp16", {"T", "Hq+2Hkv", "D"});
  expect_field(spec, "qkv_stride", FieldUse::optional);
  expect_field(spec, "bias", FieldUse::required, "fp16", {"Hq+2Hkv", "D"});
  for (const char* unused : {"q", "k", "v", "q_stride"}) expect_field(spec, unused, FieldUse::unused);
  expect_fields_agree(spec);
}

TEST(Introspect, PaddedBhsdWithVarlen) {
  SpecFields f = small_fields();
  f.input = "packed_qkv";
  f.output = "padded_bhsd";
  f.positions = "varlen";
  const Spec spec = test::make_spec(f);
  ASSERT_TRUE(spec.io.copy_v);  // packed with outputs elsewhere: v must reach v_out
  expect_field(spec, "q_out", FieldUse::required, "bf16", {"B", "Hq", "S", "D"});
  expect_field(spec, "v_out", FieldUse::required, "bf16", {"B", "Hkv", "S", "D"});
  expect_field(spec, "q_out_stride", FieldUse::unused);
  expect_field(spec, "max_seq_len", FieldUse::required);
  expect_field(spec, "cu_seqlens", FieldUse::required, "int32", {"B+1"});
  expect_field(spec, "batch", FieldUse::required);
  expect_field(spec, "start_pos", FieldUse::optional, "int64", {"B"});
  expect_field(spec, "positions", FieldUse::unused);
  expect_field(spec, "positions_type", FieldUse::unused);
  expect_fields_agree(spec);

  f.output = "separate";
  f.input = "separate";
  f.copy_v = true;
  const Spec separate = test::make_spec(f);
  expect_field(separate, "v_out", FieldUse::required, "bf16", {"T", "Hkv", "D"});
  expect_field(separate, "v_out_stride", FieldUse::optional);
  expect_field(separate, "max_seq_len", FieldUse::unused);
  expect_fields_agree(separate);
}

TEST(Introspect, PagedKvSlotMappingFp8) {
  const Spec spec = test::make_spec(paged_fields("fp8_e4m3", "slot_mapping", "nhd"));
  expect_field(spec, "k_cache", FieldUse::required, "fp8_e4m3", {"pages", "page_size", "Hkv", "D"});
  expect_field(spec, "v_cache", FieldUse::required, "fp8_e4m3", {"pages", "page_size", "Hkv", "D"});
  expect_field(spec, "v", FieldUse::required, "bf16", {"T", "Hkv", "D"});  // copy_v by default
  expect_field(spec, "cache_num_pages", FieldUse::required);
  expect_field(spec, "k_cache_page_stride", FieldUse::optional);
  expect_field(spec, "k_scale", FieldUse::required);
  expect_field(spec, "v_scale", FieldUse::required);
  expect_field(spec, "slot_mapping", FieldUse::required, "int64", {"T"});
  for (const char* unused : {"block_tables", "max_blocks_per_seq", "k_out", "v_out", "q_out"})
    expect_field(spec, unused, FieldUse::unused);
  expect_fields_agree(spec);
}

TEST(Introspect, PagedKvBlockTablesHnd) {
  SpecFields f = paged_fields("auto", "block_tables", "hnd");
  f.io_extra["q_output"] = "separate";
  const Spec spec = test::make_spec(f);
  expect_field(spec, "k_cache", FieldUse::required, "bf16", {"pages", "Hkv", "page_size", "D"});
  expect_field(spec, "k_scale", FieldUse::unused);
  expect_field(spec, "block_tables", FieldUse::required, "int32", {"B", "max_blocks_per_seq"});
  expect_field(spec, "max_blocks_per_seq", FieldUse::required);
  expect_field(spec, "cu_seqlens", FieldUse::required, "int32", {"B+1"});
  expect_field(spec, "q_out", FieldUse::required, "bf16", {"T", "Hq", "D"});
  expect_field(spec, "slot_mapping", FieldUse::unused);
  expect_fields_agree(spec);
}

// Written: what a binding must refuse as read-only memory.
TEST(Introspect, WrittenArraysAreOutputsCachesAndInplaceInputs) {
  const auto written = [](const Spec& spec) {
    std::vector<std::string> names;
    for (const LaunchField& f : launch_fields(spec))
      if (f.written) names.emplace_back(f.name);
    return names;
  };
  SpecFields f = small_fields();
  EXPECT_EQ(written(test::make_spec(f)), (std::vector<std::string>{"q", "k"}));
  f.output = "separate";
  f.qkv_bias = true;
  EXPECT_EQ(written(test::make_spec(f)), (std::vector<std::string>{"q_out", "k_out"}));
  EXPECT_EQ(written(test::make_spec(paged_fields("auto", "slot_mapping", "nhd"))),
            (std::vector<std::string>{"q", "k_cache", "v_cache"}));
  SpecFields paged = paged_fields("fp8_e5m2", "block_tables", "hnd");
  paged.io_extra["q_output"] = "separate";
  EXPECT_EQ(written(test::make_spec(paged)), (std::vector<std::string>{"q_out", "k_cache", "v_cache"}));
}

TEST(Introspect, QkNormWeightsPositionsFormsAndRunLength) {
  SpecFields f = small_fields();
  f.qk_norm = {{"type", "rmsnorm"}, {"eps", 1e-6}};
  const Spec per_head = test::make_spec(f);
  expect_field(per_head, "q_norm_weight", FieldUse::required, "bf16", {"D"});
  expect_field(per_head, "k_norm_weight", FieldUse::required, "bf16", {"D"});
  expect_fields_agree(per_head);
  f.qk_norm["scope"] = "all";  // HF's q_norm.weight of Hq·D values, k_norm.weight of Hkv·D
  const Spec all_heads = test::make_spec(f);
  expect_field(all_heads, "q_norm_weight", FieldUse::required, "bf16", {"Hq", "D"});
  expect_field(all_heads, "k_norm_weight", FieldUse::required, "bf16", {"Hkv", "D"});
  expect_fields_agree(all_heads);
  f.qk_norm["weight"] = "none";
  expect_field(test::make_spec(f), "q_norm_weight", FieldUse::unused);

  SpecFields mrope = small_fields();
  mrope.positions = "mrope";
  mrope.mrope_section = {16, 8, 8};
  expect_field(test::make_spec(mrope), "positions", FieldUse::required, "int32|int64", {"3", "T"});
  expect_fields_agree(test::make_spec(mrope));
  SpecFields offset = small_fields();
  offset.positions = "offset";
  expect_field(test::make_spec(offset), "start_pos", FieldUse::optional, "int64", {"1"});
  expect_fields_agree(test::make_spec(offset));

  // dynamic NTK and LongRoPE choose their frequencies by the run-time length.
  for (const json& rope : test::rope_blocks_for_every_type(64, 8192)) {
    SpecFields r = small_fields();
    r.rope = rope;
    const Spec spec = test::make_spec(r);
    const std::string type = rope["rope_type"];
    const bool needs = type == "dynamic" || type == "longrope";
    expect_field(spec, "seq_len", needs ? FieldUse::required : FieldUse::optional);
    if (needs) expect_fields_agree(spec);
  }
  SpecFields fixed = small_fields();
  fixed.rope = {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}, {"factor", 2.0}, {"seq_len", 16384}};
  expect_field(test::make_spec(fixed), "seq_len", FieldUse::optional);
}

TEST(Introspect, DimValueNamesAnUnknownSymbol) {
  const Spec spec = test::make_spec({});
  EXPECT_EQ(dim_value("Hq+2Hkv", spec, {}), 8 + 2 * 2);
  try {
    dim_value("X", spec, {});
    FAIL() << "accepted an unknown dim symbol";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("\"X\" is not allowed: must be one of T | B"), std::string::npos) << e.what();
  }
}

// Each call size is one dim row: set by its ropejit_args field, said by its dim symbol (less its
// offset), and any other field name is refused with the allowed list.
TEST(Introspect, CallSizesAreSetByTheirArgsFields) {
  const Spec spec = test::make_spec({});
  const std::vector<CallSize> sizes = call_sizes();
  ASSERT_GE(sizes.size(), 6u);
  LaunchShape shape;
  int64_t value = 11;
  std::map<std::string, int64_t> set;
  for (const CallSize& size : sizes)
    if (size.offset == 0) set_call_size(shape, size.args_field, set[std::string(size.args_field)] = value++);
  for (const CallSize& size : sizes)
    EXPECT_EQ(dim_value(size.symbol, spec, shape), set.at(std::string(size.args_field)) + size.offset) << size.symbol;
  try {
    set_call_size(shape, "head_dim", 4);
    FAIL() << "accepted a field that is no call size";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("\"head_dim\" is not allowed: must be one of num_tokens | batch"),
              std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- the C API

TEST(IntrospectCApi, DescribeReportsDerivedValues) {
  json j = test::spec_json(small_fields());
  j.erase("rotary_dim");
  j["partial_rotary_factor"] = 0.5;
  j["io"]["input"] = "packed_qkv";
  j["io"]["qkv_bias"] = true;
  j["io"].erase("copy_v");
  ropejit_spec_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(ropejit_spec_describe(j.dump().c_str(), &info), ROPEJIT_STATUS_OK) << ropejit_last_error();
  EXPECT_EQ(info.head_dim, 64);
  EXPECT_EQ(info.rotary_dim, 32);  // floor(64 * 0.5)
  EXPECT_EQ(info.num_q_heads, 4);
  EXPECT_EQ(info.num_kv_heads, 2);
  EXPECT_EQ(info.max_position_embeddings, 8192);
  EXPECT_EQ(info.rope_theta, 10000.0);
  EXPECT_STREQ(info.layout, "neox");
  EXPECT_STREQ(info.dtype, "bf16");
  EXPECT_STREQ(info.rope_type, "default");
  EXPECT_STREQ(info.input, "packed_qkv");
  EXPECT_STREQ(info.output, "inplace");
  EXPECT_STREQ(info.positions, "explicit");
  EXPECT_STREQ(info.cache_dtype, "auto");
  EXPECT_EQ(info.qkv_bias, 1);
  EXPECT_EQ(info.copy_v, 1);  // packed with a bias: v needs its bias
  EXPECT_EQ(info.qk_norm, 0);
  EXPECT_EQ(info.qk_norm_weight, nullptr);
  EXPECT_EQ(std::string(info.spec_hash), spec_hash(parse_spec(j.dump())).hex());

  SpecFields f = paged_fields("fp8_e5m2", "block_tables", "hnd");
  f.positions = "varlen";
  f.qk_norm = {{"type", "rmsnorm"}};
  ASSERT_EQ(ropejit_spec_describe(test::spec_json(f).dump().c_str(), &info), ROPEJIT_STATUS_OK) << ropejit_last_error();
  EXPECT_STREQ(info.output, "paged_kv");
  EXPECT_STREQ(info.cache_layout, "hnd");
  EXPECT_STREQ(info.cache_dtype, "fp8_e5m2");
  EXPECT_STREQ(info.cache_index, "block_tables");
  EXPECT_EQ(info.page_size, 4);
  EXPECT_EQ(info.copy_v, 1);  // paged_kv: v goes into the V cache
  EXPECT_EQ(info.qk_norm, 1);
  EXPECT_STREQ(info.qk_norm_weight, "per_head");

  SpecFields mrope = small_fields();
  mrope.positions = "mrope";
  mrope.mrope_section = {16, 8, 8};
  mrope.mrope_interleaved = true;
  ASSERT_EQ(ropejit_spec_describe(test::spec_json(mrope).dump().c_str(), &info), ROPEJIT_STATUS_OK);
  EXPECT_EQ(info.mrope_section[0], 16);
  EXPECT_EQ(info.mrope_section[2], 8);
  EXPECT_EQ(info.mrope_interleaved, 1);
  EXPECT_EQ(info.copy_v, 0);

  char* canonical = nullptr;
  ASSERT_EQ(ropejit_spec_canonical_json(j.dump().c_str(), &canonical), ROPEJIT_STATUS_OK);
  EXPECT_EQ(std::string(canonical), canonical_json(parse_spec(j.dump())));
  std::free(canonical);
}

TEST(IntrospectCApi, FreqsAreWhatKernelsBake) {
  for (const json& rope : test::rope_blocks_for_every_type(64, 8192)) {
    SpecFields f = small_fields();
    f.rope = rope;
    const std::string text = test::spec_json(f).dump();
    const FreqTable expected = compute_freqs(parse_spec(text), FreqMode::hf_fp32);
    const bool longrope = rope["rope_type"] == "longrope";
    for (int long_table : {0, 1}) {
      if (long_table && !longrope) continue;
      SCOPED_TRACE(rope.dump() + (long_table ? " long" : ""));
      std::vector<double> inv_freq(32, -1.0);
      size_t count = 0;
      double attention = 0, softmax = 0;
      ASSERT_EQ(ropejit_spec_freqs(text.c_str(), long_table, inv_freq.data(), inv_freq.size(), &count, &attention,
                                   &softmax),
                ROPEJIT_STATUS_OK)
          << ropejit_last_error();
      EXPECT_EQ(count, 32u);
      EXPECT_EQ(inv_freq, long_table ? expected.inv_freq_long : expected.inv_freq);
      EXPECT_EQ(attention, long_table ? expected.attention_factor_long : expected.attention_factor);
      EXPECT_EQ(softmax, 1.0);
    }
  }
  const std::string deepseek = canonical_json(load_spec_file(test::spec_path("deepseek-v3")));
  const FreqTable expected = compute_freqs(parse_spec(deepseek), FreqMode::hf_fp32);
  ASSERT_TRUE(expected.yarn_attention_softmax_scale.has_value());
  size_t count = 0;
  double attention = 0, softmax = 0;
  ASSERT_EQ(ropejit_spec_freqs(deepseek.c_str(), 0, nullptr, 0, &count, &attention, &softmax), ROPEJIT_STATUS_OK)
      << ropejit_last_error();  // a size query
  EXPECT_EQ(count, 32u);
  EXPECT_EQ(attention, expected.attention_factor);
  EXPECT_EQ(softmax, *expected.yarn_attention_softmax_scale);
  EXPECT_GT(softmax, 1.8);  // m(40, 1)^2 = (0.1 ln 40 + 1)^2
}

TEST(IntrospectCApi, LaunchFieldsIterateAsInCpp) {
  const SpecFields f = paged_fields("fp8_e4m3", "slot_mapping", "nhd");
  const std::string text = test::spec_json(f).dump();
  const std::vector<LaunchField> expected = launch_fields(test::make_spec(f));
  ropejit_launch_field field{};
  field.struct_size = sizeof field;
  size_t i = 0;
  for (; ropejit_spec_launch_field(text.c_str(), i, &field) == ROPEJIT_STATUS_OK && field.name; ++i) {
    ASSERT_LT(i, expected.size());
    const LaunchField& e = expected[i];
    EXPECT_EQ(field.name, e.name);
    EXPECT_EQ(int(field.use), int(e.use)) << e.name;
    EXPECT_EQ(field.dtype ? std::string_view(field.dtype) : std::string_view(), e.dtype) << e.name;
    ASSERT_EQ(size_t(field.rank), e.dims.size()) << e.name;
    for (int d = 0; d < 4; ++d)
      EXPECT_EQ(field.dims[d] ? std::string_view(field.dims[d]) : std::string_view(),
                d < field.rank ? e.dims[d] : std::string_view())
          << e.name;
  }
  EXPECT_EQ(i, expected.size()) << ropejit_last_error();
  EXPECT_EQ(field.name, nullptr);
  EXPECT_EQ(field.rank, 0);
}

TEST(IntrospectCApi, StructLayoutsAreListed) {
  for (const auto& [type, size, first, last] :
       {std::tuple<const char*, size_t, const char*, const char*>{"ropejit_spec_info", sizeof(ropejit_spec_info),
                                                                  "struct_size", "from_rope_type"},
        {"ropejit_launch_field", sizeof(ropejit_launch_field), "struct_size", "dims"}}) {
    size_t i = 0, offset = 0;
    const char* name = nullptr;
    std::string previous;
    while ((name = ropejit_struct_field(type, i, &offset))) previous = name, ++i;
    EXPECT_STREQ(ropejit_struct_field(type, 0, nullptr), first);
    EXPECT_EQ(previous, last) << type;
    EXPECT_EQ(offset, size) << type;
  }
  size_t offset = 0;
  ropejit_struct_field("ropejit_spec_info", 1, &offset);
  EXPECT_EQ(offset, offsetof(ropejit_spec_info, head_dim));
  ropejit_struct_field("ropejit_spec_info", 21, &offset);
  EXPECT_EQ(offset, offsetof(ropejit_spec_info, mrope_section));
}

TEST(IntrospectCApi, ErrorsNameTheFieldOrArgument) {
  // An invalid spec: the message ropejit_kernel_get gives, naming the field.
  ropejit_runtime_options options;
  ropejit_runtime_options_init(&options);
  options.backend = ROPEJIT_BACKEND_HOST;
  options.disk_cache = 0;
  ropejit_runtime* rt = nullptr;
  const bool have_runtime = ropejit_runtime_create(&options, &rt) == ROPEJIT_STATUS_OK;
  json bad = test::spec_json({});
  bad["head_dim"] = 0;
  for (const std::string& text : {bad.dump(), std::string("{\"head_dim\": 64,")}) {
    SCOPED_TRACE(text);
    std::string expected;
    try {
      parse_spec(text);
    } catch (const Error& e) {
      expected = e.what();
    }
    if (have_runtime) {
      ropejit_kernel* kernel = nullptr;
      ASSERT_EQ(ropejit_kernel_get(rt, text.c_str(), &kernel), ROPEJIT_STATUS_INVALID_SPEC);
      EXPECT_EQ(expected, ropejit_last_error());
    }
    ropejit_spec_info info{};
    info.struct_size = sizeof info;
    EXPECT_EQ(ropejit_spec_describe(text.c_str(), &info), ROPEJIT_STATUS_INVALID_SPEC);
    EXPECT_EQ(expected, ropejit_last_error());
    size_t count = 7;
    EXPECT_EQ(ropejit_spec_freqs(text.c_str(), 0, nullptr, 0, &count, nullptr, nullptr), ROPEJIT_STATUS_INVALID_SPEC);
    EXPECT_EQ(expected, ropejit_last_error());
    EXPECT_EQ(count, 0u);
    ropejit_launch_field field{};
    field.struct_size = sizeof field;
    EXPECT_EQ(ropejit_spec_launch_field(text.c_str(), 0, &field), ROPEJIT_STATUS_INVALID_SPEC);
    EXPECT_EQ(expected, ropejit_last_error());
    char* json_out = reinterpret_cast<char*>(1);
    EXPECT_EQ(ropejit_spec_canonical_json(text.c_str(), &json_out), ROPEJIT_STATUS_INVALID_SPEC);
    EXPECT_EQ(json_out, nullptr);
    EXPECT_EQ(expected, ropejit_last_error());
    const char* named = text == bad.dump() ? "/head_dim: 0 is not allowed" : "line 1, column 17";
    EXPECT_NE(std::string(ropejit_last_error()).find(named), std::string::npos) << ropejit_last_error();
  }
  ropejit_runtime_destroy(rt);

  const std::string good = test::spec_json({}).dump();
  auto expect_invalid_argument = [](ropejit_status status, const char* fragment) {
    EXPECT_EQ(status, ROPEJIT_STATUS_INVALID_ARGUMENT) << fragment;
    EXPECT_NE(std::string(ropejit_last_error()).find(fragment), std::string::npos) << ropejit_last_error();
  };
  ropejit_spec_info info{};
  info.struct_size = sizeof info;
  expect_invalid_argument(ropejit_spec_describe(nullptr, &info), "spec_json is null");
  expect_invalid_argument(ropejit_spec_describe(good.c_str(), nullptr), "info (the output) is null");
  info.struct_size = 0;
  expect_invalid_argument(ropejit_spec_describe(good.c_str(), &info), "ropejit_spec_info.struct_size is 0");
  expect_invalid_argument(ropejit_spec_canonical_json(good.c_str(), nullptr), "json (the output) is null");
  ropejit_launch_field field{};
  expect_invalid_argument(ropejit_spec_launch_field(good.c_str(), 0, &field), "ropejit_launch_field.struct_size");
  expect_invalid_argument(ropejit_spec_launch_field(good.c_str(), 0, nullptr), "field (the output) is null");

  std::vector<double> inv_freq(64);
  size_t count = 0;
  expect_invalid_argument(ropejit_spec_freqs(good.c_str(), 0, inv_freq.data(), 63, &count, nullptr, nullptr),
                          "capacity 63 is not allowed");
  EXPECT_EQ(count, 64u);  // what is needed
  expect_invalid_argument(ropejit_spec_freqs(good.c_str(), 0, nullptr, 64, &count, nullptr, nullptr),
                          "inv_freq is null");
  expect_invalid_argument(ropejit_spec_freqs(good.c_str(), 0, inv_freq.data(), 64, nullptr, nullptr, nullptr),
                          "count (the output) is null");
  expect_invalid_argument(ropejit_spec_freqs(good.c_str(), 1, inv_freq.data(), 64, &count, nullptr, nullptr),
                          "long_table 1 is not allowed: rope_type default");
  expect_invalid_argument(ropejit_spec_freqs(good.c_str(), 2, inv_freq.data(), 64, &count, nullptr, nullptr),
                          "long_table 2 is not allowed");
}
