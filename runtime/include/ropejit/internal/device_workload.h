#pragma once
// One workload in backend memory: copies ("sets") of the per-launch data (inputs and outputs)
// to rotate through so launches do not hit in cache, one copy of the shared tables (bias,
// positions, sequences), and the launch arguments of each set. The check harness (one set),
// the tuner and the benchmark all launch from it.
#include <map>
#include <string>
#include <vector>

#include "ropejit/internal/backend.h"
#include "ropejit/internal/kernel_variant.h"
#include "ropejit/internal/workload.h"
#include "ropejit/runtime.h"

namespace ropejit {

/// One buffer read back: its name and bytes.
struct HostTensor {
  std::string name;   ///< "q", "k", "v", "qkv", "q_out", ...
  std::string bytes;
};

/// Buffers of one workload on a backend; frees them on destruction.
class DeviceWorkload {
 public:
  /// Uploads `host` into `set_count` copies of its data buffers (outputs poisoned as in `host`).
  DeviceWorkload(Backend& backend, HostWorkload host, int set_count);
  ~DeviceWorkload();
  DeviceWorkload(const DeviceWorkload&) = delete;
  DeviceWorkload& operator=(const DeviceWorkload&) = delete;

  /// Bytes of one set (the data buffers: inputs + outputs).
  static int64_t set_bytes(const HostWorkload& host);
  /// The host data the sets were filled from.
  const HostWorkload& host() const { return host_; }
  /// Number of sets.
  size_t set_count() const { return set_count_; }
  /// Launch arguments of set `set` (Kernel::launch checks them).
  Args args(size_t set) const;
  /// Rows of the grid (tokens, or batch * S for padded output); valid after params().
  int64_t rows() const { return rows_; }
  /// Checked parameters of set 0 for `variant` (its vector width and table).
  const KernelParams& params(const KernelVariant& variant);
  /// The parameters of set `set`: `first` (from params()) with its tensors moved to that set.
  KernelParams params_of_set(const KernelParams& first, size_t set) const;
  /// Set 0 back to the host contents (inputs, and outputs poisoned with 0xff).
  void reset_first_set();
  /// Buffer `buffer` (index into host().buffers) of set 0 as it is now.
  std::string read(size_t buffer) const;
  /// What set 0's launch wrote: the outputs, or the inputs when the spec works in place.
  std::vector<HostTensor> read_first_set() const;

 private:
  /// One buffer of every set in one allocation: set s at base + s * stride (shared: stride 0).
  struct Block {
    char* base = nullptr;
    size_t stride = 0;
  };
  Block add_block(const std::string& content, size_t sets);
  void release();

  Backend& backend_;
  HostWorkload host_;
  size_t set_count_ = 1;
  std::vector<Block> blocks_;  ///< one per host_.buffers entry
  int64_t rows_ = 0;
  std::map<const KernelVariant*, KernelParams> params_;
};

}  // namespace ropejit
