#include "ropejit/check/harness.h"

#include <algorithm>
#include <random>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "ropejit/internal/backend.h"
#include "ropejit/internal/device_workload.h"
#include "reference_detail.h"

namespace ropejit::check {

namespace {

// Marks in `written` (a byte each) the bytes of the elements `expected` says the launch writes,
// `esize` bytes each from the tensor's byte offset (NVFP4: two elements a byte).
void mark_written(std::vector<uint8_t>& written, const ref::RefTensor& expected, const ref::ActualTensor& actual,
                  int esize) {
  const bool nibbles = expected.cache_dtype == CacheDType::nvfp4;  // two elements a byte
  for (int64_t index = 0; index < expected.size(); ++index) {
    if (!expected.untouched.empty() && expected.untouched[index]) continue;
    const int64_t e = index % expected.head_dim;
    const size_t at = static_cast<size_t>(expected.byte_offset) +
                      (nibbles ? static_cast<size_t>(ref::actual_offset(expected, actual, index - e) + e / 2)
                               : static_cast<size_t>(ref::actual_offset(expected, actual, index) * esize));
    for (int b = 0; b < esize && at + b < written.size(); ++b) written[at + b] = 1;
  }
}

// Bytes of `after` that differ from `before` outside the elements the launch must write: row
// gaps, cache slots no token maps to, the k and v part of a packed buffer rotated in place.
int64_t changed_outside_written(const std::string& before, const std::string& after,
                                const std::vector<uint8_t>& written) {
  int64_t changed = 0;
  for (size_t at = 0; at < before.size(); ++at) changed += !written[at] && before[at] != after[at];
  return changed;
}

// The bytes of one element of `expected` (a part of a buffer of mixed elements: its own type's),
// else the buffer's.
int part_element_bytes(const Spec& spec, const ref::RefTensor& expected, int buffer_bytes) {
  if (expected.buffer.empty()) return buffer_bytes;
  if (expected.exact_bytes) return 1;
  return expected.cache_dtype != CacheDType::auto_ ? 1 : dtype_size(expected.dtype.value_or(spec.dtype));
}

// Where a written buffer's elements are: token rows at their stride, dense padded tensors, or
// cache pages at their stride in the spec's cache layout.
// Token rows hold dense heads of the expected tensor's width (D; MLA's absorbed q: kv_lora_rank + d).
ref::ActualTensor actual_view(const Spec& spec, const BufferDesc& desc, const std::string& bytes,
                              const ref::RefTensor& expected) {
  if (desc.kind == BufferKind::cache) {
    const TensorRef cache = cache_tensor(spec, nullptr, desc.row_stride);
    return {bytes.data(), cache.token_stride, cache.head_stride, cache.batch_stride};
  }
  if (nvfp4_cache(spec) && std::string_view(desc.name).find("_scale_cache") != std::string_view::npos) {
    // The block scales: the cache's row strides (D / 2 bytes a head row) / 8, dense pages.
    const TensorRef cache = cache_tensor(spec, nullptr, 0);
    return {bytes.data(), cache.token_stride / 8, cache.head_stride / 8, desc.row_stride};
  }
  if (desc.token_rows) return {bytes.data(), desc.row_stride, expected.head_dim, 0};
  return {bytes.data(), 0, 0, 0};  // padded: dense
}

// True for NVFP4 V block scales in TensorRT-LLM's 4-token interleave.
bool interleaved_scales(const Spec& spec, const BufferDesc& desc) {
  return nvfp4_cache(spec) && spec.io.v_scale_layout == BlockScaleLayout::interleave4 &&
         std::string_view(desc.name) == "v_scale_cache";
}

// Those scales put back in linear order (each page and head's [page_size, D / 16] tile: token t,
// block s from (t / 4) * 4 S + 4 s + t % 4).
std::string linear_block_scales(const Spec& spec, const std::string& bytes) {
  const int64_t S = spec.head_dim / kNvfp4Block, P = spec.io.page_size;
  std::string out = bytes;
  for (int64_t tile = 0; tile + P * S <= static_cast<int64_t>(bytes.size()); tile += P * S)
    for (int64_t t = 0; t < P; ++t)
      for (int64_t s = 0; s < S; ++s)
        out[static_cast<size_t>(tile + t * S + s)] = bytes[static_cast<size_t>(tile + (t / 4) * 4 * S + 4 * s + t % 4)];
  return out;
}

}  // namespace

bool CaseReport::ok() const {
  if (checks.empty() || untouched_violations != 0) return false;
  return std::all_of(checks.begin(), checks.end(), [](const auto& c) { return c.second.ok(); });
}

std::string CaseReport::summary() const {
  std::string out = fmt::format("seed {} tokens {} batch {} S {} seq_len {}: {}\n", seed, checked_tokens, batch,
                                max_seq_len, run_length, ok() ? "ok" : "FAILED");
  for (const auto& [name, check] : checks) out += fmt::format("  {}: {}\n", name, check.summary());
  if (untouched_violations) out += fmt::format("  {} bytes outside the outputs changed\n", untouched_violations);
  return out;
}

int64_t checked_tokens_for(const Spec& spec, int64_t elements) {
  const int64_t row = std::max<int64_t>(1, int64_t(spec.num_q_heads + 2 * spec.num_kv_heads) * spec.head_dim);
  return std::max<int64_t>(1, elements / row);
}

namespace {

// The random workload of a case: `o`'s shape, drawn from `seed`.
WorkloadOptions workload_options(const Kernel& kernel, const CaseOptions& o, uint64_t seed) {
  WorkloadOptions w;
  w.tokens = o.tokens;
  w.batch = o.batch;
  w.max_slack = 2;  // padded S = longest sequence + 0..2 rows of padding only
  w.positions_type = o.positions_type;
  w.max_position = o.max_position;
  w.stride_vec = o.strided ? kernel.config_for(o.tokens).vec : 0;  // gaps between rows must stay intact
  w.seed = seed;
  w.cos_sin_rows = o.cos_sin_rows;
  return w;
}

}  // namespace

CaseReport run_case(Runtime& runtime, const Kernel& kernel, const CaseOptions& o) {
  const Spec& spec = kernel.spec();
  Backend& backend = runtime_backend(runtime);
  if (o.check_tokens > 0 && o.check_tokens < o.tokens) {
    CaseOptions small = o;
    small.tokens = o.check_tokens;
    small.check_tokens = 0;
    small.timing_repeats = 0;
    // The config timed at o.tokens, fixed, so the check covers the very kernel that is timed.
    CaseReport report = run_case(runtime, runtime.get(spec, kernel.config_for(o.tokens)), small);
    // Then o.tokens launched (a launch error surfaces) and timed, not compared: the report keeps
    // the checked case's shape and takes the timed launch's bytes.
    DeviceWorkload device(backend, make_host_workload(spec, workload_options(kernel, o, report.seed)), 1);
    report.bytes_moved = device.host().bytes_moved();
    const Args args = device.args(0);
    kernel.launch(args, nullptr);
    backend.synchronize();
    if (o.timing_repeats > 0)
      report.time_us = backend.time_calls([&](void* stream) { kernel.launch(args, stream); }, o.timing_repeats);
    return report;
  }
  CaseReport report;
  report.seed = o.seed ? o.seed : std::random_device{}() * 0x9e3779b97f4a7c15ull + std::random_device{}();
  report.checked_tokens = o.tokens;
  DeviceWorkload device(backend, make_host_workload(spec, workload_options(kernel, o, report.seed)), 1);
  const HostWorkload& host = device.host();
  report.batch = host.shape.batch;
  report.max_seq_len = host.shape.max_seq_len;
  report.run_length = host.seq_len;
  report.bytes_moved = host.bytes_moved();

  ref::RefProblem problem;
  problem.num_tokens = o.tokens;
  problem.positions = host.positions;
  problem.cu_seqlens = host.cu_seqlens;
  problem.start_pos = host.start_pos;
  problem.max_seq_len = host.shape.max_seq_len;
  problem.run_length = host.seq_len;
  problem.slot_mapping = host.slot_mapping;
  problem.block_tables = host.block_tables;
  problem.max_blocks_per_seq = host.shape.max_blocks_per_seq;
  problem.cache_pages = host.shape.cache_pages;
  problem.k_scale = host.shape.k_scale;
  problem.v_scale = host.shape.v_scale;
  problem.q_scale = host.shape.q_scale;
  ref::detail::check_op(spec.op).problem_inputs(spec, host, problem);  // the op's own inputs

  const Args args = device.args(0);
  kernel.launch(args, nullptr);
  backend.synchronize();
  std::vector<std::string> after(host.buffers.size());
  for (size_t i = 0; i < host.buffers.size(); ++i)
    if (host.buffers[i].desc.is_data()) {
      after[i] = device.read(i);
      if (interleaved_scales(spec, host.buffers[i].desc)) after[i] = linear_block_scales(spec, after[i]);
    }
  if (o.timing_repeats > 0)
    report.time_us = backend.time_calls([&](void* stream) { kernel.launch(args, stream); }, o.timing_repeats);

  // Every written buffer against the reference (its tensor: the name without "_out"), and
  // nothing written beyond what it expects; read-only inputs must be unchanged.
  ref::RefOutputs expected = ref::reference_outputs(spec, problem);
  if (nvfp4_cache(spec))  // the codes are judged at the block scales the launch wrote (checked below)
    for (size_t i = 0; i < host.buffers.size(); ++i) {
      const std::string name = host.buffers[i].desc.name;
      if (name != "k_scale_cache" && name != "v_scale_cache") continue;
      const ref::RefTensor* scales = expected.find(name);
      ref::RefTensor* cache = nullptr;
      for (ref::RefTensor& t : expected.tensors)
        if (t.name == name.substr(0, 1) + "_cache") cache = &t;
      if (!scales || !cache) throw Error(Status::internal, "reference has no NVFP4 tensors for " + name);
      const ref::ActualTensor view = actual_view(spec, host.buffers[i].desc, after[i], *scales);
      std::vector<uint8_t> codes(static_cast<size_t>(scales->size()));
      for (int64_t at = 0; at < scales->size(); ++at)
        codes[static_cast<size_t>(at)] = static_cast<uint8_t>(after[i][static_cast<size_t>(ref::actual_offset(*scales, view, at))]);
      ref::adopt_block_scales(*cache, *scales, codes);
    }
  // Baked and run-time (dynamic NTK) inv_freq must equal the reference's bit for bit.
  const ref::Tolerance tolerance;
  for (size_t i = 0; i < host.buffers.size(); ++i) {
    const HostBuffer& buf = host.buffers[i];
    if (buf.desc.kind == BufferKind::input && buf.bytes != after[i]) ++report.untouched_violations;
    if (!buf.desc.is_written()) continue;
    std::string name = buf.desc.name;
    name = name.substr(0, name.find("_out"));
    std::vector<uint8_t> written(after[i].size(), 0);
    bool found = false;
    for (const ref::RefTensor& t : expected.tensors) {  // the buffer's tensor, or its parts
      if (t.buffer_name() != name) continue;
      found = true;
      const int esize = part_element_bytes(spec, t, buf.desc.element_bytes);
      ref::ActualTensor actual = actual_view(spec, buf.desc, after[i], t);
      if (!t.buffer.empty()) {  // the buffer's strides in the part's elements, from its first byte
        actual.data = after[i].data() + t.byte_offset;
        actual.token_stride = t.part_token_stride ? t.part_token_stride : actual.token_stride / esize;
        actual.head_stride = t.part_token_stride ? t.part_token_stride : actual.head_stride / esize;
        actual.batch_stride /= esize;
      }
      report.checks.emplace_back(t.name, ref::compare(spec, t, actual, tolerance));
      mark_written(written, t, actual, esize);
    }
    if (!found) throw Error(Status::internal, "reference has no tensor " + name);
    std::string linear;  // the bytes before the launch, in the order `after` has
    const std::string& before =
        interleaved_scales(spec, buf.desc) ? (linear = linear_block_scales(spec, buf.bytes)) : buf.bytes;
    report.untouched_violations += changed_outside_written(before, after[i], written);
  }
  return report;
}

}  // namespace ropejit::check
