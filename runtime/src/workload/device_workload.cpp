// Workloads in backend memory: per-set data buffers, shared tables, launch arguments per set.
#include "ropejit/internal/device_workload.h"

#include <algorithm>
#include <cstring>

namespace ropejit {

DeviceWorkload::DeviceWorkload(Backend& backend, HostWorkload host, int set_count)
    : backend_(backend), host_(std::move(host)), set_count_(static_cast<size_t>(std::max(1, set_count))) {
  try {
    for (const HostBuffer& b : host_.buffers) blocks_.push_back(add_block(b.bytes, b.desc.is_data() ? set_count_ : 0));
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
  for (const Block& b : blocks_)
    if (b.base) backend_.free(b.base);
  blocks_.clear();
}

int64_t DeviceWorkload::set_bytes(const HostWorkload& host) {
  int64_t bytes = 0;
  for (const HostBuffer& b : host.buffers)
    if (b.desc.is_data()) bytes += int64_t(b.bytes.size());
  return bytes;
}

DeviceWorkload::Block DeviceWorkload::add_block(const std::string& content, size_t sets) {
  Block block;
  if (sets == 0) {  // shared by every set; empty (no tokens) stays null
    if (content.empty()) return block;
    block.base = static_cast<char*>(backend_.alloc(content.size()));
    backend_.copy_to_device(block.base, content.data(), content.size());
    return block;
  }
  block.stride = (std::max<size_t>(content.size(), 1) + 255) / 256 * 256;  // every set 256-byte aligned
  block.base = static_cast<char*>(backend_.alloc(block.stride * sets));
  if (content.empty()) return block;
  // Replicated through a host chunk of up to 64 MiB: few, large copies (none for huge sets).
  const size_t per_chunk = std::clamp<size_t>((size_t(64) << 20) / block.stride, 1, sets);
  std::string chunk;
  if (per_chunk > 1) {
    chunk.assign(per_chunk * block.stride, '\0');
    for (size_t k = 0; k < per_chunk; ++k) std::memcpy(&chunk[k * block.stride], content.data(), content.size());
  }
  for (size_t s = 0; s < sets; s += per_chunk) {
    if (per_chunk == 1) backend_.copy_to_device(block.base + s * block.stride, content.data(), content.size());
    else
      backend_.copy_to_device(block.base + s * block.stride, chunk.data(), std::min(per_chunk, sets - s) * block.stride);
  }
  return block;
}

Args DeviceWorkload::args(size_t set) const {
  std::vector<BufferDesc> descs;
  std::vector<void*> ptrs;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    descs.push_back(host_.buffers[i].desc);
    ptrs.push_back(blocks_[i].base ? blocks_[i].base + set * blocks_[i].stride : nullptr);
  }
  return bind_buffers(descs, host_.shape, ptrs, host_.seq_len, host_.from_seq_len);
}

const KernelParams& DeviceWorkload::params(const KernelVariant& variant) {
  auto it = params_.find(&variant);
  if (it != params_.end()) return it->second;
  const CheckedLaunch checked = variant.prepare(args(0));
  rows_ = checked.rows;
  return params_.emplace(&variant, checked.params).first->second;
}

KernelParams DeviceWorkload::params_of_set(const KernelParams& first, size_t set) const {
  KernelParams p = first;
  auto move = [&](TensorRef& t) {
    char* ptr = static_cast<char*>(t.ptr);
    for (const Block& b : blocks_)
      if (b.stride && ptr >= b.base && ptr < b.base + b.stride) {
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
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const std::string& bytes = host_.buffers[i].bytes;
    if (blocks_[i].stride && !bytes.empty()) backend_.copy_to_device(blocks_[i].base, bytes.data(), bytes.size());
  }
}

std::string DeviceWorkload::read(size_t buffer) const {
  std::string bytes(host_.buffers.at(buffer).bytes.size(), '\0');
  if (!bytes.empty()) backend_.copy_to_host(bytes.data(), blocks_[buffer].base, bytes.size());
  return bytes;
}

std::vector<HostTensor> DeviceWorkload::read_first_set() const {
  std::vector<HostTensor> out;
  for (size_t i = 0; i < host_.buffers.size(); ++i)
    if (host_.buffers[i].desc.is_written()) out.push_back({host_.buffers[i].desc.name, read(i)});
  return out;
}

}  // namespace ropejit
