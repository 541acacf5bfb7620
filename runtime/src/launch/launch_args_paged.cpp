// The paged_kv output form's launch arguments and buffers (docs/spec.md "RoPE + paged KV-cache
// append"): q in place or q_out, rotated k and v into K and V caches through a slot mapping or
// block tables, FP8 scales.
#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>
#include <utility>

#include "launch/cache_rows.h"

namespace ropejit::launch_detail {

namespace {

// paged_kv: q back into q or into q_out; k and v (rotated k, copied v) into the K and V caches.
constexpr int64_t kMaxCachePages = int64_t(1) << 40;

// q_output separate: q_out [T, Hq, D] written (in place, q's own view is rewritten).
constexpr TensorRow kQOut[] = {
    {"q_out", "q_out_stride", nullptr, {"T", "Hq", "D"}, BufferKind::output,
     [](const Spec& s) { return s.io.q_output != QOutput::inplace; }, "when the spec's io.q_output is separate",
     {ParamSlot::out_q}, nullptr, nullptr, FieldUse::required, &element::q_output},
};

// Elements of a slot a token writes: its kv heads' rows.
int64_t slot_elements(const Spec& s) { return s.num_kv_heads * cache_row_elements(s.io.cache_dtype, s.head_dim); }
constexpr auto kKCache = cache_rows<false, slot_elements>();
constexpr auto kVCache = cache_rows<true, slot_elements>();  // copy_v false: K = V, no V cache

// cache_layout fp8_indexer: the indexer's K cache [pages, page_size, D + 4] of bytes as vLLM's
// tensor is shaped; a page holds its [page_size, D] codes, then its [page_size] float32 scales.
// cache_layout fp8_deepseek_v4: DeepSeek-V4's cache [pages, page_size, 576 + 8] of bytes: a page's
// slots of 576 bytes (448 codes, 64 bf16), then their 8 scale bytes (pages padded further by the
// caller's page stride: FlashMLA and SGLang round a page up to a multiple of 576 bytes).
int64_t deepseek_v4_slot_bytes(const Spec&) { return kDeepseekV4TokenBytes + kDeepseekV4ScaleBytes; }
constexpr TensorRow kOwnLayoutCaches[] = {
    {"k_cache", "k_cache_page_stride", nullptr, {"pages", "page_size", "D+4"}, BufferKind::cache, indexer_cache,
     kPagedWhy, {ParamSlot::out_k}, indexer_slot_bytes, nullptr, FieldUse::required, &element::cache, nullptr,
     RowLayout::paged, {RowField{"cache_num_pages"}, RowField{"k_scale", FieldUse::unused}}, "T"},
    {"k_cache", "k_cache_page_stride", nullptr, {"pages", "page_size", "576+8"}, BufferKind::cache,
     deepseek_v4_cache, kPagedWhy, {ParamSlot::out_k}, deepseek_v4_slot_bytes, nullptr, FieldUse::required,
     &element::cache, nullptr, RowLayout::paged, {RowField{"cache_num_pages"}, RowField{"k_scale", FieldUse::unused}},
     "T"},
};

// The slot each token writes: slot_mapping [T] (page * page_size + offset, or -1), or
// block_tables [B, max_blocks_per_seq] (each sequence's pages), read.
constexpr TensorRow kCacheIndex[] = {
    {"slot_mapping", nullptr, nullptr, {"T"}, BufferKind::slot_mapping,
     [](const Spec& s) { return s.io.cache_index == CacheIndex::slot_mapping; },
     "when the spec's io.cache_index is slot_mapping ([num_tokens])", {ParamSlot::slot_mapping}, nullptr, nullptr,
     FieldUse::required, &element::int64},
    {"block_tables", nullptr, nullptr, {"B", "max_blocks_per_seq"}, BufferKind::block_tables,
     [](const Spec& s) { return s.io.cache_index == CacheIndex::block_tables; },
     "when the spec's io.cache_index is block_tables", {ParamSlot::block_tables},
     [](const Spec&) { return int64_t{1}; }, nullptr,  // moved: about an entry a sequence (a page's tokens share it)
     FieldUse::required, &element::int32, nullptr, RowLayout::rows, {RowField{"max_blocks_per_seq"}}},
};

// Scales the launch writes beside each cache, one slot a token: the float32 per-(slot, kv head)
// scales (which replace k_scale / v_scale), or NVFP4's e4m3 block scales in the cache's page layout
// (dense whatever the cache's page stride).
template <bool kV>
bool per_head_scales(const Spec& s) { return cache_scale_per_head(s) && !indexer_cache(s) && (!kV || s.io.copy_v); }
template <bool kV, bool kHnd>
bool block_scales(const Spec& s) { return nvfp4_cache(s) && cache_form<kHnd, true, kV>(s); }
int64_t block_scale_slot(const Spec& s) { return s.num_kv_heads * (s.head_dim / kNvfp4Block); }
constexpr const char* kPerHeadWhy = "when the spec's io.cache_scale is per_token_head";
constexpr const char* kBlockWhy = "when the spec's io.cache_dtype is nvfp4 (its block scales)";

template <bool kV, bool kHnd>
constexpr TensorRow block_scale_row() {
  return {kV ? "v_scale_cache" : "k_scale_cache", nullptr, nullptr, page_dims(kHnd, "D/16"), BufferKind::output,
          block_scales<kV, kHnd>, kBlockWhy, {kV ? ParamSlot::scale_cache_v : ParamSlot::scale_cache_k},
          block_scale_slot, nullptr, FieldUse::required, &element::block_scale, nullptr, RowLayout::rows, {}, "T"};
}

template <bool kV>
constexpr TensorRow per_head_scale_row() {  // [slots, Hkv] float32
  return {kV ? "v_scale_cache" : "k_scale_cache", nullptr, nullptr, {"slots", "Hkv"}, BufferKind::output,
          per_head_scales<kV>, kPerHeadWhy, {kV ? ParamSlot::scale_cache_v : ParamSlot::scale_cache_k}, nullptr,
          nullptr, FieldUse::required, &element::fp32, nullptr, RowLayout::rows, {}, "T"};
}

constexpr TensorRow kCacheScales[] = {
    per_head_scale_row<false>(), block_scale_row<false, false>(), block_scale_row<false, true>(),
    per_head_scale_row<true>(),  block_scale_row<true, false>(),  block_scale_row<true, true>(),
};

}  // namespace

}  // namespace ropejit::launch_detail

namespace ropejit {

TensorRef cache_tensor(const Spec& spec, void* cache, int64_t page_stride) {
  if (deepseek_v4_cache(spec)) return TensorRef{cache, kDeepseekV4TokenBytes, kDeepseekV4TokenBytes, page_stride};
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
  bind_tensor_rows(c, a, p, kKCache);
  bind_tensor_rows(c, a, p, kOwnLayoutCaches);
  bind_tensor_rows(c, a, p, kVCache);
  bind_cache_index(c, a, p);
  bind_tensor_rows(c, a, p, kCacheScales);
  if (!caller_cache_scale(c.spec)) {  // no scale, or the launch computes each of its own
    p.cache_inv_scale[0] = p.cache_inv_scale[1] = 1.0f;
    return a.num_tokens;
  }
  p.cache_inv_scale[0] = inverse_scale(c.spec.io.cache_dtype, a.k_scale, "k_scale");
  p.cache_inv_scale[1] = io.copy_v ? inverse_scale(c.spec.io.cache_dtype, a.v_scale, "v_scale") : 1.0f;
  return a.num_tokens;
}

void bind_cache_index(const FormContext& c, const Args& a, KernelParams& p) {
  require(a.cache_num_pages >= (c.any ? 1 : 0) && a.cache_num_pages <= kMaxCachePages, "cache_num_pages",
          fmt::format("{} is not allowed: must be in [1, 2^40] (pages in each cache)", a.cache_num_pages));
  p.cache_pages = a.cache_num_pages;
  bind_tensor_rows(c, a, p, kCacheIndex);
  if (c.spec.io.cache_index == CacheIndex::block_tables) {
    require(a.max_blocks_per_seq >= (c.any ? 1 : 0) && a.max_blocks_per_seq <= kMaxPosition, "max_blocks_per_seq",
            fmt::format("{} is not allowed: must be in [1, 2^31) (block_tables is [batch, max_blocks_per_seq])",
                        a.max_blocks_per_seq));
    p.max_blocks_per_seq = a.max_blocks_per_seq;
  }
}

void buffers_cache_index(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(s, shape, kCacheIndex, out);
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
  buffers_tensor_rows(s, shape, kKCache, out);
  buffers_tensor_rows(s, shape, kOwnLayoutCaches, out);
  buffers_tensor_rows(s, shape, kVCache, out);
  buffers_cache_index(s, shape, out);
  buffers_tensor_rows(s, shape, kCacheScales, out);
}

}  // namespace ropejit::launch_detail
