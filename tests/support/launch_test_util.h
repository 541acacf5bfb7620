#pragma once
// Test helpers of the launch argument checks: host storage for fake tensors, and "this launch is
// refused with an error naming this argument".
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "launch/launch_args.h"
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

}  // namespace ropejit::test
