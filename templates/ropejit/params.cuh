#pragma once
// KernelParams: the one argument of every generated kernel. Plain C++ (no CUDA keywords) so
// the host runtime, the host backend and NVRTC all include this same file.

namespace ropejit {

typedef long long i64;

// One tensor role (q, k or v) as the kernel sees it; strides are in elements.
// element (b, s, h, e) lives at ptr + b*batch_stride + s*token_stride + h*head_stride + e.
// Token-major tensors use b = 0 and s = token index; padded_bhsd uses (sequence, row).
struct TensorRef {
  void* ptr;
  i64 token_stride;
  i64 head_stride;
  i64 batch_stride;
};

enum Role { kRoleQ = 0, kRoleK = 1, kRoleV = 2 };

struct KernelParams {
  TensorRef in[3];          // q, k, v inputs (packed QKV: three views of one buffer)
  TensorRef out[3];         // q, k, v outputs (inplace: equal to in)
  const void* bias[3];      // q, k, v bias rows of [(Hq+2Hkv)*D] in storage type, or null
  const void* positions;    // explicit positions [num_tokens], or null for varlen
  int positions_are_int64;  // 0: int32, 1: int64
  const int* cu_seqlens;    // varlen: [batch+1] prefix sums of sequence lengths
  const i64* start_pos;     // varlen: [batch] tokens already in the cache, or null (= 0)
  int batch;                // varlen / padded: number of sequences
  int max_seq_len;          // padded_bhsd: S (rows per sequence in the output)
  i64 num_tokens;           // T
  double dynamic_log2_base; // dynamic NTK: log2(float(b')) for this launch's length
  int use_dynamic_base;     // dynamic NTK: 1 when the length passed M (else the baked table)
  int use_long_table;       // longrope: 1 selects the long table
  // [rows][d] (d/2 cos, then d/2 sin): SinCosMode::table's fp32 table, or the caller's
  // cos_sin_cache (io.angles cos_sin_cache, in io.cos_sin_dtype); else null.
  const void* cos_sin_table;
  i64 cos_sin_table_rows;   // rows in cos_sin_table
  const void* norm_weight[2];  // qk_norm per_head: q and k weights [D] in storage type, or null
  const void* norm_bias[2];    // qk_norm layernorm bias per_head: q and k biases [D] in storage type, or null
  // paged_kv: out[kRoleK] and out[kRoleV] are the K and V caches; batch_stride is the page stride.
  const i64* slot_mapping;  // cache_index slot_mapping: [num_tokens] page * page_size + offset, -1 skips
  const int* block_tables;  // cache_index block_tables: [batch][max_blocks_per_seq] pages
  i64 max_blocks_per_seq;   // block_tables row length
  i64 cache_pages;          // pages in each cache: a slot past them is never written
  float cache_inv_scale[2]; // FP8 / NVFP4 caches: 1 / k_scale and 1 / v_scale (stored = fp8(x * inv_scale))
  // rerotate: keys move from `positions` (or start_pos) to these, rotated from the old rope
  // parameters' frequencies (their run-time choices below) to the spec's.
  const void* new_positions;      // explicit: [num_tokens] of positions' type, or null (unchanged)
  const i64* new_start_pos;       // varlen [batch] / offset [1], or null (unchanged)
  double from_dynamic_log2_base;  // old parameters, dynamic NTK: log2(float(b')) at from_seq_len
  int from_use_dynamic_base;      // old parameters, dynamic NTK: 1 when from_seq_len passed M
  int from_use_long_table;        // old parameters, longrope: 1 selects the long table
  float cache_scale;              // FP8 K cache: k_scale (a stored code times it is the key)
  // dynamic NTK / LongRoPE: the launch's seq_len (from_seq_len for rerotate.from); a position at
  // or past it would take the wrong frequencies, so its angles are NaN. Other types: INT64_MAX.
  i64 seq_len;
  i64 from_seq_len;
  // mla_append's per-head input, k_nope [T, Hq, D - d] (concat_k) or q_latent [T, Hq, L]
  // (absorbed_q: the two never meet in one spec), and concat_k's k_out [T, Hq, D].
  TensorRef mla_heads_in;
  TensorRef k_concat;
  float q_inv_scale;  // FP8 q_out: 1 / q_scale (stored = fp8(q * q_inv_scale))
  float* q_scale_out;  // FP8 q_out, q_scale per_token_head: [T, Hq] scales written
  float* cache_scale_out[2];  // FP8 cache, cache_scale per_token_head: k and v [slots, Hkv] scales;
                              // NVFP4: the e4m3 block scales, bytes (the cache's byte offsets / 8)
};

// The host fills this struct and the device reads it byte for byte: every compiler that
// includes this file (host C++, NVRTC, the host backend's Clang) must agree on its layout.
static_assert(sizeof(KernelParams) == 520, "KernelParams layout changed: host and device must agree");

}  // namespace ropejit
