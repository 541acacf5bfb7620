#pragma once
// Internal: the reader of spec validation (ropejit/json_fields.h, collecting every problem,
// each named by its JSON pointer, value and allowed set) and the readers of the io and qk_norm
// blocks, shared by spec_validate.cpp (top level, rope) and spec_validate_io.cpp (io, qk_norm,
// the derived-frequency check) and spec_validate_cache.cpp (the engines' cache forms).
#include <string>
#include <string_view>

#include "ropejit/json_fields.h"
#include "ropejit/spec.h"
#include "spec_json.h"

namespace ropejit::spec_detail {

using nlohmann::json;

// The spec validator's reader: core's JsonFields, collecting every issue (spec_from_json).
using Reader = JsonFields;

inline const json* member(const json& object, std::string_view key) {
  auto it = object.find(std::string(key));
  return it == object.end() ? nullptr : &*it;
}

/// A rope block at JSON pointer `base` ("/rope", "/rerotate/from"); rotary_dim and
/// max_positions are 0 when unknown.
RopeParams read_rope(const json& block, Reader& reader, int rotary_dim, int64_t max_positions,
                     const std::string& base);

/// The io block (absent: the defaults), with io.mrope_* checked against rotary_dim and the rope
/// type; an op whose kernel reads no v copies none.
IoSpec read_io(const json* block, Reader& reader, int rotary_dim, RopeType rope_type, OpKind op);

/// io.axes (positions axes) into spec.io.axes, checked against rotary_dim and the rope block;
/// `io_block` is the io object (null when absent). Absent theta: rope_theta for every axis.
void read_axes(const json* io_block, Reader& reader, Spec& spec);
/// Writes io.axes into canonical JSON's io object.
void write_axes(const Spec& spec, nlohmann::ordered_json& io);

/// The qk_norm block (present: enabled).
QkNorm read_qk_norm(const json& block, Reader& reader);

/// The cache forms an engine reads (io.cache_layout fp8_ds_mla / fp8_indexer / fp8_deepseek_v4,
/// io.cache_dtype nvfp4): each against the op that writes it and the spec's other fields.
void check_cache_forms(Reader& reader, const Spec& spec);

/// Adds an issue when the spec's baked frequencies or attention factor are no finite float32 > 0
/// (and those of the op's from_rope block).
void check_derived_frequencies(const Spec& spec, Reader& reader);

}  // namespace ropejit::spec_detail
