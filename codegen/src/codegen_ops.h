#pragma once
// Internal: the codegen layer's op table (docs/architecture.md §11) and the text helpers an
// op's generated lines use. Each op's row lives in its own file, codegen/src/op_<op>.cpp (op rope's in source.cpp).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "ropejit/config.h"
#include "ropejit/source.h"

namespace ropejit::codegen_detail {

/// "padded_bhsd" -> "PaddedBhsd".
std::string camel_case(std::string_view name);
/// Exact float literal (hex) of the constant `name` (`index` >= 0: an element of that table).
std::string float_literal(std::string_view name, double v, int index = -1);

/// Appends lines of the generated source's Traits struct and its baked tables.
struct SourceText {
  std::string& text;
  /// `static constexpr <type> <name> = <value>;`
  template <class V>
  void line(const char* type, const char* name, V value) {
    text += fmt::format("  static constexpr {} {} = {};\n", type, name, value);
  }
  /// A float constant, bit exact.
  void float_line(const char* name, double value) {
    text += fmt::format("  static constexpr float {} = {};\n", name, float_literal(name, value));
  }
  /// One flag per row of an enum table (kRopeDynamic, ...): a new row needs no edit here.
  template <class Form>
  void flags(std::string_view prefix, Form chosen) {
    for (const auto& row : enum_table<Form>())
      text += fmt::format("  static constexpr bool k{}{} = {};\n", prefix, camel_case(row.name), row.value == chosen);
  }
  /// A baked `__device__ const float name[]` table.
  void table(const char* name, const std::vector<double>& values);
};

/// One op's part of planning and generating a kernel.
struct CodegenOp {
  OpKind op;
  /// templates/ropejit/<kernel>.cuh, whose entry is ropejit::<kernel>_kernel<Traits>.
  const char* kernel;
  /// rotary_tail_moves: the pass-through tail [d, D) is copied by the kernel.
  bool (*tail_moves)(const Spec& spec);
  /// work_shape of a valid (spec, config).
  WorkShape (*work_shape)(const Spec& spec, const Config& config);
  /// Its frequency Traits lines (kRotatedPairs, attention factors, ...).
  void (*traits)(const Plan& plan, SourceText& out);
  /// Its baked tables; returns the kernel call's arguments after `p`.
  std::string (*tables)(const Plan& plan, SourceText& out);
  /// Its block-shared cos/sin (angles.cuh); null: none.
  SharedAngleShape (*shared_angles)(const Plan& plan) = nullptr;
  /// Why its kernel cannot take a (spec, config) with loads ahead (Config::ahead), or nullopt;
  /// null: it has no such path.
  std::optional<std::string> (*no_loads_ahead)(const Spec& spec, const Config& config) = nullptr;
  /// Its own choice of default_config's heads a thread, made after the generic one and before
  /// loads ahead are weighed (`c` holds the generic choice); null: the generic one stands.
  void (*default_heads)(const Spec& spec, Config& c) = nullptr;
};

/// Op rope's kernel paths without loads ahead (rope.cuh rope_heads): the all-heads norm, a
/// thread owning whole QK-norm heads, and the QK-norm's role slots; inverse_rope's too.
std::optional<std::string> rope_no_loads_ahead(const Spec& spec, const Config& config);
/// For an op whose kernel takes loads ahead on every shape (mla_append, rerotate).
inline std::optional<std::string> loads_ahead_always(const Spec&, const Config&) { return std::nullopt; }

/// Op rope's default heads a thread with an FP8 q_out or a quantized cache: a kv head's q heads,
/// its k and its v (role slots).
void rope_default_heads(const Spec& spec, Config& c);

/// The row of `op`.
const CodegenOp& codegen_op(OpKind op);

/// Op rope's frequency Traits lines (kRotatedPairs, attention factors): every op of rope.cuh.
void rope_frequency_traits(const Plan& plan, SourceText& out);
/// Op rope's baked inv_freq tables; returns the kernel call's arguments after `p`.
std::string rope_frequency_tables(const Plan& plan, SourceText& out);

/// rope.cuh's shape for an op over one tensor's heads in place (inverse_rope, rope_tensor):
/// kNumKvHeads 0, no copied v, bias or norm; only each head's rotating lanes (the pass-through
/// part stays where it is).
WorkShape one_tensor_work_shape(const Spec& spec, const Config& c);
/// The block-shared cos/sin of one_tensor_work_shape.
SharedAngleShape one_tensor_shared_angles(const Plan& plan);

}  // namespace ropejit::codegen_detail
