// Op mla_append's row of the spec layer's op table (Multi-head Latent Attention: DeepSeek-V2/V3/R1,
// Kimi K2): the `mla_append` block (kv_lora_rank) and what the op rules out. q is [T, Hq, head_dim]
// with its rope part the spec's rotary slice (DeepSeek: trailing, q = [q_nope | q_pe]); the latent
// cache row is [kv_c | rotated k_pe], kv_lora_rank + rotary_dim elements, in a paged cache.
#include <fmt/core.h>

#include "hf_context.h"
#include "spec_ops.h"

namespace ropejit::spec_detail {

namespace {

constexpr const char* kWhen = "when op is mla_append (q rotated, the latent row appended to a paged cache)";

// vLLM's fp8_ds_mla row [kv_lora_rank FP8 e4m3 codes | a float32 scale per 128 | k_pe in the
// dtype]: the codes need cache_dtype fp8_e4m3 and the launch's scales; rows and their parts stay
// 16-byte aligned for the kernel's vectors (kv_lora_rank a multiple of 512, rotary_dim of 8).
void check_ds_mla(Reader& reader, const Spec& spec) {
  constexpr const char* kWhy = "with cache_layout fp8_ds_mla";
  if (spec.io.cache_dtype != CacheDType::fp8_e4m3)
    reader.not_allowed("/io/cache_dtype", std::string(to_string(spec.io.cache_dtype)),
                       fmt::format("\"fp8_e4m3\" {} (its latent codes)", kWhy));
  if (spec.io.cache_scale != QScale::static_)
    reader.not_allowed("/io/cache_scale", std::string(to_string(spec.io.cache_scale)),
                       fmt::format("\"static\" or absent {} (the row carries a scale per {} latent values, computed "
                                   "in the launch)", kWhy, kDsMlaTile));
  if (spec.dtype == DType::fp32)
    reader.not_allowed("/dtype", std::string("fp32"), fmt::format("\"bf16\" or \"fp16\" {} (k_pe is stored in the dtype)", kWhy));
  if (spec.mla_append.kv_lora_rank % (4 * kDsMlaTile) != 0)
    reader.not_allowed("/mla_append/kv_lora_rank", json(spec.mla_append.kv_lora_rank),
                       fmt::format("a multiple of {} {} (vLLM's 512: the row's parts stay 16-byte aligned)",
                                   4 * kDsMlaTile, kWhy));
  if (spec.rotary_dim % 8 != 0)
    reader.not_allowed("/rotary_dim", json(spec.rotary_dim),
                       fmt::format("a multiple of 8 {} (vLLM's 64: rows stay 16-byte aligned)", kWhy));
}

void read_op(const json& document, Reader& reader, Spec& spec) {
  if (const json* block = member(document, "mla_append")) {
    if (!block->is_object()) {
      reader.not_allowed("/mla_append", *block, "an object such as {\"kv_lora_rank\": 512}");
    } else {
      reader.check_keys(*block, "/mla_append", {"kv_lora_rank", "concat_k", "absorbed_q"});
      if (const json* v = member(*block, "kv_lora_rank")) {
        const auto rank = reader.integer(*v, "/mla_append/kv_lora_rank", 8, 4096);
        if (rank && *rank % 8 != 0)
          reader.not_allowed("/mla_append/kv_lora_rank", *v,
                             "a multiple of 8 in [8, 4096] (the latent row is copied in vectors of up to 8)");
        else if (rank)
          spec.mla_append.kv_lora_rank = static_cast<int>(*rank);
      }
      if (const json* v = member(*block, "concat_k"))
        if (const auto concat = reader.boolean(*v, "/mla_append/concat_k")) spec.mla_append.concat_k = *concat;
      if (const json* v = member(*block, "absorbed_q"))
        if (const auto absorbed = reader.boolean(*v, "/mla_append/absorbed_q")) spec.mla_append.absorbed_q = *absorbed;
    }
  }
  if (spec.io.output != OutputForm::paged_kv)
    reader.not_allowed("/io/output", std::string(to_string(spec.io.output)), fmt::format("\"paged_kv\" {}", kWhen));
  if (const json* io = member(document, "io")) {
    if (const json* v = member(*io, "input"); v && spec.io.input != InputForm::separate)
      reader.not_allowed("/io/input", *v, fmt::format("\"separate\" or absent {}", kWhen));
    if (const json* v = member(*io, "qkv_bias"); v && spec.io.qkv_bias)
      reader.not_allowed("/io/qkv_bias", *v, fmt::format("false {}", kWhen));
    if (per_pair_positions(spec))
      reader.not_allowed("/io/positions", std::string(to_string(spec.io.positions)),
                         fmt::format("explicit, varlen or offset {}", kWhen));
  }
  if (const json* v = member(document, "qk_norm")) reader.not_allowed("/qk_norm", *v, fmt::format("absent {}", kWhen));
  if (spec.mla_append.concat_k && spec.rotary_dim == spec.head_dim)
    reader.not_allowed("/mla_append/concat_k", json(true),
                       fmt::format("false when rotary_dim equals head_dim {} (k_nope would have no elements)",
                                   spec.head_dim));
  if (spec.mla_append.absorbed_q) {
    if (spec.io.q_output != QOutput::separate)
      reader.not_allowed("/io/q_output", std::string(to_string(spec.io.q_output)),
                         "\"separate\" when mla_append.absorbed_q is true (q_out is [T, Hq, kv_lora_rank + rotary_dim])");
    if (spec.rotary_slice != RotarySlice::trailing)
      reader.not_allowed("/rotary_slice", std::string(to_string(spec.rotary_slice)),
                         "\"trailing\" when mla_append.absorbed_q is true (q_out is [q_latent | q_pe])");
    if (spec.mla_append.concat_k)
      reader.not_allowed("/mla_append/concat_k", json(true),
                         "false when mla_append.absorbed_q is true (prefill's k and decode's absorbed q are "
                         "separate launches)");
  }
  if (ds_mla_cache(spec)) check_ds_mla(reader, spec);
  if (spec.num_kv_heads != 1)
    reader.not_allowed("/num_kv_heads", json(spec.num_kv_heads), fmt::format("1 (the one latent head) {}", kWhen));
}

void write_op(const Spec& spec, nlohmann::ordered_json& out) {
  out["mla_append"] = {{"kv_lora_rank", spec.mla_append.kv_lora_rank}};
  if (spec.mla_append.concat_k) out["mla_append"]["concat_k"] = true;  // canonical only when set: old hashes hold
  if (spec.mla_append.absorbed_q) out["mla_append"]["absorbed_q"] = true;
}

void schema_op(nlohmann::ordered_json& properties) {
  properties["mla_append"] = {
      {"description", "op mla_append only: the latent's width (the cache row is kv_lora_rank + rotary_dim elements)"},
      {"type", "object"},
      {"properties",
       {{"kv_lora_rank",
         {{"description", "default 512; a multiple of 8"}, {"type", "integer"}, {"minimum", 8}, {"maximum", 4096}}},
        {"concat_k",
         {{"description",
           "prefill's concat_mla_k in the same launch: k_out [T, Hq, head_dim] from k_nope [T, Hq, head_dim - "
           "rotary_dim] and the rotated k_pe broadcast to every head; default false"},
          {"type", "boolean"}}},
        {"absorbed_q",
         {{"description",
           "absorbed-weight decode: q_out [T, Hq, kv_lora_rank + rotary_dim] = each head's q_latent (q_nope "
           "times W_UK, given) then its rotated q_pe; needs io.q_output separate and rotary_slice trailing; "
           "default false"},
          {"type", "boolean"}}}}},
      {"additionalProperties", false}};
}

constexpr const char* kHfKeys[] = {"kv_lora_rank", nullptr};  // DeepseekV3Config's

// The family row imports MLA's rope part (head_dim = qk_rope_head_dim); the op takes q's whole
// heads [q_nope | q_pe] (qk_nope_head_dim + qk_rope_head_dim, the rope part trailing), the one
// latent kv head and the paged latent cache with defaults (page_size 64, the spec's dtype, a slot
// mapping: edit them for the engine's cache).
void import_hf(const json& text, HfContext& ctx, json& spec) {
  const json* nope = HfContext::member(text, "qk_nope_head_dim");
  const json* rope = HfContext::member(text, "qk_rope_head_dim");
  if (!nope || !rope) {
    ctx.error(!nope ? "qk_nope_head_dim" : "qk_rope_head_dim", "/head_dim",
              "missing: op mla_append needs qk_nope_head_dim and qk_rope_head_dim (a Multi-head Latent "
              "Attention config: DeepSeek-V2/V3, Kimi K2)");
    return;
  }
  const auto nope_dim = ctx.integer(*nope, ctx.path("qk_nope_head_dim"), 1, "/head_dim");
  const auto rope_dim = ctx.integer(*rope, ctx.path("qk_rope_head_dim"), 2, "/rotary_dim");
  if (!nope_dim || !rope_dim) return;
  spec["head_dim"] = *nope_dim + *rope_dim;
  ctx.source("/head_dim", ctx.path("qk_nope_head_dim") + " + " + ctx.path("qk_rope_head_dim"));
  spec["rotary_dim"] = *rope_dim;
  ctx.source("/rotary_dim", ctx.path("qk_rope_head_dim"));
  spec.erase("partial_rotary_factor");
  spec["rotary_slice"] = "trailing";
  spec["num_kv_heads"] = 1;  // the latent row, shared by every head
  json io = spec.value("io", json::object());
  io["output"] = "paged_kv";
  if (!io.contains("page_size")) io["page_size"] = 64;  // FlashMLA's page; vLLM's MLA backends take 16 or 64
  spec["io"] = io;
}

}  // namespace

extern const SpecOp kSpecOp_mla_append = {
    OpKind::mla_append,
    "mla_append: rotate q's rope part and the shared rope key k_pe, and write each token's latent cache row "
    "[kv_c | rotated k_pe] into a paged cache (Multi-head Latent Attention: DeepSeek-V2/V3/R1, Kimi K2)",
    "mla_append", nullptr, read_op, write_op, schema_op, kHfKeys, import_hf};

}  // namespace ropejit::spec_detail
