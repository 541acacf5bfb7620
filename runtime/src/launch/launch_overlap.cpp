// No buffer a launch writes may share a byte with another buffer of the launch: a kernel
// that writes one while reading or writing the other races with itself. The exception is an
// output passed as the very view of its own input (q_out == q, same stride): each element is
// read and then written by one thread, which is in place. Views into one allocation (q and k
// of a fused QKV tensor, K and V halves of a combined paged cache) are fine when their bytes
// interleave without meeting: views with one row stride are compared row by row, exactly.
#include <algorithm>
#include <string_view>

#include "launch/launch_checks.h"
#include "launch/tensor_rows.h"

namespace ropejit::launch_detail {

namespace {

// A buffer's pointer and row stride (elements; 0: dense) as the caller passed them: the Args
// field of the buffer's name and its stride field.
struct ArgView {
  const void* ptr = nullptr;
  int64_t stride = 0;
};

ArgView arg_view(const Args& a, const BufferDesc& b) {
  const char* stride = b.stride_field();
  return {field_pointer(kArgsFields[args_field_index(b.name)], a),
          stride ? field_integer(kArgsFields[args_field_index(stride)], a) : 0};
}

// The bytes a launch may touch: `rows` rows of `width` bytes, `stride` bytes apart.
struct Extent {
  const char* name;
  uintptr_t begin;
  int64_t rows, width, stride;
  bool written;
  uintptr_t end() const { return begin + static_cast<uintptr_t>((rows - 1) * stride + width); }
};

// Rows of equal stride meet when some row k of b (relative to a's first) starts before a row
// of a ends and ends after it starts: the smallest k past a's start decides.
bool rows_meet(const Extent& a, const Extent& b) {
  const int64_t s = a.stride;
  const int64_t d = static_cast<int64_t>(b.begin - a.begin);  // may be negative (two's complement)
  // k with d + k*s + b.width > 0, and rows i of a, j of b: k = j - i in [-(a.rows - 1), b.rows - 1].
  const int64_t num = -d - b.width;
  int64_t k = num >= 0 ? num / s + 1 : -((-num) / s) + ((-num) % s == 0 ? 1 : 0);
  k = std::max(k, -(a.rows - 1));
  return k <= b.rows - 1 && d + k * s < a.width;
}

bool overlap(const Extent& a, const Extent& b) {
  if (a.end() <= b.begin || b.end() <= a.begin) return false;
  if (a.stride == b.stride && a.stride > 0 && a.width <= a.stride && b.width <= b.stride) return rows_meet(a, b);
  return true;  // hulls meet and the rows are not comparable: refused rather than guessed
}

// q_out as q's own view (and k_out / k, v_out / v): in place through aliasing.
bool same_role_view(const Extent& a, const Extent& b) {
  const std::string_view x = a.name, y = b.name;
  const bool pair = (x == "q_out" && y == "q") || (x == "k_out" && y == "k") || (x == "v_out" && y == "v") ||
                    (y == "q_out" && x == "q") || (y == "k_out" && x == "k") || (y == "v_out" && x == "v");
  return pair && a.begin == b.begin && a.stride == b.stride && a.width == b.width && a.rows == b.rows;
}

}  // namespace

void check_no_overlap(const Spec& spec, const Args& a) {
  if (a.num_tokens == 0) return;
  const LaunchShape shape = shape_from_args(a);
  std::vector<Extent> extents;
  for (const BufferDesc& b : launch_buffers(spec, shape)) {
    const ArgView view = arg_view(a, b);
    if (!view.ptr || b.rows <= 0 || b.row_elements <= 0) continue;
    const int64_t stride = (view.stride ? view.stride : b.row_stride) * b.element_bytes;
    extents.push_back({b.name, reinterpret_cast<uintptr_t>(view.ptr), b.rows, b.row_elements * b.element_bytes,
                       stride, b.is_written()});
  }
  for (size_t i = 0; i < extents.size(); ++i)
    for (size_t j = 0; j < extents.size(); ++j) {
      const Extent& w = extents[i];
      const Extent& x = extents[j];
      if (i == j || !w.written || (x.written && j < i)) continue;  // each written pair once
      if (same_role_view(w, x) || !overlap(w, x)) continue;
      fail(w.name, fmt::format("{} is not allowed: its bytes [{:#x}, {:#x}) overlap {} at [{:#x}, {:#x}), and the "
                               "launch writes {} (buffers a launch writes must not share memory with any other; "
                               "for in place, pass an output as the same view as its input, or use io.output inplace)",
                               ptr_text(reinterpret_cast<const void*>(w.begin)), w.begin, w.end(), x.name, x.begin,
                               x.end(), w.name));
    }
}

}  // namespace ropejit::launch_detail
