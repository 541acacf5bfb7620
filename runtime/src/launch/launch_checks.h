#pragma once
// Internal to the launch argument checks (launch_args.cpp, launch_args_paged.cpp): the checks
// every io form's binder uses, and the paged_kv form's entry points.
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "launch/launch_args.h"
#include "ropejit/config.h"

namespace ropejit::launch_detail {

inline constexpr int64_t kMaxPosition = (int64_t(1) << 31) - 1;

[[noreturn]] inline void fail(const std::string& argument, const std::string& message) {
  throw Error(Status::invalid_argument, fmt::format("Args::{}: {}", argument, message), argument);
}

inline void require(bool ok, const std::string& argument, const std::string& message) {
  if (!ok) fail(argument, message);
}

inline std::string ptr_text(const void* p) { return p ? fmt::format("{}", p) : "null"; }

inline void check_aligned(const void* p, int bytes, const char* name) {
  if (p && reinterpret_cast<uintptr_t>(p) % bytes != 0)
    fail(name, fmt::format("{} is not allowed: must be {}-byte aligned (vector access of this kernel)",
                           ptr_text(p), bytes));
}

// A pointer whose first `bytes` would run past the end of the address space is a stray value,
// not memory: refused before any offset is formed from it (the offset would wrap: UB).
inline void check_span(const void* p, int64_t bytes, const char* name) {
  if (p && bytes > 0 && reinterpret_cast<uintptr_t>(p) > UINTPTR_MAX - static_cast<uint64_t>(bytes))
    fail(name, fmt::format("{} is not allowed: the {} bytes from it run past the end of the address space",
                           ptr_text(p), bytes));
}

inline void check_present(const void* p, const char* name, const char* why) {
  if (!p) fail(name, fmt::format("null is not allowed: required {}", why));
}

// Token stride: 0 means dense; otherwise at least a row and a multiple of the vector width.
// With `rows` rows of `esize`-byte elements, the byte span must fit int64 (the kernel's offsets).
inline int64_t resolve_stride(int64_t stride, int64_t dense, int vec, const char* name, int64_t rows = 0,
                              int esize = 1) {
  if (stride == 0) stride = dense;
  else if (stride < dense || stride % vec != 0)
    fail(name, fmt::format("{} is not allowed: must be 0 (dense) or >= {} and a multiple of {}",
                           stride, dense, vec));
  int64_t span = 0;
  if (__builtin_mul_overflow(rows, stride, &span) || __builtin_mul_overflow(span, int64_t{esize}, &span))
    fail(name, fmt::format("{} is not allowed: {} rows of it overflow a 64-bit byte offset", stride, rows));
  return stride;
}

inline TensorRef token_major(void* ptr, int64_t token_stride, int64_t head_dim) {
  return TensorRef{ptr, token_stride, head_dim, 0};
}

// What every form's check needs: the spec, the launch's vector width and element size.
struct FormContext {
  const Spec& spec;
  int vec;
  int esize;
  int align;  // bytes of one vector access
  bool any;   // num_tokens > 0
  int64_t D, Hq, Hkv;
};

// Elements of one q (k) head a launch moves: the rotated part, plus the tail when it is copied.
// paged_kv: the caches take whole k heads; q in place keeps an unchanged tail.
inline int64_t q_moved_per_head(const Spec& spec) {
  return tail_moves(q_inplace(spec), tail_changes(spec)) ? spec.head_dim : spec.rotary_dim;
}
inline int64_t k_moved_per_head(const Spec& spec) {
  return rotary_tail_moves(spec) ? spec.head_dim : spec.rotary_dim;
}

// ---------------------------------------------------------------- paged_kv (launch_args_paged.cpp)

/// Binds q (in place or q_out), the two caches, the slot index and the FP8 scales; returns the rows.
int64_t bind_output_paged(const FormContext& c, const Args& a, KernelParams& p);
/// 1 / scale of an FP8 cache or q_out of `type` (the scale finite and > 0), or 1 for auto.
float inverse_scale(CacheDType type, float scale, const char* name);
/// cache_num_pages and the slot mapping or block tables, per the spec's io.cache_index.
void bind_cache_index(const FormContext& c, const Args& a, KernelParams& p);
/// The slot mapping's or block tables' buffer.
void buffers_cache_index(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out);
/// Host arrays: every token's slot inside the caches (or -1), no slot written twice.
void check_paged_host(const Spec& spec, const Args& a);

/// No buffer the launch writes shares a byte with another of its buffers (launch_overlap.cpp).
void check_no_overlap(const Spec& spec, const Args& a);
/// q rewritten in place or q_out, the caches, the slot mapping or block tables.
void buffers_output_paged(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out);

// ---------------------------------------------------------------- run-time frequency choices

/// What a launch's length selects for a rope block: dynamic NTK's base, LongRoPE's table, and
/// the positions it covers (the kernel gives the angles of any other NaN).
struct RunLength {
  int use_dynamic_base = 0;
  double dynamic_log2_base = 0.0;
  int use_long_table = 0;
  int64_t covers = INT64_MAX;  ///< positions below it; the length when the block depends on it
};
/// " (rope_type longrope picks its table from seq_len)": why a position must lie below the
/// length `field` for `rope` (the generic reason for types that do not depend on it).
std::string seq_len_reason(const RopeParams& rope, const char* field);
/// The choices of the rope block `rope` (the spec's, or rerotate.from) with the spec's shape at
/// `length` (the Args field `field`, required when the rope type needs it and the launch has
/// tokens). Copies nothing: it runs on every launch.
RunLength run_length_choices(const Spec& spec, const RopeParams& rope, int64_t length, const char* field, bool any);

// ---------------------------------------------------------------- the op table

/// One op's launch (docs/architecture.md §11): its argument checks, host-array checks and
/// buffers. Rows live in each op's own file, launch/op_<op>.cpp (op rope's in launch_args.cpp).
struct LaunchOp {
  OpKind op;
  /// Checks and binds every argument but the run length (seq_len); returns the grid's rows.
  int64_t (*bind)(const FormContext& c, const Args& a, KernelParams& p);
  /// Checks the contents of the host arrays (host backend only).
  void (*check_host)(const Spec& spec, const Args& a);
  /// Appends every buffer of one launch.
  void (*buffers)(const Spec& spec, const LaunchShape& shape, std::vector<BufferDesc>& out);
  /// Elements of its paged cache's one row a slot (MLA's latent row); null: the K/V heads' rows.
  int64_t (*cache_row)(const Spec& spec) = nullptr;
};

/// The row of `op`.
const LaunchOp& launch_op(OpKind op);

/// The spec's positions form (every op places its rows by positions): bind, check the host
/// arrays (positions below seq_len when `a.seq_len` > 0), append its buffers.
void bind_positions(const FormContext& c, const Args& a, KernelParams& p);
void check_positions_form_host(const Spec& spec, const Args& a);
void buffers_positions(const Spec& spec, const LaunchShape& shape, std::vector<BufferDesc>& out);

}  // namespace ropejit::launch_detail
