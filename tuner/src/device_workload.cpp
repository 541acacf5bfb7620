// Tuning workloads in backend memory.
#include "device_workload.h"

#include <algorithm>
#include <cstring>


namespace ropejit {

DeviceWorkload::DeviceWorkload(Backend& backend, const Spec& spec, const WorkloadShape& shape, HostWorkload host,
                               int set_count)
    : backend_(backend), spec_(spec), shape_(shape), host_(std::move(host)),
      set_count_(static_cast<size_t>(std::max(1, set_count))) {
  try {
    for (const auto& t : host_.inputs) inputs_.push_back(add_block(&t.bytes, t.bytes.size()));
    for (const auto& t : host_.outputs) outputs_.push_back(add_block(nullptr, t.bytes.size()));
    bias_ = upload(host_.bias.data(), host_.bias.size());
    positions_ = upload(host_.positions.data(), host_.positions.size() * sizeof(int32_t));
    cu_seqlens_ = static_cast<int32_t*>(upload(host_.cu_seqlens.data(), host_.cu_seqlens.size() * sizeof(int32_t)));
    start_pos_ = static_cast<int64_t*>(upload(host_.start_pos.data(), host_.start_pos.size() * sizeof(int64_t)));
  } catch (...) {
    release();
    throw;
  }
}

DeviceWorkload::~DeviceWorkload() { release(); }

void DeviceWorkload::release() {
  try {
    backend_.synchronize();  // no launch may still read what is freed
  } catch (...) {
  }
  for (const Block& b : inputs_) backend_.free(b.base);
  for (const Block& b : outputs_) backend_.free(b.base);
  for (void* p : shared_) backend_.free(p);
  inputs_.clear();
  outputs_.clear();
  shared_.clear();
}

int64_t DeviceWorkload::set_bytes(const HostWorkload& host) {
  int64_t bytes = 0;
  for (const auto& t : host.inputs) bytes += int64_t(t.bytes.size());
  for (const auto& t : host.outputs) bytes += int64_t(t.bytes.size());
  return bytes;
}

DeviceWorkload::Block DeviceWorkload::add_block(const std::string* content, size_t bytes) {
  Block block;
  block.stride = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;  // every set 256-byte aligned
  block.base = static_cast<char*>(backend_.alloc(block.stride * set_count_));
  if (!content) return block;
  // Replicated through a host chunk of up to 64 MiB: few, large copies.
  const size_t per_chunk = std::clamp<size_t>((size_t(64) << 20) / block.stride, 1, set_count_);
  std::string chunk(per_chunk * block.stride, '\0');
  for (size_t k = 0; k < per_chunk; ++k) std::memcpy(&chunk[k * block.stride], content->data(), content->size());
  for (size_t s = 0; s < set_count_; s += per_chunk)
    backend_.copy_to_device(block.base + s * block.stride, chunk.data(), std::min(per_chunk, set_count_ - s) * block.stride);
  return block;
}

void* DeviceWorkload::upload(const void* data, size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = backend_.alloc(bytes);
  shared_.push_back(p);
  backend_.copy_to_device(p, data, bytes);
  return p;
}

Args DeviceWorkload::first_set_args() const {
  Args a;
  a.num_tokens = shape_.tokens;
  if (spec_.io.input == InputForm::packed_qkv) {
    a.qkv = inputs_[0].base;
  } else {
    a.q = inputs_[0].base;
    a.k = inputs_[1].base;
    if (spec_.io.copy_v) a.v = inputs_[2].base;
  }
  if (!outputs_.empty()) {
    a.q_out = outputs_[0].base;
    a.k_out = outputs_[1].base;
    if (spec_.io.copy_v) a.v_out = outputs_[2].base;
  }
  a.bias = bias_;
  a.positions = positions_;
  a.cu_seqlens = cu_seqlens_;
  a.start_pos = start_pos_;
  a.batch = spec_.io.positions == PositionsForm::varlen ? shape_.batch : 0;
  a.max_seq_len = spec_.io.output == OutputForm::padded_bhsd ? static_cast<int>(shape_.max_seq_len) : 0;
  a.seq_len = host_.seq_len;
  return a;
}

const KernelParams& DeviceWorkload::params(const KernelVariant& variant) {
  auto it = params_.find(&variant);
  if (it != params_.end()) return it->second;
  const CheckedLaunch checked = variant.prepare(first_set_args());
  rows_ = checked.rows;
  return params_.emplace(&variant, checked.params).first->second;
}

KernelParams DeviceWorkload::params_of_set(const KernelParams& first, size_t set) const {
  KernelParams p = first;
  auto move = [&](TensorRef& t) {
    char* ptr = static_cast<char*>(t.ptr);
    for (const auto* blocks : {&inputs_, &outputs_})
      for (const Block& b : *blocks)
        if (ptr >= b.base && ptr < b.base + b.stride) {
          t.ptr = ptr + set * b.stride;
          return;
        }
  };
  for (int r = 0; r < 3; ++r) {
    move(p.in[r]);
    move(p.out[r]);
  }
  return p;
}

void DeviceWorkload::reset_first_set() {
  for (size_t i = 0; i < host_.inputs.size(); ++i)
    backend_.copy_to_device(inputs_[i].base, host_.inputs[i].bytes.data(), host_.inputs[i].bytes.size());
  for (size_t i = 0; i < host_.outputs.size(); ++i) {
    const std::string poison(host_.outputs[i].bytes.size(), '\xff');
    backend_.copy_to_device(outputs_[i].base, poison.data(), poison.size());
  }
}

std::vector<HostTensor> DeviceWorkload::read_first_set() const {
  const bool inplace = host_.outputs.empty();
  const auto& tensors = inplace ? host_.inputs : host_.outputs;
  std::vector<HostTensor> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    HostTensor t{tensors[i].name, std::string(tensors[i].bytes.size(), '\0')};
    backend_.copy_to_host(t.bytes.data(), inplace ? inputs_[i].base : outputs_[i].base, t.bytes.size());
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace ropejit
