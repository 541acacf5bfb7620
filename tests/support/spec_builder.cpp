#include "support/spec_builder.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace ropejit::test {

nlohmann::json spec_json(const SpecFields& f) {
  nlohmann::json io = {{"input", f.input}, {"output", f.output}, {"qkv_bias", f.qkv_bias},
                       {"positions", f.positions}};
  if (f.copy_v || (f.input == "packed_qkv" && f.output != "inplace")) io["copy_v"] = true;
  if (!f.mrope_section.empty()) io["mrope_section"] = f.mrope_section;
  if (f.mrope_interleaved) io["mrope_interleaved"] = true;
  if (!f.io_extra.is_null()) io.update(f.io_extra);
  nlohmann::json spec = {{"name", f.name},
                         {"head_dim", f.head_dim},
                         {"rotary_dim", f.rotary_dim},
                         {"num_q_heads", f.num_q_heads},
                         {"num_kv_heads", f.num_kv_heads},
                         {"layout", f.layout},
                         {"dtype", f.dtype},
                         {"angle", f.angle},
                         {"max_position_embeddings", f.max_position_embeddings},
                         {"rope", f.rope},
                         {"io", io}};
  if (!f.qk_norm.is_null()) spec["qk_norm"] = f.qk_norm;
  if (!f.rotary_slice.empty()) spec["rotary_slice"] = f.rotary_slice;
  if (f.op != "rope") spec["op"] = f.op;
  if (!f.from_rope.is_null()) spec["rerotate"] = {{"from", f.from_rope}};
  return spec;
}

void set_heads(SpecFields& f, int head_dim, int rotary_dim, const std::string& dtype, const std::string& layout) {
  f.head_dim = head_dim;
  f.rotary_dim = rotary_dim;
  f.dtype = dtype;
  f.layout = layout;
}

Spec make_spec(const SpecFields& f) { return parse_spec(spec_json(f).dump()); }

std::string spec_error(const nlohmann::json& spec) {
  try {
    parse_spec(spec.dump());
  } catch (const SpecError& e) {
    return e.what();
  }
  return "accepted";
}

std::vector<std::string> spec_files() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(source_dir() + "/specs"))
    if (e.path().extension() == ".json" && e.path().filename() != "schema.json") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<nlohmann::json> rope_blocks_for_every_type(int d, int64_t m) {
  std::vector<double> short_factor(d / 2), long_factor(d / 2);
  for (int i = 0; i < d / 2; ++i) {
    short_factor[i] = 1.0 + 0.05 * i;
    long_factor[i] = 1.0 + 1.5 * i;
  }
  const int64_t o = std::max<int64_t>(m / 4, 16);
  return {
      {{"rope_type", "default"}, {"rope_theta", 10000.0}},
      {{"rope_type", "linear"}, {"rope_theta", 10000.0}, {"factor", 4.0}},
      {{"rope_type", "ntk"}, {"rope_theta", 10000.0}, {"alpha", 8.0}},
      {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}, {"factor", 2.0}},
      {{"rope_type", "yarn"}, {"rope_theta", 1000000.0}, {"factor", 4.0}, {"original_max_position_embeddings", o}},
      {{"rope_type", "longrope"}, {"rope_theta", 10000.0}, {"short_factor", short_factor},
       {"long_factor", long_factor}, {"original_max_position_embeddings", o}},
      {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0}, {"low_freq_factor", 1.0},
       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", o}},
      {{"rope_type", "proportional"}, {"rope_theta", 1000000.0}, {"factor", 2.0}, {"partial_rotary_factor", 0.25}},
      // GPT-OSS: YaRN's correction range kept fractional.
      {{"rope_type", "yarn"}, {"rope_theta", 150000.0}, {"factor", 32.0}, {"original_max_position_embeddings", o},
       {"truncate", false}},
      // PhiMoE: each table with its own attention factor.
      {{"rope_type", "longrope"}, {"rope_theta", 10000.0}, {"short_factor", short_factor},
       {"long_factor", long_factor}, {"original_max_position_embeddings", o}, {"short_mscale", 1.25},
       {"long_mscale", 1.5}},
  };
}

void set_rope(SpecFields& f, const nlohmann::json& rope) {
  f.rope = rope;
  if (rope.value("rope_type", "") == "proportional") f.rotary_dim = f.head_dim;
}

}  // namespace ropejit::test
