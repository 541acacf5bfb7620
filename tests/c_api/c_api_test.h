/* Shared by the C API test's files (c_api_test.c, c_api_caches.c): the pass/fail counters and
 * CHECK, the test spec's sizes, the seeded generator, and the rotate_half check of one head. */
#ifndef ROPEJIT_C_API_TEST_H
#define ROPEJIT_C_API_TEST_H

#include <stdint.h>
#include <stdio.h>

#include "ropejit/ropejit.h"

extern int passed;
extern int failed;

#define CHECK(cond, ...)                                        \
  do {                                                          \
    if (cond) {                                                 \
      ++passed;                                                 \
    } else {                                                    \
      ++failed;                                                 \
      fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                             \
      fprintf(stderr, "\n");                                    \
    }                                                           \
  } while (0)

enum { kHeadDim = 64, kRotaryDim = 64, kQHeads = 4, kKvHeads = 2, kMaxPositions = 4096 };

/* xorshift64*: fresh seed each run (main prints it), so a failure can be replayed. */
extern uint64_t rng_state;
uint64_t next_u64(void);
/* Uniform in [-2, 2), never exactly zero. */
float random_value(void);
/* HF's float32 inv_freq (exponent, power and reciprocal each rounded to float32). */
float inv_freq_fp32(int pair);
/* ropejit_spec_describe into a zeroed `info` of this header's size. */
ropejit_status describe_spec(const char* spec, ropejit_spec_info* info);
/* Head `h` of token `t` (row `out` after the launch, `in` before) against rotate_half; returns
 * the number of bad elements. */
int check_head(const float* in, const float* out, int32_t position, const char* what, long row);

/* c_api_caches.c: launches that write paged caches (op rerotate's K cache, an NVFP4 cache). */
void check_rerotate(ropejit_runtime* rt);
void check_nvfp4(ropejit_runtime* rt);

#endif
