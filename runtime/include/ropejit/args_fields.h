#pragma once
/// The one list of ropejit_args fields (ropejit/ropejit.h), as an X-macro: everything that
/// names the fields one by one is generated from it (the C API's ropejit_struct_field table and
/// the struct sizes of earlier headers, the Python binding's setters, the launch checks' field
/// table and their refusal of fields a spec does not use).
///
/// ROPEJIT_ARGS_FIELDS(X) expands X(name, since, used_by) once per field after struct_size, in
/// declaration order:
///   - name:    the ropejit_args member;
///   - since:   the struct generation that added it: 0 the fields of 0.1.0, 1 the QK-norm
///              weights, 2 the paged KV cache, 3 re-rotation, 4 the MLA latent append, 5 MLA's k
///              concatenation and absorbed q, 6 FP8 q outputs, 7 the caller's cos_sin_cache, 8 the
///              LayerNorm's biases. A
///              caller built against generation g's header passes a struct_size ending before the
///              first field of generation g + 1;
///   - used_by: which specs' launches read it, as text for the error that refuses it set
///              elsewhere ("Args::v_cache: ... must be null unless io.output paged_kv with op rope").
///
/// Adding a field: declare it at the end of ropejit_args (a new generation: since + 1, so older
/// callers keep working) and add its row here; a field in one but not the other fails to compile
/// (runtime/src/launch/args_fields.h checks one row per field, in order, tiling the struct).
/// Then make the spec forms that read it bind it (runtime/src/launch: a tensor's TensorRow in
/// tensor_rows.h's tables, else a BufferDesc or one of its `bound` fields), so that launch_fields
/// marks it used; everywhere else it is refused unless 0 / null. Python takes a new pointer field
/// as a keyword array with no change (ropejit._kernel.ARRAY_FIELDS is read from this list).
#define ROPEJIT_ARGS_FIELDS(X)                                                                                \
  X(num_tokens, 0, "every spec")                                                                              \
  X(q, 0, "io.input separate with op rope or attn_temperature")                                                           \
  X(k, 0, "op rope with io.input separate")                                                                   \
  X(v, 0, "op rope with io.input separate and io.copy_v")                                                     \
  X(q_stride, 0, "io.input separate with op rope or attn_temperature")                                                    \
  X(k_stride, 0, "op rope with io.input separate")                                                            \
  X(v_stride, 0, "op rope with io.input separate and io.copy_v")                                              \
  X(qkv, 0, "io.input packed_qkv")                                                                            \
  X(qkv_stride, 0, "io.input packed_qkv")                                                                     \
  X(bias, 0, "io.qkv_bias")                                                                                   \
  X(q_out, 0, "io.output separate or padded_bhsd, or paged_kv with io.q_output separate")                     \
  X(k_out, 0, "io.output separate or padded_bhsd, or mla_append.concat_k")                                     \
  X(v_out, 0, "io.output separate or padded_bhsd, with io.copy_v")                                            \
  X(q_out_stride, 0, "io.output separate, or paged_kv with io.q_output separate")                             \
  X(k_out_stride, 0, "io.output separate, or mla_append.concat_k")                                             \
  X(v_out_stride, 0, "io.output separate with io.copy_v")                                                     \
  X(positions, 0, "io.positions explicit or mrope")                                                           \
  X(positions_type, 0, "io.positions explicit or mrope")                                                      \
  X(cu_seqlens, 0, "io.positions varlen")                                                                     \
  X(start_pos, 0, "io.positions varlen or offset")                                                            \
  X(batch, 0, "io.positions varlen or io.output padded_bhsd")                                                 \
  X(max_seq_len, 0, "io.output padded_bhsd")                                                                  \
  X(seq_len, 0, "every spec; dynamic NTK and LongRoPE require it")                                            \
  X(q_norm_weight, 1, "qk_norm with weight per_head and heads q_and_k")                                                         \
  X(k_norm_weight, 1, "qk_norm with weight per_head")                                                         \
  X(k_cache, 2, "io.output paged_kv or op rerotate (op mla_append: the latent cache)")                                                          \
  X(v_cache, 2, "io.output paged_kv with op rope")                                                            \
  X(cache_num_pages, 2, "io.output paged_kv or op rerotate")                                                  \
  X(k_cache_page_stride, 2, "io.output paged_kv or op rerotate")                                              \
  X(v_cache_page_stride, 2, "io.output paged_kv with op rope")                                                \
  X(slot_mapping, 2, "io.cache_index slot_mapping with io.output paged_kv or op rerotate")                    \
  X(block_tables, 2, "io.cache_index block_tables with io.output paged_kv or op rerotate")                    \
  X(max_blocks_per_seq, 2, "io.cache_index block_tables with io.output paged_kv or op rerotate")              \
  X(k_scale, 2, "an fp8 io.cache_dtype (cache_scale static, not fp8_ds_mla) with paged_kv or op rerotate")    \
  X(v_scale, 2, "an fp8 io.cache_dtype with io.output paged_kv and op rope")                                  \
  X(new_positions, 3, "op rerotate with io.positions explicit")                                               \
  X(new_start_pos, 3, "op rerotate with io.positions varlen or offset")                                       \
  X(from_seq_len, 3, "op rerotate")                                                                          \
  X(kv_c, 4, "op mla_append")                                                                                 \
  X(k_pe, 4, "op mla_append")                                                                                 \
  X(kv_c_stride, 4, "op mla_append")                                                                          \
  X(k_pe_stride, 4, "op mla_append")                                                                          \
  X(k_nope, 5, "op mla_append with mla_append.concat_k")                                                      \
  X(k_nope_stride, 5, "op mla_append with mla_append.concat_k")                                               \
  X(k_nope_head_stride, 5, "op mla_append with mla_append.concat_k")                                          \
  X(q_latent, 5, "op mla_append with mla_append.absorbed_q")                                                  \
  X(q_latent_stride, 5, "op mla_append with mla_append.absorbed_q")                                           \
  X(q_latent_head_stride, 5, "op mla_append with mla_append.absorbed_q")                                      \
  X(q_scale, 6, "an fp8 io.q_output_dtype with io.q_scale static")                                           \
  X(q_scale_out, 6, "an fp8 io.q_output_dtype with io.q_scale per_token_head or per_token")                    \
  X(k_scale_cache, 6, "an fp8 io.cache_dtype with io.cache_scale per_token_head, or io.cache_dtype nvfp4")     \
  X(v_scale_cache, 6, "io.copy_v with an fp8 io.cache_dtype and io.cache_scale per_token_head, or nvfp4")     \
  X(cos_sin_cache, 7, "io.angles cos_sin_cache")                                                              \
  X(cos_sin_cache_rows, 7, "io.angles cos_sin_cache")                                                         \
  X(q_norm_bias, 8, "qk_norm layernorm with bias per_head and heads q_and_k")                                  \
  X(k_norm_bias, 8, "qk_norm layernorm with bias per_head")
