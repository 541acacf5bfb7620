/* ropejit C API: spec JSON in, launchable RoPE kernel out. Usable from C99 and C++.
 *
 * Every function returns a ropejit_status; on failure ropejit_last_error() holds a message
 * for this thread (the spec field, value and allowed set for spec errors; the compiler log
 * for compile errors). No C++ exception crosses this interface.
 *
 *   ropejit_runtime* rt;  ropejit_kernel* k;
 *   ropejit_runtime_create(NULL, &rt);                 // auto backend: cuda, else host
 *   ropejit_kernel_get(rt, spec_json, &k);
 *   ropejit_args a;  ropejit_args_init(&a);
 *   a.num_tokens = T;  a.q = q;  a.k = k_ptr;  a.positions = pos;
 *   ropejit_kernel_launch(k, &a, stream);               // stream: a CUstream, or NULL
 *   ropejit_kernel_destroy(k);  ropejit_runtime_destroy(rt);
 */
#ifndef ROPEJIT_ROPEJIT_H
#define ROPEJIT_ROPEJIT_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define ROPEJIT_C_API __attribute__((visibility("default")))
#else
#define ROPEJIT_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Status codes; the same numbers as ropejit::Status (ropejit/error.h). */
typedef enum ropejit_status {
  ROPEJIT_STATUS_OK = 0,
  ROPEJIT_STATUS_INVALID_SPEC = 1,     /**< spec JSON malformed or fails validation */
  ROPEJIT_STATUS_INVALID_ARGUMENT = 2, /**< a launch or API argument is bad */
  ROPEJIT_STATUS_UNSUPPORTED = 3,      /**< valid, but this build or backend cannot do it */
  ROPEJIT_STATUS_COMPILE_ERROR = 4,    /**< NVRTC or the host compiler rejected the source */
  ROPEJIT_STATUS_BACKEND_ERROR = 5,    /**< CUDA driver / host JIT failure */
  ROPEJIT_STATUS_IO_ERROR = 6,         /**< file system problem */
  ROPEJIT_STATUS_INTERNAL = 7          /**< a bug in ropejit (or out of memory) */
} ropejit_status;

/** Where kernels run; the same numbers as ropejit::BackendKind. */
typedef enum ropejit_backend {
  ROPEJIT_BACKEND_AUTO = 0, /**< cuda when a device is usable, else host */
  ROPEJIT_BACKEND_CUDA = 1,
  ROPEJIT_BACKEND_HOST = 2
} ropejit_backend;

/** Integer type of an explicit positions array. In C++ it is ropejit::PositionsType, so that
 *  ropejit_args can be ropejit::Args too (ropejit/runtime.h) and both spellings,
 *  ROPEJIT_POSITIONS_INT64 and ropejit::PositionsType::int64, work in either API. Both are
 *  int-sized with the same values, so C and C++ agree on the layout of ropejit_args. */
#ifdef __cplusplus
}  /* extern "C" */
namespace ropejit {
/// Integer type of an explicit positions array (the C API's ropejit_positions_type).
enum class PositionsType : int { int32 = 0, int64 = 1 };
}  // namespace ropejit
/// The C name of ropejit::PositionsType.
typedef ropejit::PositionsType ropejit_positions_type;
/// ROPEJIT_POSITIONS_INT32 for C++ callers of the C API.
inline constexpr ropejit_positions_type ROPEJIT_POSITIONS_INT32 = ropejit::PositionsType::int32;
/// ROPEJIT_POSITIONS_INT64 for C++ callers of the C API.
inline constexpr ropejit_positions_type ROPEJIT_POSITIONS_INT64 = ropejit::PositionsType::int64;
extern "C" {
#else
typedef enum ropejit_positions_type {
  ROPEJIT_POSITIONS_INT32 = 0,
  ROPEJIT_POSITIONS_INT64 = 1
} ropejit_positions_type;
#endif

/** Opaque runtime: backend, caches, tuning database. Thread-safe. */
typedef struct ropejit_runtime ropejit_runtime;
/** Opaque compiled kernel for one spec. Launching is thread-safe. */
typedef struct ropejit_kernel ropejit_kernel;

/** Runtime options; fill with ropejit_runtime_options_init, then change fields. */
typedef struct ropejit_runtime_options {
  size_t struct_size;        /**< sizeof(ropejit_runtime_options) */
  ropejit_backend backend;   /**< default ROPEJIT_BACKEND_AUTO */
  const char* cache_dir;     /**< NULL: ROPEJIT_CACHE_DIR, XDG_CACHE_HOME/ropejit, ~/.cache/ropejit */
  int disk_cache;            /**< default 1; 0: memory cache only */
  const char* tuning_db;     /**< NULL: ROPEJIT_TUNING_DB or none */
  const char* arch;          /**< NULL: the device's ("sm_90"); else forced target */
  int device;                /**< CUDA device ordinal, default 0 */
  /** Receives each warning (a disabled disk cache, an ignored tuning database) as one line of
   *  text without the "ropejit: warning: " prefix, with `user_data`. NULL (the default): the
   *  line is printed to stderr. Called on the thread that raised it, inside a ropejit call
   *  (ropejit_runtime_create, ropejit_kernel_get); it must not call ropejit itself and must
   *  stay valid until ropejit_runtime_destroy. The message is valid during the call only.
   *  A caller built against 0.1.0's header (struct_size ending before on_warning) gets NULL. */
  void (*on_warning)(const char* message, void* user_data);
  void* user_data;           /**< passed to on_warning unchanged */
  /** 1: launch with programmatic dependent launch (sm_90+ kernels on the cuda backend): a
   *  kernel may start while the previous one in its stream finishes and waits in-kernel for its
   *  results. Default 0. A caller built against an earlier header (struct_size ending before
   *  this field) gets 0. */
  int programmatic_dependent_launch;
} ropejit_runtime_options;

/** One launch's arguments; the one definition of them: ropejit::Args (ropejit/runtime.h) is
 *  this struct, with C++ constructors, so the two layouts cannot drift apart.
 *  Device pointers on the cuda backend, host pointers on the host backend. Strides are in
 *  elements between consecutive tokens; 0 means dense. Fill with ropejit_args_init first. */
typedef struct ropejit_args {
  size_t struct_size;        /**< sizeof(ropejit_args); checked */
  int64_t num_tokens;        /**< T */
  /* Input, separate form: q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, D] (v when copied). */
  void* q;
  void* k;
  void* v;
  int64_t q_stride, k_stride, v_stride;
  /* Input, packed form: qkv [T, (Hq + 2 Hkv) D]. */
  void* qkv;
  int64_t qkv_stride;
  const void* bias;          /**< [(Hq + 2 Hkv) D] in the storage dtype, when qkv_bias */
  /* Outputs (separate: [T, H, D] token-major; padded_bhsd: [B, H, S, D] dense). */
  void* q_out;
  void* k_out;
  void* v_out;
  int64_t q_out_stride, k_out_stride, v_out_stride;
  /* Positions: explicit, varlen, or offset (one sequence at start_pos[0]). */
  const void* positions;     /**< [T] */
  ropejit_positions_type positions_type; /**< default ROPEJIT_POSITIONS_INT32 */
  const int32_t* cu_seqlens; /**< [batch + 1], cu_seqlens[batch] == T */
  const int64_t* start_pos;  /**< varlen: [batch]; offset: [1]; or NULL (all 0) */
  int batch;                 /**< sequences of varlen positions / padded_bhsd */
  int max_seq_len;           /**< S of padded_bhsd */
  int64_t seq_len;           /**< max(position) + 1; required by dynamic NTK and LongRoPE */
  /* QK-norm weights (spec qk_norm with weight per_head): [D] each in the storage dtype, shared
   * by every q (k) head (q_norm_weight only when q is normed: not with qk_norm.heads k). A caller built against an earlier header (struct_size ending before
   * them) passes none. */
  const void* q_norm_weight;
  const void* k_norm_weight;
  /* Paged KV cache (spec io.output paged_kv): rotated k and v go to separate K and V caches of
   * cache_num_pages pages, laid out as the spec's cache_layout (nhd [pages, page_size, Hkv, D],
   * hnd [pages, Hkv, page_size, D]) in the cache dtype; pages are *_cache_page_stride elements
   * apart (0: dense, page_size * Hkv * D). A token's slot comes from slot_mapping [T] (int64,
   * page * page_size + offset; -1: k and v not written) or from block_tables [batch,
   * max_blocks_per_seq] (int32 pages; the page of position p of sequence b is
   * block_tables[b][p / page_size]). FP8 caches store fp8(x * (1 / scale)), saturating; k_scale
   * and v_scale must be finite and > 0 for them, and 0 otherwise. A caller built against an
   * earlier header (struct_size ending before them) passes none. */
  void* k_cache;
  void* v_cache;
  int64_t cache_num_pages;
  int64_t k_cache_page_stride, v_cache_page_stride;
  const int64_t* slot_mapping;
  const int32_t* block_tables;
  int64_t max_blocks_per_seq;
  float k_scale, v_scale;
  /* Re-rotation (spec op rerotate): the keys of k_cache at the slots of `positions` (or of
   * start_pos / cu_seqlens), as the append wrote them, are rotated to new positions: new_positions
   * [T] (explicit positions, of positions_type) or new_start_pos ([batch] varlen, [1] offset);
   * NULL keeps every position (the LongRoPE switch). from_seq_len: max(old position) + 1, the
   * length the keys were written at, required when rerotate.from's frequencies depend on it
   * (dynamic NTK, LongRoPE); seq_len is the length they move to. A caller built against an
   * earlier header (struct_size ending before them) passes none. */
  const void* new_positions;
  const int64_t* new_start_pos;
  int64_t from_seq_len;
  /* MLA latent-cache append (spec op mla_append): kv_c [T, kv_lora_rank], the latent already
   * normed, and k_pe [T, rotary_dim], the one rope key of a token, both of the spec's dtype with
   * rows kv_c_stride / k_pe_stride elements apart (0: dense); each token's cache row
   * [kv_c | rotated k_pe] goes into k_cache at its slot. A caller built against an earlier header
   * (struct_size ending before them) passes none. */
  const void* kv_c;
  const void* k_pe;
  int64_t kv_c_stride;
  int64_t k_pe_stride;
  /* MLA prefill's concat_mla_k (spec mla_append.concat_k): k_nope [T, Hq, head_dim - rotary_dim]
   * of the spec's dtype, heads k_nope_head_stride elements apart (0: dense; a view of the
   * up-projection's [k_nope | v] output passes its width) and tokens k_nope_stride apart (0:
   * Hq times the head stride); k_out [T, Hq, head_dim] (k_out_stride) gets each head's k_nope and
   * the rotated k_pe. A caller built against an earlier header (struct_size ending before them)
   * passes none. */
  const void* k_nope;
  int64_t k_nope_stride;
  int64_t k_nope_head_stride;
  /* MLA absorbed-weight decode (spec mla_append.absorbed_q): q_latent [T, Hq, kv_lora_rank], q_nope
   * times W_UK, heads q_latent_head_stride apart (0: dense; a transposed batched-matmul output
   * passes T * kv_lora_rank) and tokens q_latent_stride apart (0: Hq times the head stride);
   * q_out [T, Hq, kv_lora_rank + rotary_dim] gets each head's q_latent then its rotated q_pe. */
  const void* q_latent;
  int64_t q_latent_stride;
  int64_t q_latent_head_stride;
  /* FP8 q output (spec io.q_output_dtype fp8_*): q_out holds FP8 codes (its strides in elements,
   * one byte each), stored = fp8(q * (1 / scale)), saturating. io.q_scale static: scale =
   * q_scale, finite and > 0. per_token_head: each (token, head)'s scale, max(amax * fl(1 / FP8 max),
   * 1 / (FP8 max * 512)), is computed and written to q_scale_out [T, Hq] (float32); per_token: one
   * scale a token over all its q heads, q_scale_out [T]. A caller
   * built against an earlier header (struct_size ending before them) passes none. */
  float q_scale;
  float* q_scale_out;
  /* FP8 paged cache with io.cache_scale per_token_head: k_scale_cache / v_scale_cache [pages *
   * page_size, Hkv] float32, slot-major (the scale of kv head h at slot s at s * Hkv + h, a slot
   * being page * page_size + offset); each written slot's scales are computed and stored there,
   * every other entry left as it is; k_scale and v_scale are then 0.
   * NVFP4 cache (io.cache_dtype nvfp4): the caches' e4m3 block scales, one byte per 16 values, in
   * the cache's page layout with D / 16 bytes a head row ([pages, page_size, Hkv, D / 16] for
   * nhd, [pages, Hkv, page_size, D / 16] for hnd; byte offset = the cache's byte offset / 8):
   * pass the byte array's address; k_scale and v_scale are the global scales, in (0, 2^126]. */
  float* k_scale_cache;
  float* v_scale_cache;
  /* The caller's cos/sin (spec io.angles cos_sin_cache): cos_sin_cache [cos_sin_cache_rows,
   * rotary_dim] of io.cos_sin_dtype, dense, row p holding position p's rotary_dim / 2 cos values
   * then its rotary_dim / 2 sin values (vLLM's and FlashInfer's cos_sin_cache, scaling and
   * attention factor already applied); each token reads the row of its position. A token whose
   * position is outside [0, cos_sin_cache_rows) has no row: its rotated elements are written NaN.
   * A caller built against an earlier header (struct_size ending before them) passes none. */
  const void* cos_sin_cache;
  int64_t cos_sin_cache_rows;
  /* LayerNorm biases (spec qk_norm type layernorm with bias per_head): [D] each in the storage
   * dtype, shared by every q (k) head; q_norm_bias only when q is normed (qk_norm.heads q_and_k).
   * A caller built against an earlier header (struct_size ending before them) passes none. */
  const void* q_norm_bias;
  const void* k_norm_bias;
} ropejit_args;

/** Sets every field to its default (struct_size set, pointers NULL, disk_cache 1). */
ROPEJIT_C_API void ropejit_runtime_options_init(ropejit_runtime_options* options);
/** Zeroes every field and sets struct_size. */
ROPEJIT_C_API void ropejit_args_init(ropejit_args* args);

/** Opens a runtime; options NULL = defaults. An explicit cuda backend with no usable device
 *  fails with ROPEJIT_STATUS_BACKEND_ERROR. */
ROPEJIT_C_API ropejit_status ropejit_runtime_create(const ropejit_runtime_options* options,
                                                    ropejit_runtime** runtime);
/** Destroys a runtime (its caches and tuning database); kernels obtained from it stay valid
 *  until destroyed, since each keeps the backend it runs on. NULL is ignored. */
ROPEJIT_C_API void ropejit_runtime_destroy(ropejit_runtime* runtime);
/** The backend in use: "cuda" or "host" (static string), or NULL for a NULL runtime. */
ROPEJIT_C_API const char* ropejit_runtime_backend(const ropejit_runtime* runtime);

/** Parses and validates `spec_json`, then compiles (or finds in a cache) its kernel. */
ROPEJIT_C_API ropejit_status ropejit_kernel_get(ropejit_runtime* runtime, const char* spec_json,
                                                ropejit_kernel** kernel);
/** Destroys a kernel; NULL is ignored. */
ROPEJIT_C_API void ropejit_kernel_destroy(ropejit_kernel* kernel);
/** Checks every argument, then launches on `stream` (a CUstream; ignored on host). Never
 *  allocates or synchronizes on the cuda backend (CUDA-graph capturable). */
ROPEJIT_C_API ropejit_status ropejit_kernel_launch(const ropejit_kernel* kernel,
                                                   const ropejit_args* args, void* stream);

/** Bytes one launch of `kernel` moves through memory (ropejit::bytes_moved in
 *  ropejit/config.h: q/k read and written, v when copied, the bias once, int32 positions or
 *  cu_seqlens + start_pos, every padded output row), for GB/s figures. `batch` and
 *  `max_seq_len` matter for varlen positions and the padded_bhsd output (else pass 0).
 *  Int64 positions add 4 * num_tokens bytes to this. */
ROPEJIT_C_API ropejit_status ropejit_kernel_bytes_moved(const ropejit_kernel* kernel, int64_t num_tokens,
                                                        int batch, int64_t max_seq_len, int64_t* bytes);

/** The CUDA source of the kernel of `spec_json` with launch config `config_json` (a JSON object
 *  of tunables, as `ropejit emit --config`; NULL: the heuristic default) in `*source`, a
 *  NUL-terminated string the caller releases with free(). `standalone` 0: the generated source
 *  (it includes ropejit's kernel headers); 1: one self-contained file, the headers inlined and
 *  pruned to this spec, annotated (`ropejit emit --standalone`; ROPEJIT_STATUS_UNSUPPORTED in a
 *  build without Clang). `*source` is NULL on failure. */
ROPEJIT_C_API ropejit_status ropejit_emit_source(const char* spec_json, const char* config_json, int standalone,
                                                 char** source);

/* ---- Spec introspection: what a spec validated to, its frequencies and its launch fields.
 * Each call parses and validates `spec_json` as ropejit_kernel_get does (the same message on
 * failure) and needs no runtime. Strings in the output structs are static: never freed. */

/** A validated spec's values, defaults and derived values filled (rotary_dim from
 *  partial_rotary_factor, copy_v's default). Enum values are their spec names ("neox"). */
typedef struct ropejit_spec_info {
  size_t struct_size;        /**< sizeof(ropejit_spec_info); set by the caller, checked */
  int head_dim;              /**< D */
  int rotary_dim;            /**< d */
  int num_q_heads;           /**< Hq */
  int num_kv_heads;          /**< Hkv */
  int64_t max_position_embeddings;
  double rope_theta;
  const char* layout;        /**< "neox" | "interleaved" */
  const char* dtype;         /**< "fp32" | "fp16" | "bf16" */
  const char* angle;         /**< "fp32" | "exact" */
  const char* rope_type;     /**< "default", "linear", "ntk", "dynamic", "yarn", "longrope", "llama3",
                                  "proportional" */
  const char* input;         /**< io.input */
  const char* output;        /**< io.output */
  const char* positions;     /**< io.positions */
  const char* cache_layout;  /**< io.cache_layout (paged_kv; its default elsewhere) */
  const char* cache_dtype;   /**< io.cache_dtype (paged_kv; "auto" elsewhere) */
  const char* cache_index;   /**< io.cache_index (paged_kv; its default elsewhere) */
  const char* q_output;      /**< io.q_output (paged_kv; "inplace" elsewhere) */
  int page_size;             /**< io.page_size (paged_kv; 0 elsewhere) */
  int qkv_bias;              /**< 1: io.qkv_bias */
  int copy_v;                /**< 1: v is read and written (after the spec's default rule) */
  int mrope_section[3];      /**< io.mrope_section (mrope positions; zeros elsewhere) */
  int mrope_interleaved;     /**< 1: io.mrope_interleaved */
  int qk_norm;               /**< 1: the qk_norm block is present */
  const char* qk_norm_weight; /**< "per_head" | "none" (qk_norm only; NULL without it) */
  char spec_hash[33];        /**< the spec's content hash: 32 lowercase hex digits and a NUL */
  const char* op;            /**< the op: "rope" | "rerotate" | "attn_temperature" */
  const char* from_rope_type; /**< op rerotate: rerotate.from's rope_type (NULL for op rope) */
} ropejit_spec_info;

/** Fills `*info` (whose struct_size the caller set) with the values `spec_json` validates to. */
ROPEJIT_C_API ropejit_status ropejit_spec_describe(const char* spec_json, ropejit_spec_info* info);

/** The canonical JSON of `spec_json` (fixed key order, every default filled, rotary_dim
 *  explicit) in `*json`, a NUL-terminated string the caller releases with free(); NULL on
 *  failure. */
ROPEJIT_C_API ropejit_status ropejit_spec_canonical_json(const char* spec_json, char** json);

/** The frequencies kernels of `spec_json` bake (HF float32 parity, as doubles): the d/2
 *  inv_freq values into inv_freq[0, count), `*count` = d/2 always. `long_table` 1: LongRoPE's
 *  long table (longrope only), 0: the table (longrope: the short one; dynamic: the one at
 *  lengths <= max_position_embeddings, or at rope.seq_len when the spec fixes it).
 *  `attention_factor` (may be NULL): the factor on cos and sin with that table (PhiMoE's longrope
 *  has one per table: short_mscale, long_mscale). `softmax_scale` (may be NULL):
 *  the factor DeepSeek's yarn (mscale_all_dim) applies to the attention softmax scale, which
 *  the kernel does not apply; 1.0 when the spec has none. inv_freq NULL with capacity 0 asks
 *  for the sizes only; a `capacity` below d/2 fails with ROPEJIT_STATUS_INVALID_ARGUMENT,
 *  `*count` still set. */
ROPEJIT_C_API ropejit_status ropejit_spec_freqs(const char* spec_json, int long_table, double* inv_freq,
                                                size_t capacity, size_t* count, double* attention_factor,
                                                double* softmax_scale);

/** How launches of a spec use a ropejit_args field; the same numbers as ropejit::FieldUse. */
typedef enum ropejit_field_use {
  ROPEJIT_FIELD_REQUIRED = 0, /**< must be set (non-NULL, or a value in range) */
  ROPEJIT_FIELD_OPTIONAL = 1, /**< may be 0 / NULL (a dense stride, no start positions, int32 positions) */
  ROPEJIT_FIELD_UNUSED = 2    /**< not read: leave it 0 / NULL (set, it is rejected; the shape fields num_tokens,
                                   batch, max_seq_len, seq_len, positions_type are range-checked instead) */
} ropejit_field_use;

/** One ropejit_args field as launches of a spec use it (ropejit::LaunchField). */
typedef struct ropejit_launch_field {
  size_t struct_size;        /**< sizeof(ropejit_launch_field); set by the caller, checked */
  const char* name;          /**< the ropejit_args field ("q", "q_stride", "seq_len"); NULL past the last */
  ropejit_field_use use;
  /** Arrays the spec uses: the element type ("bf16", "fp16", "fp32", "int32", "int64",
   *  "fp8_e4m3", "fp8_e5m2"; positions: "int32|int64", picked by positions_type); else NULL. */
  const char* dtype;
  int rank;                  /**< arrays the spec uses: the number of dims; else 0 */
  /** dims[0, rank): the dense shape in symbols: "T" (num_tokens), "B" (batch), "B+1", "S"
   *  (max_seq_len), "Hq", "Hkv", "Hq+2Hkv", "D", "page_size", "pages" (cache_num_pages),
   *  "max_blocks_per_seq", "1", "3"; the rest NULL. */
  const char* dims[4];
} ropejit_launch_field;

/** Field number `index` (0-based, in ropejit_args order, struct_size left out) with how
 *  launches of `spec_json` use it, in `*field` (whose struct_size the caller set). Past the last
 *  field: ROPEJIT_STATUS_OK with field->name NULL, which ends an iteration:
 *    for (i = 0; ropejit_spec_launch_field(spec, i, &f) == ROPEJIT_STATUS_OK && f.name; ++i) */
ROPEJIT_C_API ropejit_status ropejit_spec_launch_field(const char* spec_json, size_t index,
                                                       ropejit_launch_field* field);

/** Layout of a public struct as this library was compiled, for bindings that copy a struct
 *  (bench/ropejit_ctypes.py) to check their copy: the name of field number `index` (0-based,
 *  in declaration order) of `type` ("ropejit_args", "ropejit_runtime_options",
 *  "ropejit_spec_info" or "ropejit_launch_field") and its byte offset in `*offset`. Past the
 *  last field: NULL, and `*offset` = sizeof(type). An unknown type: NULL, and `*offset` = 0.
 *  `offset` may be NULL. */
ROPEJIT_C_API const char* ropejit_struct_field(const char* type, size_t index, size_t* offset);

/** Short stable name of a status ("invalid_spec"); "unknown" for other values. */
ROPEJIT_C_API const char* ropejit_status_string(ropejit_status status);
/** Message of the last failed call on this thread ("" when none). Valid until the next
 *  failed call on this thread. */
ROPEJIT_C_API const char* ropejit_last_error(void);
/** Library version ("0.1.0"). */
ROPEJIT_C_API const char* ropejit_version(void);

#ifdef __cplusplus
}
#endif

#endif /* ROPEJIT_ROPEJIT_H */
