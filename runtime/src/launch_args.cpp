// Launch argument checks (docs/architecture.md §9): bad input never reaches a kernel; and
// each io form's buffers, so the workload builders and bytes_moved follow the same rows.
#include "launch_args.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "ropejit/freqs.h"

namespace ropejit {

namespace {

constexpr int64_t kMaxTokens = int64_t(1) << 40;
constexpr int64_t kMaxPosition = (int64_t(1) << 31) - 1;

[[noreturn]] void fail(const std::string& argument, const std::string& message) {
  throw Error(Status::invalid_argument, fmt::format("Args::{}: {}", argument, message), argument);
}

void require(bool ok, const std::string& argument, const std::string& message) {
  if (!ok) fail(argument, message);
}

std::string ptr_text(const void* p) { return p ? fmt::format("{}", p) : "null"; }

void check_aligned(const void* p, int bytes, const char* name) {
  if (p && reinterpret_cast<uintptr_t>(p) % bytes != 0)
    fail(name, fmt::format("{} is not allowed: must be {}-byte aligned (vector access of this kernel)",
                           ptr_text(p), bytes));
}

void check_null(const void* p, const char* name, const char* why) {
  if (p) fail(name, fmt::format("{} is not allowed: must be null {}", ptr_text(p), why));
}

void check_present(const void* p, const char* name, const char* why) {
  if (!p) fail(name, fmt::format("null is not allowed: required {}", why));
}

// One side's q, k, v pointers: q and k present when `required` (v too when the spec copies
// it), v null when it does not, each aligned for the kernel's vector accesses.
void check_qkv(const std::array<const void*, 3>& ptrs, const std::array<const char*, 3>& names, bool required,
               bool copy_v, int align, const char* why) {
  if (required) {
    check_present(ptrs[0], names[0], why);
    check_present(ptrs[1], names[1], why);
    if (copy_v) check_present(ptrs[2], names[2], "when the spec copies v (io.copy_v)");
  }
  if (!copy_v) check_null(ptrs[2], names[2], "when the spec does not copy v (io.copy_v false)");
  for (int r = 0; r < 3; ++r) check_aligned(ptrs[r], align, names[r]);
}

// Token stride: 0 means dense; otherwise at least a row and a multiple of the vector width.
int64_t resolve_stride(int64_t stride, int64_t dense, int vec, const char* name) {
  if (stride == 0) return dense;
  if (stride < dense || stride % vec != 0)
    fail(name, fmt::format("{} is not allowed: must be 0 (dense) or >= {} and a multiple of {}",
                           stride, dense, vec));
  return stride;
}

TensorRef token_major(void* ptr, int64_t token_stride, int64_t head_dim) {
  return TensorRef{ptr, token_stride, head_dim, 0};
}

void check_varlen_host(const Spec& spec, const Args& a) {
  const int32_t* cu = a.cu_seqlens;
  require(cu[0] == 0, "cu_seqlens", fmt::format("cu_seqlens[0] = {} is not allowed: must be 0", cu[0]));
  int64_t longest = 0;
  for (int b = 0; b < a.batch; ++b) {
    if (cu[b + 1] < cu[b])
      fail("cu_seqlens", fmt::format("cu_seqlens[{}] = {} < cu_seqlens[{}] = {}: must be non-decreasing",
                                     b + 1, cu[b + 1], b, cu[b]));
    longest = std::max<int64_t>(longest, cu[b + 1] - cu[b]);
    if (a.start_pos && (a.start_pos[b] < 0 || a.start_pos[b] + (cu[b + 1] - cu[b]) > kMaxPosition + 1))
      fail("start_pos", fmt::format("start_pos[{}] = {} is not allowed: positions must lie in [0, 2^31)",
                                    b, a.start_pos[b]));
  }
  if (cu[a.batch] != a.num_tokens)
    fail("cu_seqlens", fmt::format("cu_seqlens[batch={}] = {} is not allowed: must equal num_tokens = {}",
                                   a.batch, cu[a.batch], a.num_tokens));
  if (spec.io.output == OutputForm::padded_bhsd && longest > a.max_seq_len)
    fail("max_seq_len", fmt::format("{} is not allowed: smaller than the longest sequence ({})",
                                    a.max_seq_len, longest));
}

// Explicit [T] or mrope [3, T] positions: every entry in [0, 2^31) and below seq_len when given.
void check_positions_host(const Args& a, int64_t count) {
  for (int64_t t = 0; t < count; ++t) {
    const int64_t p = a.positions_type == PositionsType::int64
                          ? static_cast<const int64_t*>(a.positions)[t]
                          : static_cast<const int32_t*>(a.positions)[t];
    if (p < 0 || p > kMaxPosition)
      fail("positions", fmt::format("positions[{}] = {} is not allowed: must lie in [0, 2^31)", t, p));
    if (a.seq_len > 0 && p >= a.seq_len)
      fail("positions", fmt::format("positions[{}] = {} is not allowed: must be < seq_len = {}", t, p, a.seq_len));
  }
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

// ---------------------------------------------------------------- input forms

void bind_input_separate(const FormContext& c, const Args& a, KernelParams& p) {
  check_null(a.qkv, "qkv", "when the spec's io.input is separate (use q, k, v)");
  check_qkv({a.q, a.k, a.v}, {"q", "k", "v"}, c.any, c.spec.io.copy_v, c.align,
            "when the spec's io.input is separate");
  p.in[kRoleQ] = token_major(a.q, resolve_stride(a.q_stride, c.Hq * c.D, c.vec, "q_stride"), c.D);
  p.in[kRoleK] = token_major(a.k, resolve_stride(a.k_stride, c.Hkv * c.D, c.vec, "k_stride"), c.D);
  p.in[kRoleV] = token_major(a.v, resolve_stride(a.v_stride, c.Hkv * c.D, c.vec, "v_stride"), c.D);
}

void bind_input_packed(const FormContext& c, const Args& a, KernelParams& p) {
  for (const auto& [ptr, name] : {std::pair<const void*, const char*>{a.q, "q"}, {a.k, "k"}, {a.v, "v"}})
    check_null(ptr, name, "when the spec's io.input is packed_qkv (use qkv)");
  if (c.any) check_present(a.qkv, "qkv", "when the spec's io.input is packed_qkv");
  check_aligned(a.qkv, c.align, "qkv");
  const int64_t stride = resolve_stride(a.qkv_stride, (c.Hq + 2 * c.Hkv) * c.D, c.vec, "qkv_stride");
  char* base = static_cast<char*>(a.qkv);
  p.in[kRoleQ] = token_major(base, stride, c.D);
  p.in[kRoleK] = token_major(base ? base + c.Hq * c.D * c.esize : nullptr, stride, c.D);
  p.in[kRoleV] = token_major(base ? base + (c.Hq + c.Hkv) * c.D * c.esize : nullptr, stride, c.D);
}

// ---------------------------------------------------------------- positions forms

// A positions array in device memory: explicit [num_tokens], or mrope [3, num_tokens]
// stream-major (temporal, height, width), as HF's position_ids of Qwen2-VL.
template <PositionsForm kForm>
void bind_positions_array(const FormContext& c, const Args& a, KernelParams& p) {
  const std::string when = fmt::format("when the spec's io.positions is {}", to_string(kForm));
  check_null(a.cu_seqlens, "cu_seqlens", when.c_str());
  check_null(a.start_pos, "start_pos", when.c_str());
  if (c.any)
    check_present(a.positions, "positions",
                  (kForm == PositionsForm::mrope ? when + " ([3, num_tokens])" : when).c_str());
  check_aligned(a.positions, a.positions_type == PositionsType::int64 ? 8 : 4, "positions");
  p.positions = a.positions;
  p.positions_are_int64 = a.positions_type == PositionsType::int64;
}

void bind_positions_varlen(const FormContext&, const Args& a, KernelParams& p) {
  check_null(a.positions, "positions", "when the spec's io.positions is varlen (use cu_seqlens)");
  require(a.batch >= 1, "batch", fmt::format("{} is not allowed: must be >= 1 with varlen positions", a.batch));
  check_present(a.cu_seqlens, "cu_seqlens", "when the spec's io.positions is varlen");
  p.cu_seqlens = a.cu_seqlens;
  p.start_pos = reinterpret_cast<const i64*>(a.start_pos);
  p.batch = a.batch;
}

// One sequence at an offset kept in device memory, so a captured graph replays decode steps
// while the caller advances start_pos[0] (HF's cache_position = arange(past, past + T)).
void bind_positions_offset(const FormContext&, const Args& a, KernelParams& p) {
  check_null(a.positions, "positions", "when the spec's io.positions is offset (use start_pos)");
  check_null(a.cu_seqlens, "cu_seqlens", "when the spec's io.positions is offset (one sequence)");
  require(a.batch == 0 || a.batch == 1, "batch",
          fmt::format("{} is not allowed: must be 0 or 1 with offset positions (one sequence)", a.batch));
  check_aligned(a.start_pos, 8, "start_pos");
  p.start_pos = reinterpret_cast<const i64*>(a.start_pos);
}

void check_offset_host(const Spec&, const Args& a) {
  if (a.num_tokens == 0) return;
  const int64_t start = a.start_pos ? a.start_pos[0] : 0;
  if (start < 0 || start > kMaxPosition + 1 - a.num_tokens)
    fail("start_pos", fmt::format("start_pos[0] = {} is not allowed: positions [start_pos[0], start_pos[0] + "
                                  "num_tokens) must lie in [0, 2^31)", start));
  if (a.seq_len > 0 && start + a.num_tokens > a.seq_len)
    fail("start_pos", fmt::format("start_pos[0] = {} is not allowed: the last position {} must be < seq_len = {}",
                                  start, start + a.num_tokens - 1, a.seq_len));
}

// ---------------------------------------------------------------- output forms (return grid rows)

int64_t bind_output_inplace(const FormContext&, const Args& a, KernelParams& p) {
  for (const auto& [ptr, name] :
       {std::pair<const void*, const char*>{a.q_out, "q_out"}, {a.k_out, "k_out"}, {a.v_out, "v_out"}})
    check_null(ptr, name, "when the spec's io.output is inplace");
  for (int r = 0; r < 3; ++r) p.out[r] = p.in[r];
  return a.num_tokens;
}

int64_t bind_output_separate(const FormContext& c, const Args& a, KernelParams& p) {
  check_qkv({a.q_out, a.k_out, a.v_out}, {"q_out", "k_out", "v_out"}, c.any, c.spec.io.copy_v, c.align,
            "when the spec's io.output is not inplace");
  p.out[kRoleQ] = token_major(a.q_out, resolve_stride(a.q_out_stride, c.Hq * c.D, c.vec, "q_out_stride"), c.D);
  p.out[kRoleK] = token_major(a.k_out, resolve_stride(a.k_out_stride, c.Hkv * c.D, c.vec, "k_out_stride"), c.D);
  p.out[kRoleV] = token_major(a.v_out, resolve_stride(a.v_out_stride, c.Hkv * c.D, c.vec, "v_out_stride"), c.D);
  return a.num_tokens;
}

int64_t bind_output_padded(const FormContext& c, const Args& a, KernelParams& p) {
  // Padding rows are written (zeros) even when no token arrives.
  check_qkv({a.q_out, a.k_out, a.v_out}, {"q_out", "k_out", "v_out"}, true, c.spec.io.copy_v, c.align,
            "when the spec's io.output is not inplace");
  require(a.max_seq_len >= 1 && a.max_seq_len <= (1 << 30), "max_seq_len",
          fmt::format("{} is not allowed: must be in [1, 2^30] for padded_bhsd", a.max_seq_len));
  require(a.q_out_stride == 0 && a.k_out_stride == 0 && a.v_out_stride == 0, "q_out_stride",
          "non-zero strides are not allowed for padded_bhsd (outputs are dense [B, H, S, D])");
  const int64_t S = a.max_seq_len, D = c.D;
  p.out[kRoleQ] = TensorRef{a.q_out, D, S * D, c.Hq * S * D};
  p.out[kRoleK] = TensorRef{a.k_out, D, S * D, c.Hkv * S * D};
  p.out[kRoleV] = TensorRef{a.v_out, D, S * D, c.Hkv * S * D};
  p.max_seq_len = a.max_seq_len;
  return int64_t(a.batch) * S;
}

// paged_kv: q back into q or into q_out; k and v (rotated k, copied v) into the K and V caches.
constexpr int64_t kMaxCachePages = int64_t(1) << 40;

// One cache: present, aligned for the kernel's stores, pages at least a page apart, and its
// bytes within int64 (pages * page stride * element size).
TensorRef bind_cache(const FormContext& c, void* cache, int64_t page_stride_arg, const char* name,
                     const char* stride_name, int64_t pages) {
  const IoSpec& io = c.spec.io;
  const int esize = cache_dtype_size(io.cache_dtype, c.spec.dtype);
  if (c.any) check_present(cache, name, "when the spec's io.output is paged_kv");
  check_aligned(cache, c.vec * esize, name);
  const int64_t page_elements = int64_t(io.page_size) * c.Hkv * c.D;
  const int64_t page_stride = resolve_stride(page_stride_arg, page_elements, c.vec, stride_name);
  int64_t bytes = 0;
  if (__builtin_mul_overflow(pages, page_stride, &bytes) || __builtin_mul_overflow(bytes, int64_t{esize}, &bytes))
    fail(stride_name, fmt::format("{} is not allowed: cache_num_pages {} pages of it overflow a 64-bit size",
                                  page_stride, pages));
  const bool hnd = io.cache_layout == CacheLayout::hnd;
  return TensorRef{cache, hnd ? c.D : c.Hkv * c.D, hnd ? int64_t(io.page_size) * c.D : c.D, page_stride};
}

// FP8 caches need their scales (finite, > 0, with a finite float reciprocal); others none.
float inverse_scale(const FormContext& c, float scale, const char* name) {
  if (c.spec.io.cache_dtype == CacheDType::auto_) {
    require(scale == 0.0f, name, fmt::format("{} is not allowed: must be 0 unless the spec's io.cache_dtype is fp8", scale));
    return 1.0f;
  }
  const float inverse = 1.0f / scale;
  require(std::isfinite(scale) && scale > 0.0f && std::isfinite(inverse), name,
          fmt::format("{} is not allowed: must be a finite number > 0 (FP8 {} stores fp8(x / {}))", scale,
                      to_string(c.spec.io.cache_dtype), name));
  return inverse;
}

int64_t bind_output_paged(const FormContext& c, const Args& a, KernelParams& p) {
  const IoSpec& io = c.spec.io;
  check_null(a.k_out, "k_out", "when the spec's io.output is paged_kv (rotated k goes to k_cache)");
  check_null(a.v_out, "v_out", "when the spec's io.output is paged_kv (v goes to v_cache)");
  if (io.q_output == QOutput::inplace) {
    check_null(a.q_out, "q_out", "when the spec's io.q_output is inplace (q is rotated in place)");
    p.out[kRoleQ] = p.in[kRoleQ];
  } else {
    if (c.any) check_present(a.q_out, "q_out", "when the spec's io.q_output is separate");
    check_aligned(a.q_out, c.align, "q_out");
    p.out[kRoleQ] = token_major(a.q_out, resolve_stride(a.q_out_stride, c.Hq * c.D, c.vec, "q_out_stride"), c.D);
  }
  require(a.cache_num_pages >= (c.any ? 1 : 0) && a.cache_num_pages <= kMaxCachePages, "cache_num_pages",
          fmt::format("{} is not allowed: must be in [1, 2^40] (pages in each of k_cache and v_cache)",
                      a.cache_num_pages));
  p.out[kRoleK] = bind_cache(c, a.k_cache, a.k_cache_page_stride, "k_cache", "k_cache_page_stride", a.cache_num_pages);
  p.out[kRoleV] = bind_cache(c, a.v_cache, a.v_cache_page_stride, "v_cache", "v_cache_page_stride", a.cache_num_pages);
  p.cache_pages = a.cache_num_pages;
  if (io.cache_index == CacheIndex::slot_mapping) {
    check_null(a.block_tables, "block_tables", "when the spec's io.cache_index is slot_mapping");
    require(a.max_blocks_per_seq == 0, "max_blocks_per_seq",
            fmt::format("{} is not allowed: must be 0 when the spec's io.cache_index is slot_mapping", a.max_blocks_per_seq));
    if (c.any) check_present(a.slot_mapping, "slot_mapping", "when the spec's io.cache_index is slot_mapping ([num_tokens])");
    check_aligned(a.slot_mapping, 8, "slot_mapping");
    p.slot_mapping = reinterpret_cast<const i64*>(a.slot_mapping);
  } else {
    check_null(a.slot_mapping, "slot_mapping", "when the spec's io.cache_index is block_tables");
    if (c.any) check_present(a.block_tables, "block_tables", "when the spec's io.cache_index is block_tables");
    require(a.max_blocks_per_seq >= (c.any ? 1 : 0) && a.max_blocks_per_seq <= kMaxPosition, "max_blocks_per_seq",
            fmt::format("{} is not allowed: must be in [1, 2^31) (block_tables is [batch, max_blocks_per_seq])",
                        a.max_blocks_per_seq));
    check_aligned(a.block_tables, 4, "block_tables");
    p.block_tables = a.block_tables;
    p.max_blocks_per_seq = a.max_blocks_per_seq;
  }
  p.cache_inv_scale[0] = inverse_scale(c, a.k_scale, "k_scale");
  p.cache_inv_scale[1] = inverse_scale(c, a.v_scale, "v_scale");
  return a.num_tokens;
}

// The slot each token writes (host arrays): every one -1 (slot_mapping only) or inside the
// caches, and no two tokens on one slot (their writes would race).
void check_paged_host(const Spec& spec, const Args& a) {
  const int64_t page_size = spec.io.page_size, slots = a.cache_num_pages * page_size;
  std::vector<std::pair<int64_t, int64_t>> taken;  // (slot, token)
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    int64_t slot;
    if (spec.io.cache_index == CacheIndex::slot_mapping) {
      slot = a.slot_mapping[t];
      if (slot == -1) continue;
      if (slot < 0 || slot >= slots)
        fail("slot_mapping", fmt::format("slot_mapping[{}] = {} is not allowed: must be -1 (not cached) or in [0, "
                                         "cache_num_pages * page_size = {})", t, slot, slots));
    } else {
      int b = 0;
      while (a.cu_seqlens[b + 1] <= t) ++b;  // host check: linear is fine, cu_seqlens was checked
      const int64_t position = (a.start_pos ? a.start_pos[b] : 0) + (t - a.cu_seqlens[b]);
      const int64_t block = position / page_size;
      if (block >= a.max_blocks_per_seq)
        fail("max_blocks_per_seq", fmt::format("{} is not allowed: sequence {} reaches position {}, in block {} of "
                                               "page_size {}", a.max_blocks_per_seq, b, position, block, page_size));
      const int64_t page = a.block_tables[b * a.max_blocks_per_seq + block];
      if (page < 0 || page >= a.cache_num_pages)
        fail("block_tables", fmt::format("block_tables[{}][{}] = {} is not allowed: sequence {} writes position {} "
                                         "there; must be in [0, cache_num_pages = {})",
                                         b, block, page, b, position, a.cache_num_pages));
      slot = page * page_size + position % page_size;
    }
    taken.emplace_back(slot, t);
  }
  std::sort(taken.begin(), taken.end());
  for (size_t i = 1; i < taken.size(); ++i)
    if (taken[i].first == taken[i - 1].first)
      fail(spec.io.cache_index == CacheIndex::slot_mapping ? "slot_mapping" : "block_tables",
           fmt::format("tokens {} and {} both write cache slot {} (page {}, offset {}): each token needs its own slot",
                       taken[i - 1].second, taken[i].second, taken[i].first, taken[i].first / page_size,
                       taken[i].first % page_size));
}

// ---------------------------------------------------------------- buffers of one launch, per form

// Stores a buffer's pointer (and token stride) into its Args fields.
template <auto Ptr, auto Stride = nullptr>
void bind_to(Args& a, const LaunchShape&, void* ptr, int64_t stride) {
  a.*Ptr = static_cast<std::remove_reference_t<decltype(a.*Ptr)>>(ptr);
  if constexpr (!std::is_null_pointer_v<decltype(Stride)>) a.*Stride = stride;
}

// A padded output also carries S.
template <auto Ptr>
void bind_padded(Args& a, const LaunchShape& shape, void* ptr, int64_t) {
  a.*Ptr = ptr;
  a.max_seq_len = static_cast<int>(shape.max_seq_len);
}

void bind_positions_ptr(Args& a, const LaunchShape& shape, void* ptr, int64_t) {
  a.positions = ptr;
  a.positions_type = shape.positions_type;
}

void bind_cu_seqlens_ptr(Args& a, const LaunchShape& shape, void* ptr, int64_t) {
  a.cu_seqlens = static_cast<const int32_t*>(ptr);
  a.batch = shape.batch;
}

using Bind = void (*)(Args&, const LaunchShape&, void*, int64_t);

// Elements of one q (k) head a launch moves: the rotated part, plus the tail when it is copied.
// paged_kv: the caches take whole k heads; q in place keeps an unchanged tail.
int64_t q_moved_per_head(const Spec& spec) {
  return tail_moves(q_inplace(spec), tail_changes(spec)) ? spec.head_dim : spec.rotary_dim;
}
int64_t k_moved_per_head(const Spec& spec) {
  return rotary_tail_moves(spec) ? spec.head_dim : spec.rotary_dim;
}

// A storage-dtype buffer of `rows` dense rows.
BufferDesc data_buffer(const Spec& spec, const char* name, BufferKind kind, int64_t rows, int64_t row_elements,
                       int64_t moved, bool token_rows, Bind bind) {
  return {name, kind, rows, row_elements, row_elements, dtype_size(spec.dtype), moved, token_rows, bind};
}

// q, k(, v) with `rows` rows (tokens, or padded slots) each.
void qkv_buffers(const Spec& s, BufferKind kind, int64_t rows, bool token_rows, const char* const (&names)[3],
                 Bind q, Bind k, Bind v, std::vector<BufferDesc>& out) {
  const int64_t D = s.head_dim;
  out.push_back(data_buffer(s, names[0], kind, rows, s.num_q_heads * D, s.num_q_heads * q_moved_per_head(s),
                            token_rows, q));
  out.push_back(data_buffer(s, names[1], kind, rows, s.num_kv_heads * D, s.num_kv_heads * k_moved_per_head(s),
                            token_rows, k));
  if (s.io.copy_v)
    out.push_back(data_buffer(s, names[2], kind, rows, s.num_kv_heads * D, s.num_kv_heads * D, token_rows, v));
}

void buffers_input_separate(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  qkv_buffers(s, BufferKind::input, shape.tokens, true, {"q", "k", "v"},
              bind_to<&ropejit_args::q, &ropejit_args::q_stride>, bind_to<&ropejit_args::k, &ropejit_args::k_stride>,
              bind_to<&ropejit_args::v, &ropejit_args::v_stride>, out);
}

void buffers_input_packed(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  const int64_t D = s.head_dim, Hq = s.num_q_heads, Hkv = s.num_kv_heads;
  const int64_t moved = Hq * q_moved_per_head(s) + Hkv * k_moved_per_head(s) + (s.io.copy_v ? Hkv * D : 0);
  out.push_back(data_buffer(s, "qkv", BufferKind::input, shape.tokens, (Hq + 2 * Hkv) * D, moved, true,
                            bind_to<&ropejit_args::qkv, &ropejit_args::qkv_stride>));
}

void buffers_positions_explicit(const Spec&, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  const int bytes = shape.positions_type == PositionsType::int64 ? 8 : 4;
  out.push_back({"positions", BufferKind::positions, shape.tokens, 1, 1, bytes, 1, false, bind_positions_ptr});
}

void buffers_positions_mrope(const Spec&, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  const int bytes = shape.positions_type == PositionsType::int64 ? 8 : 4;
  out.push_back({"positions", BufferKind::positions, 3 * shape.tokens, 1, 1, bytes, 1, false, bind_positions_ptr});
}

void buffers_positions_varlen(const Spec&, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  out.push_back(
      {"cu_seqlens", BufferKind::cu_seqlens, int64_t(shape.batch) + 1, 1, 1, 4, 1, false, bind_cu_seqlens_ptr});
  out.push_back({"start_pos", BufferKind::start_pos, shape.batch, 1, 1, 8, 1, false,
                 bind_to<&ropejit_args::start_pos>});
}

void buffers_positions_offset(const Spec&, const LaunchShape&, std::vector<BufferDesc>& out) {
  out.push_back({"start_pos", BufferKind::start_pos, 1, 1, 1, 8, 1, false, bind_to<&ropejit_args::start_pos>});
}

void buffers_output_inplace(const Spec&, const LaunchShape&, std::vector<BufferDesc>& out) {
  for (BufferDesc& b : out)
    if (b.kind == BufferKind::input) b.kind = BufferKind::inout;
}

constexpr const char* kOutputNames[3] = {"q_out", "k_out", "v_out"};

void buffers_output_separate(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  qkv_buffers(s, BufferKind::output, shape.tokens, true, kOutputNames,
              bind_to<&ropejit_args::q_out, &ropejit_args::q_out_stride>,
              bind_to<&ropejit_args::k_out, &ropejit_args::k_out_stride>,
              bind_to<&ropejit_args::v_out, &ropejit_args::v_out_stride>, out);
}

void buffers_output_padded(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  qkv_buffers(s, BufferKind::output, int64_t(shape.batch) * shape.max_seq_len, false, kOutputNames,
              bind_padded<&ropejit_args::q_out>, bind_padded<&ropejit_args::k_out>, bind_padded<&ropejit_args::v_out>,
              out);
}

// paged_kv: q rewritten in place (packed: only its q part) or q_out; the two caches (each token
// writes one slot); the slot mapping or the block tables.
void bind_cache_ptr(Args& a, const LaunchShape& shape, void* ptr, int64_t stride, bool k) {
  (k ? a.k_cache : a.v_cache) = ptr;
  (k ? a.k_cache_page_stride : a.v_cache_page_stride) = stride;
  (k ? a.k_scale : a.v_scale) = k ? shape.k_scale : shape.v_scale;
  a.cache_num_pages = shape.cache_pages;
}

void bind_block_tables_ptr(Args& a, const LaunchShape& shape, void* ptr, int64_t) {
  a.block_tables = static_cast<const int32_t*>(ptr);
  a.max_blocks_per_seq = shape.max_blocks_per_seq;
}

void buffers_output_paged(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  const int64_t D = s.head_dim, Hq = s.num_q_heads, Hkv = s.num_kv_heads;
  if (s.io.q_output == QOutput::inplace) {
    for (BufferDesc& b : out)
      if (b.kind == BufferKind::input && (b.name == std::string_view("q") || b.name == std::string_view("qkv"))) {
        b.kind = BufferKind::inout;
        b.written_row_elements = Hq * q_moved_per_head(s);
      }
  } else {
    out.push_back(data_buffer(s, "q_out", BufferKind::output, shape.tokens, Hq * D, Hq * D, true,
                              bind_to<&ropejit_args::q_out, &ropejit_args::q_out_stride>));
  }
  const int esize = cache_dtype_size(s.io.cache_dtype, s.dtype);
  const int64_t page_elements = int64_t(s.io.page_size) * Hkv * D;
  for (bool k : {true, false}) {
    BufferDesc cache{k ? "k_cache" : "v_cache", BufferKind::cache, shape.cache_pages, page_elements, page_elements,
                     esize, Hkv * D, false,
                     k ? +[](Args& a, const LaunchShape& sh, void* p, int64_t st) { bind_cache_ptr(a, sh, p, st, true); }
                       : +[](Args& a, const LaunchShape& sh, void* p, int64_t st) { bind_cache_ptr(a, sh, p, st, false); }};
    cache.moved_rows = shape.tokens;  // one slot per token
    out.push_back(cache);
  }
  if (s.io.cache_index == CacheIndex::slot_mapping)
    out.push_back({"slot_mapping", BufferKind::slot_mapping, shape.tokens, 1, 1, 8, 1, false,
                   bind_to<&ropejit_args::slot_mapping>});
  else  // moved: about one entry per sequence (a page's tokens share theirs)
    out.push_back({"block_tables", BufferKind::block_tables, shape.batch, shape.max_blocks_per_seq,
                   shape.max_blocks_per_seq, 4, 1, false, bind_block_tables_ptr});
}

void buffers_bias(const Spec& s, std::vector<BufferDesc>& out) {
  if (!s.io.qkv_bias) return;
  const int64_t row = int64_t(s.num_q_heads + 2 * s.num_kv_heads) * s.head_dim;
  out.push_back(data_buffer(s, "bias", BufferKind::bias, 1, row, row, false, bind_to<&ropejit_args::bias>));
}

// One descriptor per form, indexed by the spec's enum: a new form is one row and its binder.
using AddBuffers = void (*)(const Spec&, const LaunchShape&, std::vector<BufferDesc>&);
struct InputFormOps {
  InputForm form;
  void (*bind)(const FormContext&, const Args&, KernelParams&);
  AddBuffers buffers;
};
struct PositionsFormOps {
  PositionsForm form;
  void (*bind)(const FormContext&, const Args&, KernelParams&);
  void (*check_host)(const Spec&, const Args&);  // reads host arrays (host backend only)
  AddBuffers buffers;
};
struct OutputFormOps {
  OutputForm form;
  int64_t (*bind)(const FormContext&, const Args&, KernelParams&);
  AddBuffers buffers;  // after the inputs: inplace marks them rewritten
  void (*check_host)(const Spec&, const Args&);  // reads host arrays (host backend only), or null
};

void check_positions_host_form(const Spec&, const Args& a) {
  if (a.num_tokens > 0) check_positions_host(a, a.num_tokens);
}

void check_mrope_host(const Spec&, const Args& a) {
  if (a.num_tokens > 0) check_positions_host(a, 3 * a.num_tokens);
}

constexpr InputFormOps kInputForms[] = {{InputForm::separate, bind_input_separate, buffers_input_separate},
                                        {InputForm::packed_qkv, bind_input_packed, buffers_input_packed}};
constexpr PositionsFormOps kPositionsForms[] = {
    {PositionsForm::explicit_, bind_positions_array<PositionsForm::explicit_>, check_positions_host_form, buffers_positions_explicit},
    {PositionsForm::varlen, bind_positions_varlen, check_varlen_host, buffers_positions_varlen},
    {PositionsForm::offset, bind_positions_offset, check_offset_host, buffers_positions_offset},
    {PositionsForm::mrope, bind_positions_array<PositionsForm::mrope>, check_mrope_host, buffers_positions_mrope}};
constexpr OutputFormOps kOutputForms[] = {
    {OutputForm::inplace, bind_output_inplace, buffers_output_inplace, nullptr},
    {OutputForm::separate, bind_output_separate, buffers_output_separate, nullptr},
    {OutputForm::padded_bhsd, bind_output_padded, buffers_output_padded, nullptr},
    {OutputForm::paged_kv, bind_output_paged, buffers_output_paged, check_paged_host}};

template <class Ops, size_t N, class Form>
const Ops& find_form(const Ops (&table)[N], Form form) {
  for (const Ops& ops : table)
    if (ops.form == form) return ops;
  throw Error(Status::internal, fmt::format("no launch descriptor for io form {}", to_string(form)));
}

// QKV bias: one row of [(Hq + 2 Hkv) D], split by role like the packed input.
void bind_bias(const FormContext& c, const Args& a, KernelParams& p) {
  if (!c.spec.io.qkv_bias) {
    check_null(a.bias, "bias", "when the spec's io.qkv_bias is false");
    return;
  }
  if (c.any || c.spec.io.output == OutputForm::padded_bhsd)
    check_present(a.bias, "bias", "when the spec's io.qkv_bias is true");
  check_aligned(a.bias, c.align, "bias");
  const char* b = static_cast<const char*>(a.bias);
  p.bias[kRoleQ] = b;
  p.bias[kRoleK] = b ? b + c.Hq * c.D * c.esize : nullptr;
  p.bias[kRoleV] = b ? b + (c.Hq + c.Hkv) * c.D * c.esize : nullptr;
}

// QK-norm weights (qk_norm with weight per_head): one [D] vector each for q and k, in the
// storage dtype, read as vectors like the data.
void bind_norm_weights(const FormContext& c, const Args& a, KernelParams& p) {
  const QkNorm& norm = c.spec.qk_norm;
  const bool wanted = norm.enabled && norm.weight == NormWeight::per_head;
  for (int role = 0; role < 2; ++role) {
    const void* weight = role == 0 ? a.q_norm_weight : a.k_norm_weight;
    const char* name = role == 0 ? "q_norm_weight" : "k_norm_weight";
    if (!wanted) {
      check_null(weight, name, "unless the spec's qk_norm has weight per_head");
      continue;
    }
    if (c.any) check_present(weight, name, "when the spec's qk_norm has weight per_head ([head_dim])");
    check_aligned(weight, c.align, name);
    p.norm_weight[role] = weight;
  }
}

void buffers_norm_weights(const Spec& s, std::vector<BufferDesc>& out) {
  if (!s.qk_norm.enabled || s.qk_norm.weight != NormWeight::per_head) return;
  out.push_back(data_buffer(s, "q_norm_weight", BufferKind::norm_weight, 1, s.head_dim, s.head_dim, false,
                            bind_to<&ropejit_args::q_norm_weight>));
  out.push_back(data_buffer(s, "k_norm_weight", BufferKind::norm_weight, 1, s.head_dim, s.head_dim, false,
                            bind_to<&ropejit_args::k_norm_weight>));
}

// Run-time length for methods whose frequencies depend on it (dynamic NTK, LongRoPE).
void bind_run_length(const FormContext& c, const Args& a, KernelParams& p) {
  const Spec& spec = c.spec;
  const RopeType type = spec.rope.type;
  const bool needs_length = (type == RopeType::dynamic && !spec.rope.seq_len) || type == RopeType::longrope;
  if (needs_length && c.any)
    require(a.seq_len >= 1 && a.seq_len <= kMaxPosition + 1, "seq_len",
            fmt::format("{} is not allowed: rope_type {} needs seq_len = max(position) + 1 in [1, 2^31]",
                        a.seq_len, to_string(type)));
  if (type == RopeType::dynamic && !spec.rope.seq_len && a.seq_len > spec.max_position_embeddings) {
    p.use_dynamic_base = 1;
    p.dynamic_log2_base = std::log2(static_cast<double>(static_cast<float>(dynamic_ntk_base(spec, a.seq_len))));
  }
  if (type == RopeType::longrope) p.use_long_table = longrope_uses_long(spec, a.seq_len) ? 1 : 0;
}

}  // namespace

CheckedLaunch check_launch(const Spec& spec, int vec, const Args& a, bool host_memory) {
  require(a.num_tokens >= 0 && a.num_tokens <= kMaxTokens, "num_tokens",
          fmt::format("{} is not allowed: must be in [0, 2^40]", a.num_tokens));
  const int esize = dtype_size(spec.dtype);
  const FormContext c{spec, vec, esize, vec * esize, a.num_tokens > 0,
                      spec.head_dim, spec.num_q_heads, spec.num_kv_heads};
  CheckedLaunch out;
  KernelParams& p = out.params;
  p.num_tokens = a.num_tokens;
  find_form(kInputForms, spec.io.input).bind(c, a, p);
  bind_bias(c, a, p);
  bind_norm_weights(c, a, p);
  const PositionsFormOps& positions = find_form(kPositionsForms, spec.io.positions);
  positions.bind(c, a, p);
  const OutputFormOps& output = find_form(kOutputForms, spec.io.output);
  out.rows = output.bind(c, a, p);
  bind_run_length(c, a, p);
  // On the host backend the pointers are host memory: the arrays' contents are checked too.
  if (host_memory) {
    positions.check_host(spec, a);
    if (output.check_host) output.check_host(spec, a);
  }
  return out;
}

std::vector<BufferDesc> launch_buffers(const Spec& spec, const LaunchShape& shape) {
  std::vector<BufferDesc> out;
  find_form(kInputForms, spec.io.input).buffers(spec, shape, out);
  buffers_bias(spec, out);
  buffers_norm_weights(spec, out);
  find_form(kPositionsForms, spec.io.positions).buffers(spec, shape, out);
  find_form(kOutputForms, spec.io.output).buffers(spec, shape, out);
  return out;
}

Args bind_buffers(const std::vector<BufferDesc>& buffers, const LaunchShape& shape, const std::vector<void*>& ptrs,
                  int64_t seq_len) {
  Args a;
  a.num_tokens = shape.tokens;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const BufferDesc& b = buffers[i];
    b.bind(a, shape, ptrs.at(i), b.row_stride == b.row_elements ? 0 : b.row_stride);  // 0: dense
  }
  a.seq_len = seq_len;
  return a;
}

int64_t bytes_moved(const Spec& spec, int64_t tokens, int batch, int64_t max_seq_len) {
  int64_t bytes = 0;
  for (const BufferDesc& b : launch_buffers(spec, {tokens, batch, max_seq_len, PositionsType::int32}))
    bytes += b.moved_bytes();
  return bytes;
}

}  // namespace ropejit
