/* The C API from plain C99: a host runtime, a kernel from spec JSON, a launch on random fp32
 * data checked against a double-precision rotate_half RoPE, the error paths (invalid spec,
 * null pointers, bad struct_size), warnings reaching on_warning with its user_data, C and
 * the C++ library agreeing on the public structs' layout, and spec introspection. Exits 77
 * (ctest: skipped) when this ropejit has no host backend, after the checks that need none. */
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "c_api_test.h"

int passed = 0;
int failed = 0;

static const double kTheta = 10000.0;

static const char* const kSpec =
    "{\"name\":\"c-test\",\"head_dim\":64,\"rotary_dim\":64,\"num_q_heads\":4,\"num_kv_heads\":2,"
    "\"layout\":\"neox\",\"dtype\":\"fp32\",\"max_position_embeddings\":4096,"
    "\"rope\":{\"rope_type\":\"default\",\"rope_theta\":10000}}";

uint64_t rng_state;
uint64_t next_u64(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}
float random_value(void) {
  const double u = (double)(next_u64() >> 11) / 9007199254740992.0;
  const float x = (float)(4.0 * u - 2.0);
  return x == 0.0f ? 0.5f : x;
}

ropejit_status describe_spec(const char* spec, ropejit_spec_info* info) {
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  return ropejit_spec_describe(spec, info);
}

float inv_freq_fp32(int pair) {
  const float exponent = (float)(2 * pair) / (float)kRotaryDim;
  const float power = (float)pow((double)(float)kTheta, (double)exponent);
  return (float)(1.0 / (double)power);
}

/* Checks head `h` of token `t` (row `out` after the launch, `in` before) against rotate_half:
 * x'_i = x_i cos - x_{i+d/2} sin, x'_{i+d/2} = x_{i+d/2} cos + x_i sin, angle = float(p) * inv_freq
 * in float32 (the spec's default "fp32" angle). Returns the number of bad elements. */
int check_head(const float* in, const float* out, int32_t position, const char* what, long row) {
  int bad = 0;
  const int half = kRotaryDim / 2;
  for (int i = 0; i < half; ++i) {
    const float angle = (float)position * inv_freq_fp32(i);
    const double c = cos((double)angle), s = sin((double)angle);
    const double x = in[i], y = in[i + half];
    const double expected_x = x * c - y * s;
    const double expected_y = y * c + x * s;
    /* fp32 math errs relative to the pair's size; the angle term covers a 1-ulp difference in
     * a float32 inv_freq (angle * 2^-23). Wrong pairing or sign errs by O(1). */
    const double tolerance = sqrt(x * x + y * y) * (1e-5 + 1.2e-7 * fabs((double)angle));
    if (fabs(out[i] - expected_x) > tolerance || fabs(out[i + half] - expected_y) > tolerance) {
      if (bad == 0)
        fprintf(stderr, "  %s row %ld pair %d position %d: got (%.9g, %.9g) want (%.9g, %.9g)\n", what, row, i,
                (int)position, out[i], out[i + half], expected_x, expected_y);
      ++bad;
    }
  }
  for (int e = kRotaryDim; e < kHeadDim; ++e)
    if (out[e] != in[e]) ++bad; /* pass-through tail (empty for this spec) */
  return bad;
}

/* ropejit_emit_source: the generated source includes the kernel headers; the standalone one
 * has none and names the entry point; bad input is refused by name with *source NULL. */
static void check_emit_source(void) {
  char* source = (char*)1;
  ropejit_status st = ropejit_emit_source(kSpec, NULL, 0, &source);
  CHECK(st == ROPEJIT_STATUS_OK && source && strstr(source, "#include \"ropejit/rope.cuh\""), "emit: %s: %s",
        ropejit_status_string(st), ropejit_last_error());
  free(source);
  st = ropejit_emit_source(kSpec, "{\"vec\": 4}", 1, &source);
  if (st == ROPEJIT_STATUS_UNSUPPORTED) {
    CHECK(source == NULL, "unsupported standalone left a source");
  } else {
    CHECK(st == ROPEJIT_STATUS_OK && source && !strstr(source, "#include \"ropejit/") &&
              strstr(source, "ropejit_rope(") && strstr(source, "bt256.v4."),
          "standalone: %s: %s", ropejit_status_string(st), ropejit_last_error());
    free(source);
  }
  st = ropejit_emit_source("{\"head_dim\": 0}", NULL, 0, &source);
  CHECK(st == ROPEJIT_STATUS_INVALID_SPEC && source == NULL, "bad spec gave %s", ropejit_status_string(st));
  st = ropejit_emit_source(kSpec, "{\"vec\": 3}", 0, &source);
  CHECK(st != ROPEJIT_STATUS_OK && source == NULL && strstr(ropejit_last_error(), "vec"), "vec 3 gave %s: %s",
        ropejit_status_string(st), ropejit_last_error());
  st = ropejit_emit_source(kSpec, NULL, 2, &source);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT && strstr(ropejit_last_error(), "standalone"), "standalone 2 gave %s",
        ropejit_status_string(st));
  st = ropejit_emit_source(kSpec, NULL, 0, NULL);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT, "null output gave %s", ropejit_status_string(st));
}

/* Spec introspection needs no runtime: the validated values (rotary_dim from
 * partial_rotary_factor), the frequencies, the canonical JSON and one launch field. */
static void check_spec_introspection(void) {
  const char* const partial =
      "{\"name\":\"c-partial\",\"head_dim\":64,\"partial_rotary_factor\":0.5,\"num_q_heads\":4,"
      "\"num_kv_heads\":2,\"layout\":\"neox\",\"dtype\":\"bf16\",\"max_position_embeddings\":4096,"
      "\"rope\":{\"rope_type\":\"default\",\"rope_theta\":10000}}";
  ropejit_spec_info info;
  ropejit_status st = describe_spec(partial, &info);
  CHECK(st == ROPEJIT_STATUS_OK && info.rotary_dim == 32 && strcmp(info.layout, "neox") == 0 &&
            strlen(info.spec_hash) == 32 && info.copy_v == 0,
        "describe: %s: %s", ropejit_status_string(st), ropejit_last_error());

  double inv_freq[kRotaryDim / 2];
  size_t count = 0;
  double attention_factor = 0.0, softmax_scale = 0.0;
  st = ropejit_spec_freqs(kSpec, 0, inv_freq, kRotaryDim / 2, &count, &attention_factor, &softmax_scale);
  CHECK(st == ROPEJIT_STATUS_OK && count == kRotaryDim / 2 && fabs(inv_freq[1] / inv_freq_fp32(1) - 1.0) < 1e-6 &&
            attention_factor == 1.0 && softmax_scale == 1.0,
        "freqs: %s: %s", ropejit_status_string(st), ropejit_last_error());
  st = ropejit_spec_freqs(kSpec, 0, inv_freq, 3, &count, NULL, NULL);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT && count == kRotaryDim / 2, "small capacity gave %s, count %zu",
        ropejit_status_string(st), count);

  char* json = NULL;
  st = ropejit_spec_canonical_json(kSpec, &json);
  CHECK(st == ROPEJIT_STATUS_OK && json && strstr(json, "\"rotary_dim\":64"), "canonical: %s", ropejit_last_error());
  free(json);

  ropejit_launch_field field;
  memset(&field, 0, sizeof field);
  field.struct_size = sizeof field;
  st = ropejit_spec_launch_field(kSpec, 1, &field); /* index 0 is num_tokens */
  CHECK(st == ROPEJIT_STATUS_OK && field.name && strcmp(field.name, "q") == 0 && field.use == ROPEJIT_FIELD_REQUIRED &&
            strcmp(field.dtype, "fp32") == 0 && field.rank == 3 && strcmp(field.dims[1], "Hq") == 0,
        "launch field 1: %s: %s", ropejit_status_string(st), ropejit_last_error());
  st = ropejit_spec_launch_field(kSpec, 1000, &field);
  CHECK(st == ROPEJIT_STATUS_OK && field.name == NULL, "past the last field gave %s", ropejit_status_string(st));
  st = ropejit_spec_describe("{\"head_dim\": 0}", &info);
  CHECK(st == ROPEJIT_STATUS_INVALID_SPEC && strstr(ropejit_last_error(), "head_dim"), "bad spec gave %s: %s",
        ropejit_status_string(st), ropejit_last_error());
}

static void check_without_runtime(void) {
  CHECK(strlen(ropejit_version()) > 0, "version is empty");
  CHECK(strcmp(ropejit_status_string(ROPEJIT_STATUS_INVALID_SPEC), "invalid_spec") == 0, "%s",
        ropejit_status_string(ROPEJIT_STATUS_INVALID_SPEC));
  CHECK(strcmp(ropejit_status_string((ropejit_status)99), "unknown") == 0, "status 99");

  ropejit_status st = ropejit_runtime_create(NULL, NULL);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT, "null output handle gave %s", ropejit_status_string(st));
  CHECK(strstr(ropejit_last_error(), "runtime") != NULL, "message: %s", ropejit_last_error());

  ropejit_runtime* rt = NULL;
  ropejit_runtime_options options;
  ropejit_runtime_options_init(&options);
  options.struct_size = 0;
  st = ropejit_runtime_create(&options, &rt);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT && rt == NULL, "struct_size 0 gave %s", ropejit_status_string(st));
  CHECK(strstr(ropejit_last_error(), "struct_size") != NULL, "message: %s", ropejit_last_error());

  ropejit_kernel* kernel = NULL;
  st = ropejit_kernel_get(NULL, kSpec, &kernel);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT && kernel == NULL, "null runtime gave %s", ropejit_status_string(st));

  ropejit_args args;
  ropejit_args_init(&args);
  st = ropejit_kernel_launch(NULL, &args, NULL);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT, "null kernel gave %s", ropejit_status_string(st));

  ropejit_runtime_destroy(NULL); /* ignored */
  ropejit_kernel_destroy(NULL);
}

/* The offset of `field` in `type` as the (C++) library was compiled; sizeof(type) for NULL. */
static size_t library_offset(const char* type, const char* field) {
  size_t offset = 0;
  for (size_t i = 0;; ++i) {
    const char* name = ropejit_struct_field(type, i, &offset);
    if (!name) return field ? (size_t)-1 : offset;
    if (field && strcmp(name, field) == 0) return offset;
  }
}

/* This C compiler and the library's C++ compiler read the same header; C declares
 * positions_type as a C enum and C++ as ropejit::PositionsType, so the fields from there on
 * and the sizes are where the two could part. */
static void check_layout(void) {
#define CHECK_OFFSET(type, field)                                                             \
  CHECK(offsetof(type, field) == library_offset(#type, #field),                               \
        #type "." #field " at %zu here, %zu in the library", offsetof(type, field),           \
        library_offset(#type, #field))
  CHECK_OFFSET(ropejit_args, num_tokens);
  CHECK_OFFSET(ropejit_args, positions);
  CHECK_OFFSET(ropejit_args, positions_type);
  CHECK_OFFSET(ropejit_args, cu_seqlens);
  CHECK_OFFSET(ropejit_args, batch);
  CHECK_OFFSET(ropejit_args, max_seq_len);
  CHECK_OFFSET(ropejit_args, seq_len);
  CHECK_OFFSET(ropejit_runtime_options, device);
  CHECK_OFFSET(ropejit_runtime_options, on_warning);
  CHECK_OFFSET(ropejit_runtime_options, user_data);
  CHECK_OFFSET(ropejit_spec_info, mrope_section);
  CHECK_OFFSET(ropejit_spec_info, spec_hash);
  CHECK_OFFSET(ropejit_spec_info, op);
  CHECK_OFFSET(ropejit_args, new_positions);
  CHECK_OFFSET(ropejit_args, from_seq_len);
  CHECK_OFFSET(ropejit_launch_field, dims);
#undef CHECK_OFFSET
  CHECK(sizeof(ropejit_args) == library_offset("ropejit_args", NULL),
        "ropejit_args: %zu bytes here, %zu in the library", sizeof(ropejit_args),
        library_offset("ropejit_args", NULL));
  CHECK(sizeof(ropejit_runtime_options) == library_offset("ropejit_runtime_options", NULL),
        "ropejit_runtime_options: %zu bytes here, %zu in the library", sizeof(ropejit_runtime_options),
        library_offset("ropejit_runtime_options", NULL));
  ropejit_args args;
  ropejit_args_init(&args);
  CHECK(args.struct_size == sizeof(ropejit_args), "ropejit_args_init wrote struct_size %zu", args.struct_size);
  size_t offset = 1;
  CHECK(ropejit_struct_field("no_such_struct", 0, &offset) == NULL && offset == 0, "unknown struct: offset %zu",
        offset);
}

/* What on_warning received. */
typedef struct Warnings {
  int count;
  const void* user_data;
  char first[512];
} Warnings;

static void collect_warning(const char* message, void* user_data) {
  Warnings* w = (Warnings*)user_data;
  if (w->count++ == 0) {
    w->user_data = user_data;
    snprintf(w->first, sizeof w->first, "%s", message);
  }
}

/* A tuning database that does not exist is ignored with one warning, which goes to
 * on_warning with its user_data instead of stderr. A caller built against 0.1.0 (struct_size
 * ending before on_warning) is still accepted, with warnings on stderr. */
static void check_warnings(void) {
  static const char kMissingDb[] = "/nonexistent-ropejit-c-api-test/tuning.json";
  Warnings warnings = {0, NULL, ""};
  ropejit_runtime_options options;
  ropejit_runtime_options_init(&options);
  CHECK(options.on_warning == NULL && options.user_data == NULL, "on_warning is not NULL by default");
  options.backend = ROPEJIT_BACKEND_HOST;
  options.disk_cache = 0;
  options.tuning_db = kMissingDb;
  options.on_warning = collect_warning;
  options.user_data = &warnings;
  ropejit_runtime* rt = NULL;
  ropejit_status st = ropejit_runtime_create(&options, &rt);
  CHECK(st == ROPEJIT_STATUS_OK, "runtime with a missing tuning database: %s: %s", ropejit_status_string(st),
        ropejit_last_error());
  CHECK(warnings.count == 1, "on_warning called %d times, expected once", warnings.count);
  CHECK(warnings.user_data == &warnings, "on_warning got user_data %p, expected %p", warnings.user_data,
        (const void*)&warnings);
  CHECK(strstr(warnings.first, kMissingDb) != NULL, "warning does not name the database: %s", warnings.first);
  CHECK(strstr(warnings.first, "ropejit: warning:") == NULL, "warning kept the stderr prefix: %s", warnings.first);
  ropejit_runtime_destroy(rt);

  options.struct_size = offsetof(ropejit_runtime_options, on_warning); /* 0.1.0's size */
  options.tuning_db = NULL;
  rt = NULL;
  st = ropejit_runtime_create(&options, &rt);
  CHECK(st == ROPEJIT_STATUS_OK && rt != NULL, "0.1.0 struct_size gave %s: %s", ropejit_status_string(st),
        ropejit_last_error());
  ropejit_runtime_destroy(rt);
  /* The header before programmatic_dependent_launch: accepted, the field keeps its default. */
  options.struct_size = offsetof(ropejit_runtime_options, programmatic_dependent_launch);
  rt = NULL;
  st = ropejit_runtime_create(&options, &rt);
  CHECK(st == ROPEJIT_STATUS_OK && rt != NULL, "pre-PDL struct_size gave %s: %s", ropejit_status_string(st),
        ropejit_last_error());
  ropejit_runtime_destroy(rt);
  options.struct_size = offsetof(ropejit_runtime_options, on_warning) - 8;
  st = ropejit_runtime_create(&options, &rt);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT, "short struct_size gave %s", ropejit_status_string(st));
}

/* Launches the spec's kernel on random data and checks every element of q and k. */
static void check_launch(const ropejit_kernel* kernel, long num_tokens) {
  const size_t q_count = (size_t)num_tokens * kQHeads * kHeadDim;
  const size_t k_count = (size_t)num_tokens * kKvHeads * kHeadDim;
  float* q = malloc(q_count * sizeof(float));
  float* k = malloc(k_count * sizeof(float));
  float* q_in = malloc(q_count * sizeof(float));
  float* k_in = malloc(k_count * sizeof(float));
  int32_t* positions = malloc((size_t)num_tokens * sizeof(int32_t));
  if (!q || !k || !q_in || !k_in || !positions) {
    CHECK(0, "out of memory");
    return;
  }
  for (size_t i = 0; i < q_count; ++i) q[i] = q_in[i] = random_value();
  for (size_t i = 0; i < k_count; ++i) k[i] = k_in[i] = random_value();
  for (long t = 0; t < num_tokens; ++t) positions[t] = (int32_t)(next_u64() % kMaxPositions);
  positions[0] = kMaxPositions - 1; /* the largest angle the spec allows */

  ropejit_args args;
  ropejit_args_init(&args);
  args.num_tokens = num_tokens;
  args.q = q;
  args.k = k;
  args.positions = positions;
  args.positions_type = ROPEJIT_POSITIONS_INT32;
  const ropejit_status st = ropejit_kernel_launch(kernel, &args, NULL);
  CHECK(st == ROPEJIT_STATUS_OK, "launch of %ld tokens gave %s: %s", num_tokens, ropejit_status_string(st),
        ropejit_last_error());
  if (st == ROPEJIT_STATUS_OK) {
    int bad = 0;
    for (long t = 0; t < num_tokens; ++t) {
      for (int h = 0; h < kQHeads; ++h) {
        const size_t at = ((size_t)t * kQHeads + h) * kHeadDim;
        bad += check_head(q_in + at, q + at, positions[t], "q", t);
      }
      for (int h = 0; h < kKvHeads; ++h) {
        const size_t at = ((size_t)t * kKvHeads + h) * kHeadDim;
        bad += check_head(k_in + at, k + at, positions[t], "k", t);
      }
    }
    CHECK(bad == 0, "%d of %ld pairs differ from the double reference (%ld tokens)", bad,
          (long)(num_tokens * (kQHeads + kKvHeads) * kRotaryDim / 2), num_tokens);
  }
  free(q), free(k), free(q_in), free(k_in), free(positions);
}

static void check_errors(ropejit_runtime* rt, const ropejit_kernel* kernel) {
  /* An invalid spec names the field, its value and the allowed set. */
  char bad_spec[1024];
  strcpy(bad_spec, kSpec);
  char* layout = strstr(bad_spec, "\"neox\"");
  memcpy(layout, "\"diag\"", 6);
  ropejit_kernel* bad_kernel = NULL;
  ropejit_status st = ropejit_kernel_get(rt, bad_spec, &bad_kernel);
  CHECK(st == ROPEJIT_STATUS_INVALID_SPEC && bad_kernel == NULL, "invalid layout gave %s",
        ropejit_status_string(st));
  CHECK(strstr(ropejit_last_error(), "/layout") != NULL, "message lacks the field: %s", ropejit_last_error());
  CHECK(strstr(ropejit_last_error(), "diag") != NULL, "message lacks the value: %s", ropejit_last_error());

  st = ropejit_kernel_get(rt, "{\"name\": \"x\", \"head_dim\": ", &bad_kernel);
  CHECK(st == ROPEJIT_STATUS_INVALID_SPEC, "truncated JSON gave %s", ropejit_status_string(st));

  /* A null q is refused before any kernel runs. */
  float k[kKvHeads * kHeadDim];
  int32_t position = 7;
  for (int i = 0; i < kKvHeads * kHeadDim; ++i) k[i] = random_value();
  ropejit_args args;
  ropejit_args_init(&args);
  args.num_tokens = 1;
  args.q = NULL;
  args.k = k;
  args.positions = &position;
  st = ropejit_kernel_launch(kernel, &args, NULL);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT, "null q gave %s", ropejit_status_string(st));
  CHECK(strstr(ropejit_last_error(), "q") != NULL, "message: %s", ropejit_last_error());

  /* A caller compiled against another layout of ropejit_args is refused. */
  float q[kQHeads * kHeadDim];
  for (int i = 0; i < kQHeads * kHeadDim; ++i) q[i] = random_value();
  args.q = q;
  args.struct_size = sizeof(ropejit_args) - 3; /* no generation ends there */
  st = ropejit_kernel_launch(kernel, &args, NULL);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT, "short struct_size gave %s", ropejit_status_string(st));
  CHECK(strstr(ropejit_last_error(), "struct_size") != NULL, "message: %s", ropejit_last_error());
  args.struct_size = 0;
  st = ropejit_kernel_launch(kernel, &args, NULL);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT, "struct_size 0 gave %s", ropejit_status_string(st));
  /* The header before the QK-norm weights: accepted, the weights read as NULL (the bytes past
   * the caller's struct are never read: poison them to be sure). */
  args.struct_size = offsetof(ropejit_args, q_norm_weight);
  args.q_norm_weight = (const void*)0x10;
  st = ropejit_kernel_launch(kernel, &args, NULL);
  CHECK(st == ROPEJIT_STATUS_OK, "pre-norm struct_size gave %s: %s", ropejit_status_string(st), ropejit_last_error());
  args.q_norm_weight = NULL;
  /* The header before the paged KV cache fields: accepted, the caches read as NULL. */
  args.struct_size = offsetof(ropejit_args, k_cache);
  args.k_cache = (void*)0x10;
  args.k_scale = 3.0f;
  st = ropejit_kernel_launch(kernel, &args, NULL);
  CHECK(st == ROPEJIT_STATUS_OK, "pre-cache struct_size gave %s: %s", ropejit_status_string(st), ropejit_last_error());
  args.struct_size = sizeof(ropejit_args);
  st = ropejit_kernel_launch(kernel, &args, NULL);  /* the full struct: a cache on an inplace spec is refused */
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT && strstr(ropejit_last_error(), "k_cache") != NULL,
        "k_cache on an inplace spec gave %s: %s", ropejit_status_string(st), ropejit_last_error());
  args.k_cache = NULL;
  args.k_scale = 0.0f;
  /* The header before the rerotate fields: accepted, they read as NULL and 0. */
  args.struct_size = offsetof(ropejit_args, new_positions);
  args.new_positions = (const void*)0x10;
  args.from_seq_len = 7;
  st = ropejit_kernel_launch(kernel, &args, NULL);
  CHECK(st == ROPEJIT_STATUS_OK, "pre-rerotate struct_size gave %s: %s", ropejit_status_string(st), ropejit_last_error());
  args.struct_size = sizeof(ropejit_args);
  st = ropejit_kernel_launch(kernel, &args, NULL);  /* the full struct: new positions on a rope spec are refused */
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT && strstr(ropejit_last_error(), "new_positions") != NULL,
        "new_positions on a rope spec gave %s: %s", ropejit_status_string(st), ropejit_last_error());
  args.new_positions = NULL;
  args.from_seq_len = 0;
  args.positions_type = (ropejit_positions_type)5;
  st = ropejit_kernel_launch(kernel, &args, NULL);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT, "positions_type 5 gave %s", ropejit_status_string(st));
}

/* Byte accounting: the in-place fp32 spec moves each q/k element read and written (4 bytes
 * each way) plus an int32 position per token; bad arguments are refused by name. */
static void check_bytes_moved(const ropejit_kernel* kernel) {
  const int64_t tokens = 1 + (int64_t)(next_u64() % 100000);
  int64_t bytes = -1;
  ropejit_status st = ropejit_kernel_bytes_moved(kernel, tokens, 0, 0, &bytes);
  const int64_t expected = tokens * (2 * (kQHeads + kKvHeads) * kHeadDim * 4 + 4);
  CHECK(st == ROPEJIT_STATUS_OK && bytes == expected, "bytes_moved(%lld tokens) = %lld (%s), expected %lld",
        (long long)tokens, (long long)bytes, ropejit_status_string(st), (long long)expected);
  st = ropejit_kernel_bytes_moved(kernel, -1, 0, 0, &bytes);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT && bytes == 0, "negative tokens gave %s, bytes %lld",
        ropejit_status_string(st), (long long)bytes);
  CHECK(strstr(ropejit_last_error(), "num_tokens") != NULL, "message: %s", ropejit_last_error());
  st = ropejit_kernel_bytes_moved(kernel, INT64_MAX, 0, 0, &bytes); /* once returned OK and a negative count */
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT && bytes == 0, "INT64_MAX tokens gave %s, bytes %lld",
        ropejit_status_string(st), (long long)bytes);
  st = ropejit_kernel_bytes_moved(kernel, tokens, 0, 0, NULL);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT, "null output gave %s", ropejit_status_string(st));
  st = ropejit_kernel_bytes_moved(NULL, tokens, 0, 0, &bytes);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT, "null kernel gave %s", ropejit_status_string(st));
}

int main(void) {
  rng_state = ((uint64_t)time(NULL) << 20) ^ (uint64_t)clock() ^ 0x9e3779b97f4a7c15ull;
  if (rng_state == 0) rng_state = 1;
  printf("c_api_test: ropejit %s, seed %llu\n", ropejit_version(), (unsigned long long)rng_state);

  check_without_runtime();
  check_layout();
  check_emit_source();
  check_spec_introspection();

  ropejit_runtime_options options;
  ropejit_runtime_options_init(&options);
  options.backend = ROPEJIT_BACKEND_HOST;
  options.disk_cache = 0;
  ropejit_runtime* rt = NULL;
  ropejit_status st = ropejit_runtime_create(&options, &rt);
  if (st == ROPEJIT_STATUS_UNSUPPORTED) {
    printf("c_api_test: %d passed, %d failed; SKIPPED the launch checks: %s\n", passed, failed,
           ropejit_last_error());
    return failed ? 1 : 77;
  }
  CHECK(st == ROPEJIT_STATUS_OK && rt != NULL, "host runtime: %s: %s", ropejit_status_string(st),
        ropejit_last_error());
  if (st != ROPEJIT_STATUS_OK) {
    printf("c_api_test: %d passed, %d failed\n", passed, failed);
    return 1;
  }
  CHECK(strcmp(ropejit_runtime_backend(rt), "host") == 0, "backend %s", ropejit_runtime_backend(rt));
  check_warnings();

  ropejit_kernel* kernel = NULL;
  st = ropejit_kernel_get(rt, kSpec, &kernel);
  CHECK(st == ROPEJIT_STATUS_OK && kernel != NULL, "kernel_get: %s: %s", ropejit_status_string(st),
        ropejit_last_error());
  check_rerotate(rt);
  check_nvfp4(rt);
  if (st == ROPEJIT_STATUS_OK) {
    check_launch(kernel, 1);
    check_launch(kernel, 37 + (long)(next_u64() % 64)); /* odd, random token count */
    check_errors(rt, kernel);
    check_bytes_moved(kernel);
    /* The kernel keeps its runtime alive: destroy the runtime first, then launch again. */
    ropejit_runtime_destroy(rt);
    rt = NULL;
    check_launch(kernel, 5);
    ropejit_kernel_destroy(kernel);
  }
  ropejit_runtime_destroy(rt);

  printf("c_api_test: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
