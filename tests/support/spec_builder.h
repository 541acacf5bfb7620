#pragma once
// Test helper: build specs from a few fields (through the real parser) and list specs/.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropejit/spec.h"
#include "support/repo_paths.h"

namespace ropejit::test {

/// The fields tests vary; everything goes through parse_spec.
struct SpecFields {
  std::string name = "test";
  int head_dim = 128;
  int rotary_dim = 128;
  int num_q_heads = 8;
  int num_kv_heads = 2;
  std::string layout = "neox";
  std::string rotary_slice;        ///< written when not empty ("leading" or "trailing")
  std::string dtype = "bf16";
  std::string angle = "fp32";
  int64_t max_position_embeddings = 8192;
  nlohmann::json rope = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
  std::string input = "separate";
  std::string output = "inplace";
  bool qkv_bias = false;
  bool copy_v = false;
  std::string positions = "explicit";
  std::vector<int> mrope_section;  ///< io.mrope_section when not empty
  bool mrope_interleaved = false;  ///< io.mrope_interleaved when true
  nlohmann::json qk_norm;          ///< the qk_norm block when not null
  nlohmann::json io_extra;         ///< more io keys (paged_kv's) when not null
  std::string op = "rope";         ///< written when not "rope"
  nlohmann::json from_rope;    ///< op rerotate: the rerotate.from block when not null
};

/// Sets the head shape tests vary together: head_dim, rotary_dim, element type and pair layout.
void set_heads(SpecFields& f, int head_dim, int rotary_dim, const std::string& dtype, const std::string& layout);

/// The spec JSON of the fields.
nlohmann::json spec_json(const SpecFields& f);

/// parse_spec(spec_json(f)).
Spec make_spec(const SpecFields& f);

/// The SpecError message parse_spec gives `spec`, or "accepted".
std::string spec_error(const nlohmann::json& spec);

/// Paths of every specs/*.json except schema.json, sorted.
std::vector<std::string> spec_files();

/// One rope block per rope_type, valid for rotary_dim `d` and max positions `m` (proportional's
/// with rotary_dim == head_dim only: set_rope sees to it).
std::vector<nlohmann::json> rope_blocks_for_every_type(int d, int64_t m);

/// f.rope = rope; a proportional block's pairs span the whole head, so rotary_dim becomes head_dim.
void set_rope(SpecFields& f, const nlohmann::json& rope);

}  // namespace ropejit::test
