#pragma once
// Internal: the spec layer's op table (docs/architecture.md §11): what reading, writing and the
// schema do for an op beyond the common fields. Each op's row lives in its own file, spec/src/op_<op>.cpp (op rope's in spec_ops.cpp).
#include <nlohmann/json.hpp>

#include "spec_reader.h"

namespace ropejit {
class HfContext;
}

namespace ropejit::spec_detail {

/// One op's part of spec reading, spec_to_json and the schema.
struct SpecOp {
  OpKind op;
  const char* summary;       ///< what the op does, for the schema's "op" description
  const char* block;         ///< its own top-level block ("rerotate"), or null; refused under other ops
  const char* from_pointer;  ///< JSON pointer of its from_rope block (OpFacts::from_rope), or null
  /// Reads its block and refuses what the op rules out; runs after rope, io and qk_norm are read.
  void (*read)(const json& document, Reader& reader, Spec& spec);
  /// Adds its block to spec_to_json's object; null: nothing of its own.
  void (*write)(const Spec& spec, nlohmann::ordered_json& out);
  /// Adds its block to the schema's top-level properties; null: nothing of its own.
  void (*schema)(nlohmann::ordered_json& properties);
  /// HF config keys the import copies into its block under the same names (null-terminated), or null.
  const char* const* hf_keys = nullptr;
  /// Reshapes an HF import for the op (MLA: the whole q head, the one latent head, the paged
  /// output) from the text model's config; null: the rope spec's shape serves.
  void (*import_hf)(const json& text, HfContext& ctx, json& spec) = nullptr;
};

/// Every parameter of `rope`'s type, in table order; an unset one written as its default.
void put_rope_fields(nlohmann::ordered_json& out, const RopeParams& rope, int64_t max_positions);

/// The row of `op`.
const SpecOp& spec_op(OpKind op);

/// Every op's own block key (the spec's top-level keys include them).
std::vector<std::string_view> op_block_keys();

/// An op over one tensor's heads in place (attn_temperature, inverse_rope): refuses another
/// io.input or io.output, a bias, mrope positions and a qk_norm block, each naming `when`.
void refuse_io_of_q_inplace_op(const json& document, Reader& reader, const Spec& spec, const char* when);

/// SpecOp::read of an op that rotates one tensor's heads in place (inverse_rope, rope_tensor):
/// what refuse_io_of_q_inplace_op refuses, a copied v, and rope types whose frequencies depend on
/// the run length (their launch carries none), each naming the op and its direction.
void read_one_tensor_rotation(const json& document, Reader& reader, Spec& spec);

/// Refuses the block of an op other than the spec's (`"rerotate": {...}` under op rope).
void refuse_other_op_blocks(const json& document, Reader& reader, const Spec& spec);

}  // namespace ropejit::spec_detail
