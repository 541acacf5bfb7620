// The paged_kv output form's launch arguments and buffers (docs/spec.md "RoPE + paged KV-cache
// append"): q in place or q_out, rotated k and v into K and V caches through a slot mapping or
// block tables, FP8 scales.
#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>
#include <utility>

#include "launch/tensor_rows.h"

namespace ropejit::launch_detail {

namespace {

// paged_kv: q back into q or into q_out; k and v (rotated k, copied v) into the K and V caches.
constexpr int64_t kMaxCachePages = int64_t(1) << 40;

// Stores a cache's pointer, page stride and scale, and the page count.
void bind_cache_ptr(Args& a, const LaunchShape& shape, void* ptr, int64_t stride, bool k) {
  (k ? a.k_cache : a.v_cache) = ptr;
  (k ? a.k_cache_page_stride : a.v_cache_page_stride) = stride;
  (k ? a.k_scale : a.v_scale) = k ? shape.k_scale : shape.v_scale;
  a.cache_num_pages = shape.cache_pages;
}

// q_output separate: q_out [T, Hq, D] written (in place, q's own view is rewritten).
constexpr TensorRow kQOut[] = {
    {"q_out", "q_out_stride", nullptr, {"T", "Hq", "D"}, BufferKind::output,
     [](const Spec& s) { return s.io.q_output != QOutput::inplace; }, "when the spec's io.q_output is separate",
     {ParamSlot::out_q}},
};

// cache_index slot_mapping: each token's slot [T] (page * page_size + offset, or -1), read.
constexpr TensorRow kSlotMapping[] = {
    {"slot_mapping", nullptr, nullptr, {"T"}, BufferKind::slot_mapping, nullptr,
     "when the spec's io.cache_index is slot_mapping ([num_tokens])", {ParamSlot::slot_mapping}, nullptr, nullptr,
     FieldUse::required, RowElement::int64},
};

void bind_block_tables_ptr(Args& a, const LaunchShape& shape, void* ptr, int64_t) {
  a.block_tables = static_cast<const int32_t*>(ptr);
  a.max_blocks_per_seq = shape.max_blocks_per_seq;
}

}  // namespace

}  // namespace ropejit::launch_detail

namespace ropejit {

TensorRef cache_tensor(const Spec& spec, void* cache, int64_t page_stride) {
  if (const auto cache_row = launch_detail::launch_op(spec.op).cache_row) {  // one row a slot
    const int64_t row = cache_row(spec);
    return TensorRef{cache, row, row, page_stride};
  }
  // NVFP4: byte strides of rows of D / 2 bytes (two codes a byte).
  const int64_t D = cache_row_elements(spec.io.cache_dtype, spec.head_dim), page_size = spec.io.page_size;
  if (spec.io.cache_layout == CacheLayout::hnd) return TensorRef{cache, D, page_size * D, page_stride};
  return TensorRef{cache, spec.num_kv_heads * D, D, page_stride};
}

}  // namespace ropejit

namespace ropejit::launch_detail {

// One cache: present, aligned for the kernel's stores, pages at least a page apart, and its
// bytes within int64 (pages * page stride * element size).
TensorRef bind_cache(const FormContext& c, void* cache, int64_t page_stride_arg, const char* name,
                     const char* stride_name, int64_t pages) {
  const IoSpec& io = c.spec.io;
  const int esize = cache_dtype_size(io.cache_dtype, c.spec.dtype);
  if (c.any) check_present(cache, name, "when the spec's io.output is paged_kv");
  // NVFP4: rows of bytes, a vector's vec / 2 of them.
  const bool nvfp4 = io.cache_dtype == CacheDType::nvfp4;
  check_aligned(cache, nvfp4 ? c.vec / 2 : c.vec * esize, name);
  const int64_t page_elements = int64_t(io.page_size) * c.Hkv * cache_row_elements(io.cache_dtype, c.D);
  const int64_t page_stride = resolve_stride(page_stride_arg, page_elements, nvfp4 ? c.vec / 2 : c.vec, stride_name);
  int64_t bytes = 0;
  if (__builtin_mul_overflow(pages, page_stride, &bytes) || __builtin_mul_overflow(bytes, int64_t{esize}, &bytes))
    fail(stride_name, fmt::format("{} is not allowed: cache_num_pages {} pages of it overflow a 64-bit size",
                                  page_stride, pages));
  return cache_tensor(c.spec, cache, page_stride);
}

// FP8 caches need their scales (finite, > 0, with a finite float reciprocal); others have none
// (the scales are unused there: check_unused_fields refuses one that is set). NVFP4's reciprocal
// must be normal (scale <= 2^126): the kernel's division by a block scale is exact for it.
float inverse_scale(CacheDType type, float scale, const char* name) {
  if (type == CacheDType::auto_) return 1.0f;
  const float inverse = 1.0f / scale;
  const bool nvfp4 = type == CacheDType::nvfp4;
  require(std::isfinite(scale) && scale > 0.0f && (nvfp4 ? std::isnormal(inverse) : std::isfinite(inverse)), name,
          nvfp4 ? fmt::format("{} is not allowed: must be a number in (0, 2^126] (the NVFP4 global scale: values "
                              "dequantize as e2m1 * block scale * {})", scale, name)
              : fmt::format("{} is not allowed: must be a finite number > 0 (FP8 {} stores fp8(x / {}))", scale,
                            to_string(type), name));
  return inverse;
}

int64_t bind_output_paged(const FormContext& c, const Args& a, KernelParams& p) {
  const IoSpec& io = c.spec.io;
  if (io.q_output == QOutput::inplace) p.out[kRoleQ] = p.in[kRoleQ];
  bind_tensor_rows(c, a, p, kQOut);
  p.out[kRoleK] = bind_cache(c, a.k_cache, a.k_cache_page_stride, "k_cache", "k_cache_page_stride", a.cache_num_pages);
  // copy_v false: K = V (DeepSeek-V4), the engine reads the K cache as V and there is no V cache.
  if (io.copy_v)
    p.out[kRoleV] = bind_cache(c, a.v_cache, a.v_cache_page_stride, "v_cache", "v_cache_page_stride", a.cache_num_pages);
  bind_cache_index(c, a, p);
  // Scales the launch writes beside each cache: NVFP4's e4m3 block scales (bytes), or the float32
  // per-(slot, kv head) scales (which replace k_scale / v_scale).
  const bool nvfp4 = nvfp4_cache(c.spec);
  if (nvfp4 || cache_scale_per_head(c.spec)) {
    const char* why = nvfp4 ? "when the spec's io.cache_dtype is nvfp4 (its block scales)"
                            : "when the spec's io.cache_scale is per_token_head";
    for (int role = kRoleK; role <= (io.copy_v ? kRoleV : kRoleK); ++role) {
      float* scales = role == kRoleK ? a.k_scale_cache : a.v_scale_cache;
      const char* name = role == kRoleK ? "k_scale_cache" : "v_scale_cache";
      if (c.any) check_present(scales, name, why);
      if (!nvfp4) check_aligned(scales, 4, name);
      p.cache_scale_out[role - kRoleK] = scales;
    }
    if (!nvfp4) {
      p.cache_inv_scale[0] = p.cache_inv_scale[1] = 1.0f;
      return a.num_tokens;
    }
  }
  p.cache_inv_scale[0] = inverse_scale(c.spec.io.cache_dtype, a.k_scale, "k_scale");
  p.cache_inv_scale[1] = io.copy_v ? inverse_scale(c.spec.io.cache_dtype, a.v_scale, "v_scale") : 1.0f;
  return a.num_tokens;
}

void bind_cache_index(const FormContext& c, const Args& a, KernelParams& p) {
  const IoSpec& io = c.spec.io;
  require(a.cache_num_pages >= (c.any ? 1 : 0) && a.cache_num_pages <= kMaxCachePages, "cache_num_pages",
          fmt::format("{} is not allowed: must be in [1, 2^40] (pages in each cache)", a.cache_num_pages));
  p.cache_pages = a.cache_num_pages;
  if (io.cache_index == CacheIndex::slot_mapping) {
    bind_tensor_rows(c, a, p, kSlotMapping);
  } else {
    if (c.any) check_present(a.block_tables, "block_tables", "when the spec's io.cache_index is block_tables");
    require(a.max_blocks_per_seq >= (c.any ? 1 : 0) && a.max_blocks_per_seq <= kMaxPosition, "max_blocks_per_seq",
            fmt::format("{} is not allowed: must be in [1, 2^31) (block_tables is [batch, max_blocks_per_seq])",
                        a.max_blocks_per_seq));
    check_aligned(a.block_tables, 4, "block_tables");
    p.block_tables = a.block_tables;
    p.max_blocks_per_seq = a.max_blocks_per_seq;
  }
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

// q rewritten in place (packed: only its q part) or q_out; the two caches (each token writes
// one slot); the slot mapping or the block tables.
void buffers_output_paged(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  const int64_t Hq = s.num_q_heads;
  if (s.io.q_output == QOutput::inplace) {
    for (BufferDesc& b : out)
      if (b.kind == BufferKind::input && (b.name == std::string_view("q") || b.name == std::string_view("qkv"))) {
        b.kind = BufferKind::inout;
        b.written_row_elements = Hq * q_moved_per_head(s);
      }
  }
  buffers_tensor_rows(s, shape, kQOut, out);
  out.push_back(cache_buffer(s, shape, true));
  if (s.io.copy_v) out.push_back(cache_buffer(s, shape, false));  // else K = V: no V cache
  out.push_back(cache_index_buffer(s, shape));
  if (nvfp4_cache(s) || cache_scale_per_head(s))  // the scales written beside each cache
    for (bool k : {true, false}) {
      if (!k && !s.io.copy_v) break;
      if (nvfp4_cache(s)) {
        out.push_back(block_scale_buffer(s, shape, k));
        continue;
      }
      BufferDesc scales = scale_buffer(s, k ? "k_scale_cache" : "v_scale_cache", shape.cache_pages * s.io.page_size,
                                       s.num_kv_heads,
                                       k ? bind_to<&ropejit_args::k_scale_cache> : bind_to<&ropejit_args::v_scale_cache>,
                                       {"slots", "Hkv"});  // [slots, Hkv] float32
      scales.moved_rows = shape.tokens;  // one slot per token
      out.push_back(scales);
    }
}

// A cache's page dims in its layout, with `row` elements a head row.
std::array<const char*, 4> page_dims(const Spec& s, const char* row) {
  return s.io.cache_layout == CacheLayout::hnd ? std::array<const char*, 4>{"pages", "Hkv", "page_size", row}
                                               : std::array<const char*, 4>{"pages", "page_size", "Hkv", row};
}

// An NVFP4 cache's e4m3 block scales: D / 16 bytes a head row, in the cache's page layout, dense
// whatever the cache's page stride; one row a page.
BufferDesc block_scale_buffer(const Spec& s, const LaunchShape& shape, bool k) {
  const int64_t page_bytes = int64_t(s.io.page_size) * s.num_kv_heads * (s.head_dim / kNvfp4Block);
  BufferDesc scales{k ? "k_scale_cache" : "v_scale_cache", BufferKind::output, shape.cache_pages, page_bytes,
                    page_bytes, 1, page_bytes, false,
                    k ? bind_to<&ropejit_args::k_scale_cache> : bind_to<&ropejit_args::v_scale_cache>,
                    page_dims(s, "D/16")};
  scales.fp8 = CacheDType::fp8_e4m3;
  scales.moved_rows = shape.tokens;  // a slot's row per token: moved bytes
  scales.moved_row_elements = s.num_kv_heads * (s.head_dim / kNvfp4Block);
  return scales;
}

BufferDesc cache_buffer(const Spec& s, const LaunchShape& shape, bool k) {
  const int esize = cache_dtype_size(s.io.cache_dtype, s.dtype);
  const int64_t row = cache_row_elements(s.io.cache_dtype, s.head_dim);
  const int64_t page_elements = int64_t(s.io.page_size) * s.num_kv_heads * row;
  // FP8 caches need their scale (static); others, and per-head scales, leave it 0.
  const FieldUse scale_use =
      !quantized_cache(s) || cache_scale_per_head(s) ? FieldUse::unused : FieldUse::required;
  BufferDesc cache{k ? "k_cache" : "v_cache", BufferKind::cache, shape.cache_pages, page_elements, page_elements,
                   esize, int64_t(s.num_kv_heads) * row, false,
                   k ? +[](Args& a, const LaunchShape& sh, void* p, int64_t st) { bind_cache_ptr(a, sh, p, st, true); }
                     : +[](Args& a, const LaunchShape& sh, void* p, int64_t st) { bind_cache_ptr(a, sh, p, st, false); },
                   page_dims(s, s.io.cache_dtype == CacheDType::nvfp4 ? "D/2" : "D"),
                   {BoundField{"cache_num_pages", FieldUse::required},
                    {k ? "k_cache_page_stride" : "v_cache_page_stride", FieldUse::optional},
                    {k ? "k_scale" : "v_scale", scale_use}}};
  cache.moved_rows = shape.tokens;  // one slot per token
  return cache;
}

BufferDesc cache_index_buffer(const Spec& s, const LaunchShape& shape) {
  if (s.io.cache_index == CacheIndex::slot_mapping) {
    std::vector<BufferDesc> one;
    buffers_tensor_rows(s, shape, kSlotMapping, one);
    return one.at(0);
  }
  // moved: about one entry per sequence (a page's tokens share theirs)
  return {"block_tables", BufferKind::block_tables, shape.batch, shape.max_blocks_per_seq, shape.max_blocks_per_seq, 4,
          1, false, bind_block_tables_ptr, {"B", "max_blocks_per_seq"},
          {BoundField{"max_blocks_per_seq", FieldUse::required}}};
}

}  // namespace ropejit::launch_detail
