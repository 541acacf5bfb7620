#pragma once
/// Runs one generated kernel on fresh random data through the public API and checks every
/// output element (and every byte it must not touch) against the float64 reference.
/// Used by the conformance suite, `ropejit run` and benchmarks.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ropejit/runtime.h"
#include "ropejit/check/reference.h"

namespace ropejit::check {

/// The shape of one random case.
struct CaseOptions {
  int64_t tokens = 17;                 ///< T
  int batch = 0;                       ///< varlen sequences (0: random in [1, 8])
  PositionsType positions_type = PositionsType::int32;
  int64_t max_position = 4096;         ///< positions are drawn from [0, max_position)
  bool strided = false;                ///< token strides wider than dense (gaps must stay intact)
  uint64_t seed = 0;                   ///< 0: a fresh random seed
  int timing_repeats = 0;              ///< > 0: time that many launches (median)
  /// > 0 and below `tokens`: the float64 check runs on a case of this many tokens (fresh data,
  /// the kernel's config for `tokens`) and the launch of `tokens` is timed, not compared.
  int64_t check_tokens = 0;
  /// io.angles cos_sin_cache: rows of the caller's cache (0: every position's); fewer leave the
  /// tokens past them without a row, whose rotated elements must come out NaN.
  int64_t cos_sin_rows = 0;
};

/// Tokens whose check costs about `elements` reference values (q, k and v of a token: (Hq + 2 Hkv) D),
/// at least 1: the default of `ropejit run` and `ropejit bench` (2^25, seconds on one CPU core).
int64_t checked_tokens_for(const Spec& spec, int64_t elements = int64_t(1) << 25);

/// What one case found.
struct CaseReport {
  uint64_t seed = 0;                   ///< to reproduce (the checked case)
  int batch = 0;                       ///< sequences (varlen), of the checked case
  int64_t max_seq_len = 0;             ///< S (padded_bhsd)
  int64_t run_length = 0;              ///< seq_len passed for dynamic/longrope
  std::vector<std::pair<std::string, ref::CheckResult>> checks;  ///< per output tensor
  int64_t untouched_violations = 0;    ///< bytes outside the outputs that changed
  double time_us = -1.0;               ///< median launch time when timed, else -1
  int64_t bytes_moved = 0;             ///< reads + writes of one launch (the timed one)
  int64_t checked_tokens = 0;          ///< tokens compared with the reference (CaseOptions::check_tokens)
  /// All outputs within tolerance and nothing else written.
  bool ok() const;
  /// Multi-line description (seed, per-tensor errors, first failures).
  std::string summary() const;
};

/// Runs `kernel` once on random inputs for `options` and compares with the reference.
CaseReport run_case(Runtime& runtime, const Kernel& kernel, const CaseOptions& options);

}  // namespace ropejit::check
