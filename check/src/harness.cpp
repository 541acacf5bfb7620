#include "ropejit/check/harness.h"

#include <algorithm>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "backend.h"
#include "ropejit/check/fp_convert.h"

namespace ropejit::check {

namespace {

constexpr uint8_t kPoison = 0xff;  // NaN in fp32, fp16 and bf16

// A host buffer mirrored on the backend.
struct Buffer {
  Backend* backend = nullptr;
  std::vector<uint8_t> host;     // the contents before the launch
  std::vector<uint8_t> result;   // the contents after the launch
  void* device = nullptr;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (device) backend->free(device);
  }
  void upload(Backend& b, std::vector<uint8_t> bytes) {
    backend = &b;
    host = std::move(bytes);
    device = b.alloc(std::max<size_t>(host.size(), 16));
    if (!host.empty()) b.copy_to_device(device, host.data(), host.size());
  }
  void download() {
    result.resize(host.size());
    if (!host.empty()) backend->copy_to_host(result.data(), device, host.size());
  }
};

std::vector<uint8_t> random_values(DType dtype, int64_t count, std::mt19937_64& rng, double scale) {
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> values(static_cast<size_t>(count));
  for (auto& v : values) v = normal(rng);
  return ref::encode_values(dtype, values);
}

// Splits T tokens into `batch` sequences, zero-length ones allowed.
std::vector<int32_t> random_cu_seqlens(int64_t tokens, int batch, std::mt19937_64& rng) {
  std::vector<int32_t> cuts(batch - 1);
  std::uniform_int_distribution<int64_t> cut(0, tokens);
  for (auto& c : cuts) c = static_cast<int32_t>(cut(rng));
  std::sort(cuts.begin(), cuts.end());
  std::vector<int32_t> cu{0};
  cu.insert(cu.end(), cuts.begin(), cuts.end());
  cu.push_back(static_cast<int32_t>(tokens));
  return cu;
}

// Counts bytes of `after` that differ from `before` outside the [rows, row_elements) region
// of each `stride`-element row.
int64_t changed_outside_rows(const Buffer& b, int64_t rows, int64_t stride, int64_t row_elements, int esize) {
  int64_t changed = 0;
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t byte = row_elements * esize; byte < stride * esize; ++byte) {
      const size_t at = static_cast<size_t>(t * stride * esize + byte);
      if (at < b.host.size() && b.host[at] != b.result[at]) ++changed;
    }
  return changed;
}

}  // namespace

bool CaseReport::ok() const {
  if (checks.empty() || untouched_violations != 0) return false;
  return std::all_of(checks.begin(), checks.end(), [](const auto& c) { return c.second.ok(); });
}

std::string CaseReport::summary() const {
  std::string out = fmt::format("seed {} batch {} S {} seq_len {}: {}\n", seed, batch, max_seq_len, run_length,
                                ok() ? "ok" : "FAILED");
  for (const auto& [name, check] : checks) out += fmt::format("  {}: {}\n", name, check.summary());
  if (untouched_violations) out += fmt::format("  {} bytes outside the outputs changed\n", untouched_violations);
  return out;
}

CaseReport run_case(Runtime& runtime, const Kernel& kernel, const CaseOptions& o) {
  const Spec& spec = kernel.spec();
  Backend& backend = runtime_backend(runtime);
  CaseReport report;
  report.seed = o.seed ? o.seed : std::random_device{}() * 0x9e3779b97f4a7c15ull + std::random_device{}();
  std::mt19937_64 rng(report.seed);

  const int64_t T = o.tokens, D = spec.head_dim, Hq = spec.num_q_heads, Hkv = spec.num_kv_heads;
  const int esize = dtype_size(spec.dtype);
  const int vec = kernel.config_for(T).vec;
  const bool packed = spec.io.input == InputForm::packed_qkv;
  const bool varlen = spec.io.positions == PositionsForm::varlen;
  const OutputForm output = spec.io.output;
  // Strided: rows wider than dense by a vector or two, so gaps exist between tokens.
  auto stride_of = [&](int64_t dense) { return o.strided ? dense + vec * (1 + static_cast<int64_t>(rng() % 2)) : dense; };

  Args args;
  args.num_tokens = T;
  ref::RefProblem problem;
  problem.num_tokens = T;

  // Positions.
  std::uniform_int_distribution<int64_t> position(0, std::max<int64_t>(o.max_position - 1, 0));
  std::vector<int32_t> positions32;
  std::vector<int64_t> positions64;
  Buffer positions_buf, cu_buf, start_buf;
  if (varlen) {
    const int batch = o.batch ? o.batch : 1 + static_cast<int>(rng() % 8);
    problem.cu_seqlens = random_cu_seqlens(T, batch, rng);
    problem.start_pos.resize(batch);
    for (int b = 0; b < batch; ++b) {
      const int64_t len = problem.cu_seqlens[b + 1] - problem.cu_seqlens[b];
      problem.start_pos[b] = std::uniform_int_distribution<int64_t>(0, std::max<int64_t>(o.max_position - len, 0))(rng);
    }
    cu_buf.upload(backend, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(problem.cu_seqlens.data()),
                                                reinterpret_cast<uint8_t*>(problem.cu_seqlens.data() + batch + 1)));
    start_buf.upload(backend, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(problem.start_pos.data()),
                                                   reinterpret_cast<uint8_t*>(problem.start_pos.data() + batch)));
    args.cu_seqlens = static_cast<const int32_t*>(cu_buf.device);
    args.start_pos = static_cast<const int64_t*>(start_buf.device);
    args.batch = batch;
    report.batch = batch;
    int64_t longest = 0, run_length = 1;
    for (int b = 0; b < batch; ++b) {
      const int64_t len = problem.cu_seqlens[b + 1] - problem.cu_seqlens[b];
      longest = std::max(longest, len);
      if (len > 0) run_length = std::max(run_length, problem.start_pos[b] + len);
    }
    if (output == OutputForm::padded_bhsd) {
      args.max_seq_len = static_cast<int>(std::max<int64_t>(1, longest + static_cast<int64_t>(rng() % 3)));
      problem.max_seq_len = args.max_seq_len;
      report.max_seq_len = args.max_seq_len;
    }
    args.seq_len = run_length;
  } else {
    problem.positions.resize(static_cast<size_t>(T));
    for (auto& p : problem.positions) p = position(rng);
    args.positions_type = o.positions_type;
    std::vector<uint8_t> bytes;
    if (o.positions_type == PositionsType::int64) {
      positions64 = problem.positions;
      bytes.assign(reinterpret_cast<uint8_t*>(positions64.data()), reinterpret_cast<uint8_t*>(positions64.data() + T));
    } else {
      positions32.assign(problem.positions.begin(), problem.positions.end());
      bytes.assign(reinterpret_cast<uint8_t*>(positions32.data()), reinterpret_cast<uint8_t*>(positions32.data() + T));
    }
    positions_buf.upload(backend, std::move(bytes));
    args.positions = positions_buf.device;
    args.seq_len = 1 + (T ? *std::max_element(problem.positions.begin(), problem.positions.end()) : 0);
  }
  problem.run_length = args.seq_len;
  report.run_length = args.seq_len;

  // Inputs (random, gaps included).
  Buffer q, k, v, qkv, bias, q_out, k_out, v_out;
  int64_t q_stride = 0, k_stride = 0, v_stride = 0, qkv_stride = 0;
  if (packed) {
    qkv_stride = stride_of((Hq + 2 * Hkv) * D);
    qkv.upload(backend, random_values(spec.dtype, T * qkv_stride, rng, 1.0));
    args.qkv = qkv.device;
    args.qkv_stride = qkv_stride;
    problem.qkv = {qkv.host.data(), qkv_stride, D};
  } else {
    q_stride = stride_of(Hq * D);
    k_stride = stride_of(Hkv * D);
    q.upload(backend, random_values(spec.dtype, T * q_stride, rng, 1.0));
    k.upload(backend, random_values(spec.dtype, T * k_stride, rng, 1.0));
    args.q = q.device;
    args.k = k.device;
    args.q_stride = q_stride;
    args.k_stride = k_stride;
    problem.q = {q.host.data(), q_stride, D};
    problem.k = {k.host.data(), k_stride, D};
    if (spec.io.copy_v) {
      v_stride = stride_of(Hkv * D);
      v.upload(backend, random_values(spec.dtype, T * v_stride, rng, 1.0));
      args.v = v.device;
      args.v_stride = v_stride;
      problem.v = {v.host.data(), v_stride, D};
    }
  }
  if (spec.io.qkv_bias) {
    bias.upload(backend, random_values(spec.dtype, (Hq + 2 * Hkv) * D, rng, 0.5));
    args.bias = bias.device;
    problem.bias = bias.host.data();
  }

  // Outputs, poisoned so that every element the kernel must write is proven written.
  int64_t q_out_stride = 0, k_out_stride = 0, v_out_stride = 0;
  if (output == OutputForm::separate) {
    q_out_stride = stride_of(Hq * D);
    k_out_stride = stride_of(Hkv * D);
    q_out.upload(backend, std::vector<uint8_t>(T * q_out_stride * esize, kPoison));
    k_out.upload(backend, std::vector<uint8_t>(T * k_out_stride * esize, kPoison));
    args.q_out = q_out.device;
    args.k_out = k_out.device;
    args.q_out_stride = q_out_stride;
    args.k_out_stride = k_out_stride;
    if (spec.io.copy_v) {
      v_out_stride = stride_of(Hkv * D);
      v_out.upload(backend, std::vector<uint8_t>(T * v_out_stride * esize, kPoison));
      args.v_out = v_out.device;
      args.v_out_stride = v_out_stride;
    }
  } else if (output == OutputForm::padded_bhsd) {
    const int64_t rows = int64_t(args.batch) * args.max_seq_len;
    q_out.upload(backend, std::vector<uint8_t>(rows * Hq * D * esize, kPoison));
    k_out.upload(backend, std::vector<uint8_t>(rows * Hkv * D * esize, kPoison));
    args.q_out = q_out.device;
    args.k_out = k_out.device;
    if (spec.io.copy_v) {
      v_out.upload(backend, std::vector<uint8_t>(rows * Hkv * D * esize, kPoison));
      args.v_out = v_out.device;
    }
  }

  report.bytes_moved = bytes_moved(spec, T, args.batch, args.max_seq_len) +
                       (!varlen && o.positions_type == PositionsType::int64 ? 4 * T : 0);
  kernel.launch(args, nullptr);
  backend.synchronize();
  for (Buffer* b : {&q, &k, &v, &qkv, &q_out, &k_out, &v_out})
    if (b->device) b->download();
  if (o.timing_repeats > 0)
    report.time_us = backend.time_calls([&](void* stream) { kernel.launch(args, stream); }, o.timing_repeats);

  // Compare every output tensor; for strided rows, the gaps must be untouched.
  const ref::RefOutputs expected = ref::reference_outputs(spec, problem);
  // Baked and run-time (dynamic NTK) inv_freq must equal the reference's bit for bit.
  const ref::Tolerance tolerance;
  auto check = [&](const std::string& name, const Buffer& buf, int64_t token_stride) {
    const ref::RefTensor* t = expected.find(name);
    if (!t) throw Error(Status::internal, "reference has no tensor " + name);
    const ref::ActualTensor actual{buf.result.data(), token_stride, token_stride ? D : 0, 0};
    report.checks.emplace_back(name, ref::compare(spec, *t, actual, tolerance));
    if (token_stride) report.untouched_violations += changed_outside_rows(buf, T, token_stride, t->heads * D, esize);
  };
  if (output == OutputForm::inplace) {
    if (packed) {
      check("qkv", qkv, qkv_stride);
    } else {
      check("q", q, q_stride);
      check("k", k, k_stride);
      if (spec.io.copy_v) check("v", v, v_stride);
    }
  } else {
    const bool padded = output == OutputForm::padded_bhsd;
    check("q", q_out, padded ? 0 : q_out_stride);
    check("k", k_out, padded ? 0 : k_out_stride);
    if (spec.io.copy_v) check("v", v_out, padded ? 0 : v_out_stride);
    // Inputs are read-only in these forms.
    for (const Buffer* in : {&q, &k, &v, &qkv})
      if (in->device && in->host != in->result) ++report.untouched_violations;
  }
  return report;
}

}  // namespace ropejit::check
