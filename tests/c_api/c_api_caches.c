/* The C API test's cache launches (c_api_test.c runs them): op rerotate moving fp32 keys in a
 * paged K cache, and an NVFP4 cache append checked bit for bit against an encoder written here. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "c_api_test.h"

/* op rerotate: fp32 keys in a one-page K cache move from their positions to positions - 3;
 * the rotated cache equals the keys rotated by the angle difference, the V cache stays NULL. */
void check_rerotate(ropejit_runtime* rt) {
  static const char* const spec =
      "{\"name\":\"c-shift\",\"op\":\"rerotate\",\"head_dim\":64,\"rotary_dim\":64,\"num_q_heads\":4,"
      "\"num_kv_heads\":2,\"layout\":\"neox\",\"dtype\":\"fp32\",\"max_position_embeddings\":4096,"
      "\"rope\":{\"rope_type\":\"default\",\"rope_theta\":10000},"
      "\"io\":{\"output\":\"paged_kv\",\"page_size\":4}}";
  ropejit_spec_info info;
  ropejit_status st = describe_spec(spec, &info);
  CHECK(st == ROPEJIT_STATUS_OK && strcmp(info.op, "rerotate") == 0 && strcmp(info.from_rope_type, "default") == 0,
        "describe rerotate: %s: %s", ropejit_status_string(st), ropejit_last_error());
  ropejit_kernel* kernel = NULL;
  st = ropejit_kernel_get(rt, spec, &kernel);
  CHECK(st == ROPEJIT_STATUS_OK, "rerotate kernel_get: %s: %s", ropejit_status_string(st), ropejit_last_error());
  if (st != ROPEJIT_STATUS_OK) return;
  enum { kSlots = 4, kRow = kKvHeads * kHeadDim };
  static float cache[kSlots * kRow], before[kSlots * kRow];
  for (int i = 0; i < kSlots * kRow; ++i) before[i] = cache[i] = random_value();
  int32_t positions[3], moved[3];
  int64_t slots[3] = {2, 0, 3}; /* slot 1 holds no key: it keeps its bytes */
  for (int t = 0; t < 3; ++t) {
    positions[t] = 3 + (int32_t)(next_u64() % 4000);
    moved[t] = positions[t] - 3;
  }
  ropejit_args a;
  ropejit_args_init(&a);
  a.num_tokens = 3;
  a.positions = positions;
  a.new_positions = moved;
  a.k_cache = cache;
  a.cache_num_pages = 1;
  a.slot_mapping = slots;
  st = ropejit_kernel_launch(kernel, &a, NULL);
  CHECK(st == ROPEJIT_STATUS_OK, "rerotate launch: %s: %s", ropejit_status_string(st), ropejit_last_error());
  int bad = 0;
  for (int t = 0; t < 3; ++t)
    for (int h = 0; h < kKvHeads; ++h) {
      /* Expected: the stored key rotated back from p in double, then rotated to p - 3 (check_head). */
      float unrotated[kHeadDim], at_new[kHeadDim];
      const float* stored = before + slots[t] * kRow + h * kHeadDim;
      const int half = kRotaryDim / 2;
      for (int i = 0; i < half; ++i) {
        const double back = -(double)((float)positions[t] * inv_freq_fp32(i));
        const double c = cos(back), s = sin(back);
        unrotated[i] = (float)(stored[i] * c - stored[i + half] * s);
        unrotated[i + half] = (float)(stored[i + half] * c + stored[i] * s);
      }
      memcpy(at_new, cache + slots[t] * kRow + h * kHeadDim, sizeof at_new);
      bad += check_head(unrotated, at_new, moved[t], "rerotated k_cache", t);
    }
  CHECK(bad == 0, "%d rerotated elements off", bad);
  CHECK(memcmp(cache + 1 * kRow, before + 1 * kRow, sizeof(float) * kRow) == 0, "slot 1 (no key) changed");
  a.new_positions = NULL;
  a.q = cache; /* a rerotate reads no q */
  st = ropejit_kernel_launch(kernel, &a, NULL);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT && strstr(ropejit_last_error(), "Args::q") != NULL,
        "q on a rerotate spec gave %s: %s", ropejit_status_string(st), ropejit_last_error());
  ropejit_kernel_destroy(kernel);
}

/* Round-to-nearest-even onto a table of n ascending non-negative values, saturating: the code. */
static unsigned nearest_even_code(const double* table, int n, double m) {
  if (m >= table[n - 1]) return (unsigned)(n - 1);
  int lo = 0;
  while (lo + 1 < n && table[lo + 1] <= m) ++lo;
  const double mid = (table[lo] + table[lo + 1]) / 2;
  if (m == table[lo] || m < mid) return (unsigned)lo;
  return m > mid || lo % 2 ? (unsigned)(lo + 1) : (unsigned)lo;
}

/* An NVFP4 V cache through the C API: fp32 v heads (never rotated, so their exact values are the
 * inputs) into a one-page cache; each row's e2m1 nibbles (element 2i low) and e4m3 block scales
 * (passed through the float* k_scale_cache / v_scale_cache fields) equal an encoder written here
 * from the format: sf = e4m3(fl(1 / v_scale) * (amax * fl(1 / 6))), codes e2m1(x * (fl(1 / v_scale) / sf)). */
void check_nvfp4(ropejit_runtime* rt) {
  static const char* const spec =
      "{\"name\":\"c-nvfp4\",\"head_dim\":64,\"rotary_dim\":64,\"num_q_heads\":4,\"num_kv_heads\":2,"
      "\"layout\":\"neox\",\"dtype\":\"fp32\",\"max_position_embeddings\":4096,"
      "\"rope\":{\"rope_type\":\"default\",\"rope_theta\":10000},"
      "\"io\":{\"output\":\"paged_kv\",\"page_size\":4,\"cache_dtype\":\"nvfp4\"}}";
  ropejit_kernel* kernel = NULL;
  ropejit_status st = ropejit_kernel_get(rt, spec, &kernel);
  CHECK(st == ROPEJIT_STATUS_OK, "nvfp4 kernel_get: %s: %s", ropejit_status_string(st), ropejit_last_error());
  if (st != ROPEJIT_STATUS_OK) return;
  enum { kSlots = 4, kRowBytes = kKvHeads * kHeadDim / 2, kScaleRow = kKvHeads * kHeadDim / 16, kTokens = 3 };
  static float q[kTokens * 4 * kHeadDim], k[kTokens * kKvHeads * kHeadDim], v[kTokens * kKvHeads * kHeadDim];
  static uint8_t k_cache[kSlots * kRowBytes], v_cache[kSlots * kRowBytes], v_before[kSlots * kRowBytes];
  static uint8_t k_scales[kSlots * kScaleRow], v_scales[kSlots * kScaleRow], v_scales_before[kSlots * kScaleRow];
  for (size_t i = 0; i < sizeof q / sizeof q[0]; ++i) q[i] = random_value();
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i) k[i] = random_value(), v[i] = random_value() * 40.0f;
  for (size_t i = 0; i < sizeof v_cache; ++i) v_before[i] = v_cache[i] = k_cache[i] = (uint8_t)next_u64();
  for (size_t i = 0; i < sizeof v_scales; ++i) v_scales_before[i] = v_scales[i] = k_scales[i] = (uint8_t)next_u64();
  int32_t positions[kTokens] = {5, 900, 17};
  int64_t slots[kTokens] = {2, 0, 3}; /* slot 1: untouched */
  ropejit_args a;
  ropejit_args_init(&a);
  a.num_tokens = kTokens;
  a.q = q;
  a.k = k;
  a.v = v;
  a.positions = positions;
  a.k_cache = k_cache;
  a.v_cache = v_cache;
  a.cache_num_pages = 1;
  a.slot_mapping = slots;
  a.k_scale = 0.01f;
  a.v_scale = 0.003f; /* some blocks saturate their scale at 448 */
  a.k_scale_cache = (float*)k_scales; /* NVFP4: the e4m3 block-scale bytes */
  a.v_scale_cache = (float*)v_scales;
  st = ropejit_kernel_launch(kernel, &a, NULL);
  CHECK(st == ROPEJIT_STATUS_OK, "nvfp4 launch: %s: %s", ropejit_status_string(st), ropejit_last_error());
  double e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6}, e4m3[127];
  for (int c = 0; c < 127; ++c) e4m3[c] = c < 8 ? ldexp(c, -9) : ldexp(8 + (c & 7), (c >> 3) - 10);
  const float inv = 1.0f / a.v_scale;
  int bad = 0;
  for (int t = 0; t < kTokens; ++t)
    for (int h = 0; h < kKvHeads; ++h)
      for (int b = 0; b < kHeadDim / 16; ++b) {
        const float* x = v + (t * kKvHeads + h) * kHeadDim + b * 16;
        float amax = 0.0f;
        for (int i = 0; i < 16; ++i) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        const float sf_value = inv * (amax * (1.0f / 6.0f));
        const unsigned sf_code = nearest_even_code(e4m3, 127, sf_value);
        const float sf = (float)e4m3[sf_code], multiplier = sf != 0.0f ? inv / sf : 0.0f;
        bad += v_scales[slots[t] * kScaleRow + h * (kHeadDim / 16) + b] != sf_code;
        for (int i = 0; i < 16; ++i) {
          const float scaled = x[i] * multiplier;
          const unsigned code = nearest_even_code(e2m1, 8, fabs(scaled)) | (signbit(scaled) ? 8u : 0u);
          const uint8_t byte = v_cache[slots[t] * kRowBytes + h * (kHeadDim / 2) + (b * 16 + i) / 2];
          bad += ((byte >> (4 * (i % 2))) & 0xfu) != code;
        }
      }
  CHECK(bad == 0, "%d NVFP4 v codes or block scales differ from the encoder", bad);
  CHECK(memcmp(v_cache + kRowBytes, v_before + kRowBytes, kRowBytes) == 0 &&
            memcmp(v_scales + kScaleRow, v_scales_before + kScaleRow, kScaleRow) == 0,
        "slot 1 (no token) changed");
  a.v_scale_cache = NULL;
  st = ropejit_kernel_launch(kernel, &a, NULL);
  CHECK(st == ROPEJIT_STATUS_INVALID_ARGUMENT && strstr(ropejit_last_error(), "v_scale_cache") != NULL,
        "a missing v_scale_cache gave %s: %s", ropejit_status_string(st), ropejit_last_error());
  ropejit_kernel_destroy(kernel);
}

