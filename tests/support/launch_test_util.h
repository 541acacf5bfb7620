#pragma once
// Test helpers of the launch argument checks: host storage for fake tensors, and "this launch is
// refused with an error naming this argument".
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launch/launch_args.h"  // private: check_launch, launch_buffers, bind_buffers: the checks these helpers drive
#include "ropejit/config.h"

namespace ropejit::test {

/// 16-byte aligned host storage large enough for any tensor in these tests.
struct Storage {
  alignas(16) std::vector<uint8_t> bytes = std::vector<uint8_t>(1 << 20, 0x3c);
  /// The byte at `offset`.
  void* at(size_t offset) { return bytes.data() + offset; }
};

/// check_launch refuses `args` with invalid_argument naming `field`, its message containing `fragment`.
inline void expect_rejected(const Spec& spec, const Args& args, const std::string& field, const std::string& fragment,
                            bool host_memory = true) {
  try {
    check_launch(spec, default_config(spec).vec, args, host_memory);
    FAIL() << "accepted; expected an error naming " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::invalid_argument) << e.what();
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

/// Every buffer of `buffers` (launch_buffers at `shape`) placed in `storage`, 64-byte aligned
/// one after another, and bound into Args with seq_len (and from_seq_len) `length` where the spec
/// needs it. Fits the small shapes tests use (asserted).
inline Args bound_args(const Spec& spec, const std::vector<BufferDesc>& buffers, const LaunchShape& shape,
                       Storage& storage, int64_t length = 16) {
  std::vector<void*> ptrs;
  size_t at = 0;
  for (const BufferDesc& b : buffers) {
    ptrs.push_back(storage.at(at));
    at += (b.bytes() + 63) / 64 * 64;
  }
  EXPECT_LE(at, storage.bytes.size());
  return bind_buffers(buffers, shape, ptrs, needs_seq_len(spec) ? length : 0,
                      written_rope(spec) && needs_seq_len(*written_rope(spec)) ? length : 0);
}

/// Sets field `f` of `a` off its default: pointers to `pointer`, numbers to 1.
inline void set_off_default(ropejit_args& a, const ArgsField& f, void* pointer) {
  char* at = reinterpret_cast<char*>(&a) + f.offset;
  const int64_t i64 = 1;
  const int i32 = 1;
  const float f32 = 1.0f;
  switch (f.kind) {
    case ArgsFieldKind::pointer: std::memcpy(at, &pointer, sizeof pointer); break;
    case ArgsFieldKind::int64: std::memcpy(at, &i64, sizeof i64); break;
    case ArgsFieldKind::float32: std::memcpy(at, &f32, sizeof f32); break;
    default: std::memcpy(at, &i32, sizeof i32); break;  // int, positions type
  }
}

}  // namespace ropejit::test
