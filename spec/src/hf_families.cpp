// The per-model_type table of the HF import. Paths are under transformers' src/transformers/
// unless said otherwise; docs/hf-import.md "Model families" lists the same rows.
#include "hf_families.h"

namespace ropejit {

namespace {

// A row: the generic conventions, then what `edit` changes.
template <class Edit>
ModelFamily row(std::string_view type, std::string_view source, Edit edit) {
  ModelFamily family;
  family.model_type = type;
  family.source = source;
  edit(family);
  return family;
}

ModelFamily row(std::string_view type, std::string_view source) {
  return row(type, source, [](ModelFamily&) {});
}

// Falcon and its pre-transformers custom-code names (convert_custom_code_checkpoint.py).
ModelFamily falcon(std::string_view type) {
  return row(type, "models/falcon/configuration_falcon.py", [](ModelFamily& f) {
    f.hidden_keys = {"hidden_size", "n_embed"};
    f.head_dim_keys = {};  // a property: hidden_size // num_attention_heads
    f.bias_keys = {};      // `bias` also covers the grouped fused QKV: not ropejit's packed form
    f.kv_rule = KvRule::falcon;
    f.kv_keys = {"num_kv_heads", "n_head_kv"};
    f.max_default = 2048;
    f.no_rope_key = "alibi";
  });
}

// ChatGLM / GLM: interleaved pairs over the first half of each head.
ModelFamily glm(std::string_view type, std::string_view source) {
  return row(type, source, [](ModelFamily& f) {
    f.layout = Layout::interleaved;
    f.rotary_fraction_default = 0.5;
    f.bias_default = true;  // GlmConfig: attention_bias=True
  });
}

ModelFamily llama4(std::string_view type, std::string_view text_config) {
  return row(type, "models/llama4/modeling_llama4.py", [&](ModelFamily& f) {
    f.layout = Layout::interleaved;  // apply_rotary_emb: view_as_complex of (2i, 2i+1)
    f.bias_keys = {};                // Llama4TextConfig sets attention_bias = False
    f.theta_default = 500000.0;
    f.text_config = text_config;
    f.no_rope_interval = 4;  // Llama4TextConfig: no_rope_layer_interval = 4, `if not no_rope_layers`
    f.no_rope_empty_is_default = true;
    f.nope_op_key = "attn_temperature_tuning";  // modeling_llama4.py: NoPE layers scale q (default True)
    f.nope_op = OpKind::attn_temperature;
    f.nope_op_default = true;
  });
}

// `layout_key`: the families whose attention reads config.rope_interleave (neox when false).
ModelFamily deepseek(std::string_view type, std::string_view source, std::string_view layout_key = "") {
  return row(type, source, [&](ModelFamily& f) {
    f.layout_key = layout_key;
    f.layout = Layout::interleaved;  // apply_rotary_pos_emb_interleave
    f.head_dim_keys = {"qk_rope_head_dim", "head_dim"};
    f.bias_keys = {};  // MLA's low-rank projections are not a packed q/k/v
    f.rope_head_only = true;
  });
}

// DeepSeek-V3.2's lightning indexer and its kin: LayerNorm(index_head_dim, eps 1e-6, with bias) on
// k, then the rotation of each head's leading qk_rope_head_dim elements in the indexer's pairing.
ModelFamily with_indexer(ModelFamily f, Layout layout) {
  f.indexer = {true, layout, RotarySlice::leading, 1e-6};
  return f;
}

// Qwen3 and Gemma 3 families: a per-head RMSNorm of q and k before RoPE (imported as qk_norm),
// scaled by (weight_offset + w); VL rows keep the text model in text_config, with mrope.
ModelFamily qk_rmsnorm(std::string_view type, std::string_view source, double weight_offset,
                       std::string_view text_config = "", bool mrope = false) {
  return row(type, source, [&](ModelFamily& f) {
    f.qk_rmsnorm = true;
    f.qk_norm_weight_offset = weight_offset;
    f.text_config = text_config;
    f.mrope = mrope;
  });
}

// OLMo 2 and its kin: q_norm = RMSNorm(num_attention_heads * head_dim) over the whole q
// projection before the reshape into heads, k_norm over num_key_value_heads * head_dim; bias
// (attention_bias) first, RoPE after: imported as qk_norm scope all.
template <class Edit>
ModelFamily all_heads_rmsnorm(std::string_view type, std::string_view source, Edit edit) {
  return row(type, source, [&](ModelFamily& f) {
    f.qk_rmsnorm = true;
    f.qk_norm_scope = NormScope::all;
    edit(f);
  });
}

// Multimodal RoPE in contiguous sections (Qwen2-VL's recomposition_frequencies), with the section
// the modeling file's rotary takes when the rope block has none.
ModelFamily contiguous_mrope(ModelFamily f, std::vector<int> default_section) {
  f.mrope = true;
  f.mrope_default = std::move(default_section);
  return f;
}

// Qwen3-VL's text rotary (recomposition_frequencies): height and width take every third pair.
ModelFamily interleaved_mrope(ModelFamily f, std::vector<int> default_section) {
  f = contiguous_mrope(std::move(f), std::move(default_section));
  f.mrope_interleaved = true;
  return f;
}

ModelFamily unsupported(std::string_view type, std::string_view source, std::string_view why) {
  return row(type, source, [&](ModelFamily& f) { f.unsupported = why; });
}

ModelFamily not_rope(std::string_view type, std::string_view source, std::string_view why) {
  return row(type, source, [&](ModelFamily& f) { f.not_rope = why; });
}

}  // namespace

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> table{
      row("", "models/llama/modeling_llama.py"),
      row("llama", "models/llama/modeling_llama.py"),
      row("mistral", "models/mistral/modeling_mistral.py",
          [](ModelFamily& f) { f.bias_keys = {}; }),
      row("mixtral", "models/mixtral/modeling_mixtral.py",
          [](ModelFamily& f) { f.bias_keys = {}; }),
      row("qwen2", "models/qwen2/modeling_qwen2.py", [](ModelFamily& f) {
        f.bias_keys = {};  // q/k/v_proj are always built with bias=True
        f.bias_default = true;
      }),
      qk_rmsnorm("qwen3", "models/qwen3/modeling_qwen3.py", 0.0),  // Qwen3RMSNorm(head_dim)
      qk_rmsnorm("qwen3_moe", "models/qwen3_moe/modeling_qwen3_moe.py", 0.0),
      // Vision-language models: the text model's rope block carries the multimodal sections.
      // Each mrope row's default section: its modeling file's rotary (rope_parameters.get(...)).
      contiguous_mrope(row("qwen2_vl", "models/qwen2_vl/modeling_qwen2_vl.py", [](ModelFamily& f) {
        f.bias_keys = {};
        f.bias_default = true;  // Qwen2 attention: q/k/v_proj with bias
      }), {16, 24, 24}),
      contiguous_mrope(row("qwen2_5_vl", "models/qwen2_5_vl/modeling_qwen2_5_vl.py", [](ModelFamily& f) {
        f.bias_keys = {};
        f.bias_default = true;
      }), {16, 24, 24}),
      interleaved_mrope(qk_rmsnorm("qwen3_vl", "models/qwen3_vl/modeling_qwen3_vl.py", 0.0, "text_config", true),
                        {24, 20, 20}),
      interleaved_mrope(qk_rmsnorm("qwen3_vl_moe", "models/qwen3_vl_moe/modeling_qwen3_vl_moe.py", 0.0, "text_config", true),
                        {24, 20, 20}),
      // Defaults: their configuration_*.py (max_position_embeddings, rms_norm_eps, default_theta).
      all_heads_rmsnorm("olmo2", "models/olmo2/modeling_olmo2.py", [](ModelFamily& f) {
        f.max_default = 2048;
        f.rms_norm_eps_default = 1e-5;
      }),
      all_heads_rmsnorm("olmo3", "models/olmo3/modeling_olmo3.py", [](ModelFamily& f) {
        f.max_default = 2048;
        f.rms_norm_eps_default = 1e-5;
        f.theta_default = 500000.0;
        f.scaling_layer_type = "full_attention";
      }),
      all_heads_rmsnorm("flex_olmo", "models/flex_olmo/modeling_flex_olmo.py", [](ModelFamily& f) {
        f.max_default = 4096;
        f.theta_default = 500000.0;
      }),
      // Its attention layers; released checkpoints have no RoPE (rope_theta null).
      all_heads_rmsnorm("olmo_hybrid", "models/olmo_hybrid/modeling_olmo_hybrid.py",
                        [](ModelFamily& f) { f.max_default = 65536; }),
      // q_norm = RMSNorm(hidden_size), which HF only runs where it equals Hq * head_dim.
      all_heads_rmsnorm("olmoe", "models/olmoe/modeling_olmoe.py", [](ModelFamily& f) {
        f.max_default = 4096;
        f.rms_norm_eps_default = 1e-5;
        f.clip_key = "clip_qkv";
      }),
      all_heads_rmsnorm("minimax_m2", "models/minimax_m2/modeling_minimax_m2.py", [](ModelFamily& f) {
        f.bias_keys = {};  // q/k/v_proj are built with bias=False
        f.max_default = 196608;
        f.theta_default = 5000000.0;
        f.qk_norm_unread_key = "use_qk_norm";
      }),
      row("olmo", "models/olmo/modeling_olmo.py", [](ModelFamily& f) { f.clip_key = "clip_qkv"; }),
      // rotate_half is cat((x2, -x1)): a rotation by minus the angle; q_norm and k_norm (RMSNorm, no
      // weight) run after it, which equals before it (a rotation keeps a head's sum of squares).
      row("nanochat", "models/nanochat/modeling_nanochat.py", [](ModelFamily& f) {
        f.inverse_rotation = true;
        f.qk_rmsnorm = true;
        f.qk_norm_weightless = true;
      }),
      row("gemma", "models/gemma/modeling_gemma.py"),
      row("gemma2", "models/gemma2/modeling_gemma2.py"),
      // Gemma 3: Gemma3RMSNorm(head_dim) scales by (1 + w); its local (sliding) layers rotate
      // with rope_local_base_freq and no scaling: the import gives the global layers' spec.
      qk_rmsnorm("gemma3_text", "models/gemma3/modeling_gemma3.py", 1.0),
      qk_rmsnorm("gemma3", "models/gemma3/modeling_gemma3.py", 1.0, "text_config"),
      row("phi", "models/phi/modeling_phi.py", [](ModelFamily& f) {
        f.bias_keys = {};  // q/k/v always biased; kept unfused (the shipped phi-2 spec)
        f.rotary_fraction_default = 0.5;
      }),
      row("phi3", "models/phi3/modeling_phi3.py", [](ModelFamily& f) { f.bias_keys = {}; }),
      row("gpt_neox", "models/gpt_neox/modeling_gpt_neox.py", [](ModelFamily& f) {
        f.bias_keys = {};  // query_key_value interleaves q, k, v per head: not packed_qkv
        f.theta_keys = {"rope_theta", "rotary_emb_base"};
        f.rotary_fraction_default = 0.25;
      }),
      row("gptj", "models/gptj/modeling_gptj.py", [](ModelFamily& f) {
        f.layout = Layout::interleaved;  // rotate_every_two
        f.bias_keys = {};
        f.rotary_dim_default = 64;
      }),
      row("stablelm", "models/stablelm/configuration_stablelm.py", [](ModelFamily& f) {
        f.bias_keys = {"use_qkv_bias"};
        f.rotary_fraction_default = 0.25;
        f.max_default = 4096;
        f.qk_norm_key = "qk_layernorm";
      }),
      falcon("falcon"),
      falcon("RefinedWebModel"),
      falcon("RefinedWeb"),
      row("cohere", "models/cohere/modeling_cohere.py", [](ModelFamily& f) {
        f.layout = Layout::interleaved;  // rotate_half on x[..., ::2], x[..., 1::2]
        f.qk_norm_key = "use_qk_norm";
      }),
      row("cohere2", "models/cohere2/modeling_cohere2.py",
          [](ModelFamily& f) { f.layout = Layout::interleaved; }),
      llama4("llama4_text", ""),
      llama4("llama4", "text_config"),
      // V4: one KV head (K = V) of head_dim 512 whose last qk_rope_head_dim (64) rotate, interleaved;
      // rope_parameters.main for the sliding layers, .compress for the compressed ones.
      row("deepseek_v4", "models/deepseek_v4/modeling_deepseek_v4.py", [](ModelFamily& f) {
        f.layout = Layout::interleaved;          // rotate_half pairs x[0::2] with x[1::2]
        f.rotary_slice = RotarySlice::trailing;  // apply_rotary_pos_emb rotates x[..., -rope_dim:]
        f.bias_keys = {};
        f.qk_rmsnorm = true;  // q_b_norm and kv_norm, over head_dim, before RoPE
        f.qk_norm_note =
            "q_b_norm has no weight: pass ones as q's norm weight (kv_norm's weight is k's, in the storage dtype: "
            "HF keeps it in float32); HF multiplies q by its inverse RMS rounded to q's dtype, this spec in float32";
        f.rope_block_labels = {{"sliding_attention", "main"}, {"", "compress"}};
        // Its indexer's queries and compressed keys, and the compressors' keys: the compressed
        // layers' rotation (trailing, interleaved, rope block "compress"), each tensor apart.
        f.indexer = {true, Layout::interleaved, RotarySlice::trailing, 1e-6, true};
      }),
      deepseek("deepseek_v2", "models/deepseek_v2/modeling_deepseek_v2.py"),
      deepseek("deepseek_v3", "models/deepseek_v3/modeling_deepseek_v3.py", "rope_interleave"),
      // Kimi K2: its hub config's model_type kimi_k2 is read as deepseek_v3 (configuration_kimi_k25.py);
      // Kimi K2.5 keeps that text model in text_config.
      deepseek("kimi_k2", "models/kimi_k25/configuration_kimi_k25.py (kimi_k2 -> deepseek_v3)", "rope_interleave"),
      [] {
        ModelFamily f = deepseek("kimi_k25", "models/kimi_k25 (text_config: deepseek_v3)", "rope_interleave");
        f.text_config = "text_config";
        return f;
      }(),
      row("chatglm", "THUDM/glm-4-9b-chat modeling_chatglm.py (remote code)", [](ModelFamily& f) {
        f.layout = Layout::interleaved;
        f.head_dim_keys = {"kv_channels"};
        f.bias_keys = {"add_qkv_bias"};
        f.kv_rule = KvRule::chatglm;
        f.kv_keys = {"multi_query_group_num"};
        f.theta_from_rope_ratio = true;
        f.rotary_fraction_default = 0.5;
      }),
      glm("glm", "models/glm/modeling_glm.py"),
      glm("glm4", "models/glm4/modeling_glm4.py"),
      // Families that follow Llama's conventions (neox pairing, head_dim or hidden / heads,
      // num_key_value_heads), each checked against its modeling file's rotary module and apply
      // function by the zoo test (python/tests/test_zoo.py; tests/data/zoo_expected.json).
      row("EvollaModel", "models/EvollaModel"),
      row("afmoe", "models/afmoe"),
      row("arcee", "models/arcee"),
      row("aria_text", "models/aria_text"),
      row("bitnet", "models/bitnet"),
      row("chameleon", "models/chameleon"),
      row("csm", "models/csm"),
      row("csm_depth_decoder_model", "models/csm_depth_decoder_model"),
      row("cwm", "models/cwm"),
      row("deepseek_ocr2_text", "models/deepseek_ocr2_text"),
      row("dia_decoder", "models/dia_decoder"),
      row("diffllama", "models/diffllama"),
      row("doge", "models/doge"),
      row("emu3_text_model", "models/emu3_text_model"),
      row("esm", "models/esm"),
      row("esmc", "models/esmc"),
      row("eurobert", "models/eurobert"),
      row("evolla", "models/evolla"),
      row("exaone4", "models/exaone4"),
      row("exaone_moe", "models/exaone_moe"),
      row("flint", "models/flint"),
      row("gpt_neox_japanese", "models/gpt_neox_japanese"),
      row("gradium_phonon_tts", "models/gradium_phonon_tts"),
      row("granite", "models/granite"),
      row("granite_docling_text", "models/granite_docling_text"),
      row("granite_swa", "models/granite_swa"),
      row("granitemoe", "models/granitemoe"),
      row("granitemoe_swa", "models/granitemoe_swa"),
      row("granitemoeshared", "models/granitemoeshared"),
      row("gte", "models/gte"),
      row("hrm_text", "models/hrm_text"),
      row("hunyuan_v1_dense", "models/hunyuan_v1_dense"),
      row("hunyuan_v1_moe", "models/hunyuan_v1_moe"),
      row("hy_v3", "models/hy_v3"),
      row("hy_v4", "models/hy_v4"),
      row("hyperclovax", "models/hyperclovax"),
      row("idefics", "models/idefics"),
      row("jais2", "models/jais2"),
      row("jina_embeddings_v3", "models/jina_embeddings_v3"),
      row("kolibri1", "models/kolibri1"),
      row("kyutai_speech_to_text", "models/kyutai_speech_to_text"),
      row("lara_mini", "models/lara_mini"),
      row("lfm2", "models/lfm2"),
      row("lfm2_moe", "models/lfm2_moe"),
      row("mimi", "models/mimi"),
      row("mimi_decoder", "models/mimi_decoder"),
      row("minicpm3", "models/minicpm3"),
      row("ministral", "models/ministral"),
      row("ministral3", "models/ministral3"),
      row("mllama_text_model", "models/mllama_text_model"),
      row("molmo2_text", "models/molmo2_text"),
      row("moshi", "models/moshi"),
      row("muse_glimmer_assistant", "models/muse_glimmer_assistant"),
      row("muse_glimmer_text", "models/muse_glimmer_text"),
      row("muse_spark_text", "models/muse_spark_text"),
      row("nemotron", "models/nemotron"),
      row("nemotron3_5_transcribe_word_timestamp", "models/nemotron3_5_transcribe_word_timestamp"),
      row("neucodec", "models/neucodec"),
      row("nomic_bert", "models/nomic_bert"),
      row("persimmon", "models/persimmon"),
      row("pocket_tts", "models/pocket_tts"),
      row("qwen2_moe", "models/qwen2_moe"),
      row("qwen3_next", "models/qwen3_next"),
      row("qwen3_omni_moe_talker_code_predictor", "models/qwen3_omni_moe_talker_code_predictor"),
      row("seed_oss", "models/seed_oss"),
      [] {
        ModelFamily f = row("smollm3", "models/smollm3");
        f.no_rope_interval = 4;  // SmolLM3Config: no_rope_layers None -> every 4th layer NoPE
        return f;
      }(),
      row("starcoder2", "models/starcoder2"),
      row("t5_gemma_module", "models/t5_gemma_module"),
      row("timesfm2_5", "models/timesfm2_5"),
      row("unlimited_ocr_text", "models/unlimited_ocr_text"),
      row("vaultgemma", "models/vaultgemma"),
      row("voxtral_realtime_text", "models/voxtral_realtime_text"),
      row("xcodec2", "models/xcodec2"),
      row("apertus", "models/apertus"),
      row("apertus1p5_text", "models/apertus1p5_text"),
      row("bamba", "models/bamba"),
      row("beam", "models/beam"),
      row("diffusion_gemma_text", "models/diffusion_gemma_text"),
      row("dory", "models/dory"),
      row("dots1", "models/dots1"),
      row("embedding_gemma2_text", "models/embedding_gemma2_text"),
      row("falcon_h1", "models/falcon_h1"),
      row("gemma3n_text", "models/gemma3n_text"),
      row("gemma4_text", "models/gemma4_text"),
      row("gemma4_unified_text", "models/gemma4_unified_text"),
      row("gpt_oss", "models/gpt_oss"),
      row("granitemoehybrid", "models/granitemoehybrid"),
      row("laguna", "models/laguna"),
      row("lfm3", "models/lfm3"),
      row("mellum", "models/mellum"),
      row("mimo_v2_flash", "models/mimo_v2_flash"),
      row("minimax", "models/minimax"),
      row("modernbert", "models/modernbert"),
      row("modernbert-decoder", "models/modernbert_decoder"),
      row("neomme", "models/neomme"),
      row("phi4_multimodal", "models/phi4_multimodal"),
      // The talker's own config: Qwen2_5OmniRotaryEmbedding, the thinker's multimodal rotary.
      contiguous_mrope(row("qwen2_5_omni_talker", "models/qwen2_5_omni"), {16, 24, 24}),
      row("solar_open", "models/solar_open"),
      row("step3p5", "models/step3p5"),
      row("t5gemma2_text", "models/t5gemma2_text"),
      row("ultrabert", "models/ultrabert"),
      row("zaya", "models/zaya"),
      // Text models of multimodal families: their rope block may carry mrope_section.
      contiguous_mrope(row("qwen2_5_omni_text", "models/qwen2_5_omni"), {16, 24, 24}),
      contiguous_mrope(row("qwen2_vl_text", "models/qwen2_vl"), {16, 24, 24}),
      contiguous_mrope(row("qwen2_5_vl_text", "models/qwen2_5_vl"), {16, 24, 24}),
      contiguous_mrope(row("paddleocr_vl_text", "models/paddleocr_vl"), {16, 24, 24}),
      // Their text rotary recomposes the streams interleaved whatever the config says.
      interleaved_mrope(row("qwen3_5_moe_text", "models/qwen3_5_moe"), {11, 11, 10}),
      interleaved_mrope(row("qwen3_5_text", "models/qwen3_5"), {11, 11, 10}),
      interleaved_mrope(row("qwen3_vl_moe_text", "models/qwen3_vl_moe"), {24, 20, 20}),
      interleaved_mrope(row("qwen3_vl_text", "models/qwen3_vl"), {24, 20, 20}),
      interleaved_mrope(row("qwen4_exp_text", "models/qwen4_exp"), {11, 11, 10}),
      interleaved_mrope(row("qwen3_omni_moe_talker_text", "models/qwen3_omni_moe"), {24, 20, 20}),

      // Its rotary's forward multiplies cos/sin by short_mscale / long_mscale (longrope).
      row("phimoe", "models/phimoe/modeling_phimoe.py", [](ModelFamily& f) { f.longrope_mscale = true; }),
      // Llama's math under other key names (each config class's attribute_map) or nesting.
      row("dbrx", "models/dbrx", [](ModelFamily& f) {
        f.head_keys = {"n_heads", "num_attention_heads"};
        f.hidden_keys = {"d_model", "hidden_size"};
        f.kv_keys = {"num_key_value_heads", "attn_config.kv_n_heads"};
        f.max_keys = {"max_seq_len", "max_position_embeddings"};
        f.theta_keys = {"rope_theta", "attn_config.rope_theta"};
        f.bias_keys = {};
      }),
      row("jetmoe", "models/jetmoe", [](ModelFamily& f) { f.head_dim_keys = {"kv_channels", "head_dim"}; }),
      row("zamba2", "models/zamba2", [](ModelFamily& f) { f.head_dim_keys = {"attention_head_dim", "head_dim"}; }),
      row("moonshine", "models/moonshine", [](ModelFamily& f) {
        f.layout = Layout::interleaved;  // rotate_half on x[..., 0::2], x[..., 1::2]
        f.head_keys = {"decoder_num_attention_heads", "num_attention_heads"};
        f.kv_keys = {"decoder_num_key_value_heads", "num_key_value_heads"};
      }),
      // Griffin's local attention: HF's config has no length; M only sizes the cos/sin table here
      // (8192, the training length of the RecurrentGemma report).
      row("recurrent_gemma", "models/recurrent_gemma", [](ModelFamily& f) { f.max_default = 8192; }),
      row("dia", "models/dia", [](ModelFamily& f) { f.text_config = "decoder_config"; }),
      row("t5gemma", "models/t5gemma", [](ModelFamily& f) { f.text_config = "decoder"; }),
      row("t5gemma2", "models/t5gemma2", [](ModelFamily& f) { f.text_config = "decoder"; }),
      row("t5gemma2_decoder", "models/t5gemma2"),
      contiguous_mrope(row("qwen2_5_omni", "models/qwen2_5_omni",
                           [](ModelFamily& f) { f.text_config = "thinker_config.text_config"; }),
                       {16, 24, 24}),
      // Qwen3-VL's interleaved recomposition; HY-V4-VL on the rope slice of its MLA heads (its config
      // sets head_dim to qk_rope_head_dim), in pairs (2i, 2i+1): apply_rotary_pos_emb's repeat_interleave.
      interleaved_mrope(row("hy_v4_vl_text", "models/hy_v4_vl", [](ModelFamily& f) { f.layout = Layout::interleaved; }),
                        {24, 20, 20}),
      interleaved_mrope(row("cosmos3_edge_text", "models/cosmos3_edge"), {24, 20, 20}),
      // Families whose rotation no spec expresses: refused by name.
      unsupported("ernie4_5_vl_moe_text", "models/ernie4_5_vl_moe",
                  "its text rotary (recomposition_frequencies) gives height the even and width the odd pairs below "
                  "the first two counts of its mrope_section ([22, 22, 20] by default: pairs 0-43) and the "
                  "temporal stream the pairs after them, which neither an mrope section (contiguous or Qwen3-VL's "
                  "every third pair) nor an io.axes placement describes"),
      // Interleaved pairs (2i, 2i+1), as each modeling file's rotate_half / repeat_interleave does.
      row("blt_global_transformer", "models/blt", [](ModelFamily& f) { f.layout = Layout::interleaved; }),
      row("blt_local_decoder", "models/blt", [](ModelFamily& f) { f.layout = Layout::interleaved; }),
      row("blt_patcher", "models/blt", [](ModelFamily& f) { f.layout = Layout::interleaved; }),
      row("dots3_note_text", "models/dots3_note", [](ModelFamily& f) { f.layout = Layout::interleaved; }),
      row("cohere2_moe", "models/cohere2_moe", [](ModelFamily& f) { f.layout = Layout::interleaved; }),
      row("ernie4_5", "models/ernie4_5", [](ModelFamily& f) { f.layout = Layout::interleaved; }),
      row("ernie4_5_moe", "models/ernie4_5_moe", [](ModelFamily& f) { f.layout = Layout::interleaved; }),
      // Contiguous sections, each frequency repeated for its pair (2i, 2i+1).
      contiguous_mrope(row("glm_ocr_text", "models/glm_ocr", [](ModelFamily& f) { f.layout = Layout::interleaved; }),
                       {8, 12, 12}),
      row("helium", "models/helium", [](ModelFamily& f) { f.layout = Layout::interleaved; }),
      row("moonshine_streaming", "models/moonshine_streaming", [](ModelFamily& f) { f.layout = Layout::interleaved; }),
      row("openai_privacy_filter", "models/openai_privacy_filter", [](ModelFamily& f) { f.layout = Layout::interleaved; }),
      // MLA families that rotate with DeepSeek's apply_rotary_pos_emb_interleave.
      // Their indexers (layer_type "indexer") pair as each indexer's forward calls: apply_rotary_pos_emb
      // (neox) in DeepSeek-V3.2 and AXK2, apply_rotary_pos_emb_interleave in GLM-5.
      with_indexer(deepseek("glm_moe_dsa", "models/glm_moe_dsa"), Layout::interleaved),
      with_indexer(deepseek("deepseek_v32", "models/deepseek_v32"), Layout::neox),
      with_indexer(deepseek("axk2", "models/axk2"), Layout::neox),
      deepseek("axk1", "models/axk1", "rope_interleave"),
      deepseek("mistral4", "models/mistral4", "rope_interleave"),
      deepseek("youtu", "models/youtu", "rope_interleave"),
      deepseek("glm4_moe_lite", "models/glm4_moe_lite", "rope_interleave"),
      [] {
        ModelFamily f = deepseek("bailing_hybrid", "models/bailing_hybrid");
        f.max_keys = {"model_max_length", "max_position_embeddings"};  // attribute_map
        return f;
      }(),
      deepseek("longcat_flash", "models/longcat_flash"),
      [] {
        ModelFamily f = deepseek("mistral_large4_text", "models/mistral_large4");
        f.no_rope_interval = 4;  // MistralLarge4TextConfig: no_rope_layers None -> every 4th layer NoPE
        return f;
      }(),
      not_rope("bloom", "models/bloom/modeling_bloom.py", "ALiBi attention biases"),
      not_rope("mpt", "models/mpt/modeling_mpt.py", "ALiBi attention biases"),
      not_rope("gpt2", "models/gpt2/modeling_gpt2.py", "learned absolute position embeddings"),
      not_rope("opt", "models/opt/modeling_opt.py", "learned absolute position embeddings"),
  };
  return table;
}

const ModelFamily& generic_model_family() { return model_families().front(); }

std::string rope_block_label(const ModelFamily& family, const std::string& layer_type) {
  if (family.rope_block_labels.empty() || layer_type.empty()) return layer_type;
  std::string other;
  for (const auto& [type, label] : family.rope_block_labels) {
    if (layer_type == label) return layer_type;  // already a label
    if (type == layer_type) return std::string(label);
    if (type.empty()) other = label;
  }
  return other.empty() ? layer_type : other;
}

std::string model_types_where(bool (*has)(const ModelFamily&)) {
  std::string out;
  for (const auto& family : model_families())
    if (has(family)) out += (out.empty() ? "" : ", ") + std::string(family.model_type);
  return out;
}

const ModelFamily* find_model_family(std::string_view model_type) {
  if (model_type.empty()) return nullptr;
  for (const auto& family : model_families())
    if (family.model_type == model_type) return &family;
  return nullptr;
}

}  // namespace ropejit
