#pragma once
// One tuning workload in backend memory: copies ("sets") of the inputs and outputs to rotate
// through, shared positions / sequences / bias, and the checked kernel parameters per set.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "kernel_variant.h"
#include "ropejit/runtime.h"
#include "workload_data.h"

namespace ropejit {

/// Buffers of one workload on a backend; frees them on destruction.
class DeviceWorkload {
 public:
  /// Uploads `host` into `set_count` copies (inputs and outputs per copy).
  DeviceWorkload(Backend& backend, const Spec& spec, const WorkloadShape& shape, HostWorkload host, int set_count);
  ~DeviceWorkload();
  DeviceWorkload(const DeviceWorkload&) = delete;
  DeviceWorkload& operator=(const DeviceWorkload&) = delete;

  /// Bytes of one set (inputs + outputs).
  static int64_t set_bytes(const HostWorkload& host);
  /// The host data the sets were filled from.
  const HostWorkload& host() const { return host_; }
  /// Number of sets.
  size_t set_count() const { return set_count_; }
  /// Rows of the grid (tokens, or batch * S for padded output); valid after params().
  int64_t rows() const { return rows_; }
  /// Checked parameters of set 0 for `variant` (its vector width and table).
  const KernelParams& params(const KernelVariant& variant);
  /// The parameters of set `set`: `first` (from params()) with its tensors moved to that set.
  KernelParams params_of_set(const KernelParams& first, size_t set) const;
  /// Set 0 back to the host inputs, its outputs filled with 0xff bytes (NaN in every dtype).
  void reset_first_set();
  /// What set 0's launch wrote: the outputs, or the inputs when the spec works in place.
  std::vector<HostTensor> read_first_set() const;

 private:
  /// One tensor of every set in one allocation: set s at base + s * stride.
  struct Block {
    char* base = nullptr;
    size_t stride = 0;
  };
  Block add_block(const std::string* content, size_t bytes);
  Args first_set_args() const;
  void* upload(const void* data, size_t bytes);
  void release();

  Backend& backend_;
  Spec spec_;
  WorkloadShape shape_;
  HostWorkload host_;
  size_t set_count_ = 1;
  std::vector<Block> inputs_, outputs_;
  std::vector<void*> shared_;
  void* bias_ = nullptr;
  void* positions_ = nullptr;
  int32_t* cu_seqlens_ = nullptr;
  int64_t* start_pos_ = nullptr;
  int64_t rows_ = 0;
  std::map<const KernelVariant*, KernelParams> params_;
};

}  // namespace ropejit
