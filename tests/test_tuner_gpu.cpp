// GPU tier: the device metadata the tuning database is keyed by; tune two specs end to end on
// the cuda backend, store the results, check that get() picks them up, and time the tuned and
// the default kernels independently of the tuner to check its claims. Skips (visibly) without
// a CUDA device.
// ropejit-tier: gpu
#include <gtest/gtest.h>

#include "support/repo_paths.h"
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "ropejit/internal/backend.h"
#include "ropejit/internal/device_info.h"
#include "ropejit/runtime.h"
#include "ropejit/tuner.h"
#include "ropejit/tuning_db.h"
#include "ropejit/fp_convert.h"

namespace ropejit {
namespace {

// ---------------------------------------------------------------- independent timing
// Not the tuner's Measurer or workload code: inputs built here from the public Args, launched
// through Kernel::launch, timed with Backend::time_calls (CUDA events on the default stream).

/// The tuned kernel may measure this much slower than the default before it counts as slower
/// (timing noise; the tuner's pick may win by less than this)...
constexpr double kNoiseMargin = 1.05;
/// ...plus this many microseconds: at decode sizes a launch takes a few microseconds and the
/// CPU's launch rate, the same for both kernels, can bound what the events see.
constexpr double kNoiseSlackUs = 0.25;
/// The tuner's reported medians and the independent ones agree within this factor either way...
constexpr double kAgreement = 1.2;
/// ...at token counts this large: launches of ~100 us, where both are the kernel's own time. At
/// decode sizes the tuner times CUDA-graph replays (no launch overhead) and Kernel::launch in
/// a loop is not comparable with them.
constexpr int64_t kAgreementMinTokens = 4096;
constexpr int kLaunchesPerSample = 32;
constexpr int kWarmupRounds = 3;
constexpr int kRounds = 21;  // odd: the median is a sample
constexpr size_t kMaxSets = size_t(1) << 16;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// Random inputs of an in-place spec with explicit positions at `tokens` tokens, in as many
/// copies ("sets") as cover `rotate_bytes`, sharing one positions array (and bias). Successive
/// launches take successive sets, so none finds its inputs in L2: the conditions the tuner
/// times under (it rotates over 4x L2 too).
class RotatedInputs {
 public:
  RotatedInputs(Backend& backend, const Spec& spec, int64_t tokens, int64_t rotate_bytes) : backend_(backend) {
    std::mt19937_64 rng(0x7e57 + static_cast<uint64_t>(tokens));
    std::normal_distribution<double> normal(0.0, 1.0);
    const int64_t T = tokens, D = spec.head_dim, Hq = spec.num_q_heads, Hkv = spec.num_kv_heads;
    const bool packed = spec.io.input == InputForm::packed_qkv;
    // Elements per token of the tensors of one set: qkv, or q, k (and v).
    std::vector<int64_t> widths = packed ? std::vector<int64_t>{(Hq + 2 * Hkv) * D} : std::vector<int64_t>{Hq * D, Hkv * D};
    if (!packed && spec.io.copy_v) widths.push_back(Hkv * D);
    std::vector<uint8_t> one_set;
    std::vector<size_t> offsets;
    for (int64_t width : widths) {
      offsets.push_back(one_set.size());
      std::vector<double> values(static_cast<size_t>(T * width));
      for (auto& v : values) v = normal(rng);
      const std::vector<uint8_t> bytes = ref::encode_values(spec.dtype, values);
      one_set.insert(one_set.end(), bytes.begin(), bytes.end());
      one_set.resize((one_set.size() + 255) / 256 * 256);  // every tensor 256-byte aligned
    }
    const size_t set_bytes = one_set.size();
    const size_t sets = std::clamp<size_t>((static_cast<size_t>(rotate_bytes) + set_bytes - 1) / set_bytes, 1, kMaxSets);
    std::vector<uint8_t> all(set_bytes * sets);
    for (size_t s = 0; s < sets; ++s) std::memcpy(all.data() + s * set_bytes, one_set.data(), set_bytes);
    char* block = static_cast<char*>(upload(all.data(), all.size()));

    std::uniform_int_distribution<int64_t> position(0, std::min<int64_t>(spec.max_position_embeddings, INT32_MAX) - 1);
    std::vector<int32_t> positions(static_cast<size_t>(T));
    int64_t seq_len = 1;
    for (auto& p : positions) {
      p = static_cast<int32_t>(position(rng));
      seq_len = std::max<int64_t>(seq_len, int64_t(p) + 1);
    }
    const void* positions_device = upload(positions.data(), positions.size() * sizeof(int32_t));
    const void* bias_device = nullptr;
    if (spec.io.qkv_bias) {
      // Small: in place, every launch adds it again.
      std::vector<double> values(static_cast<size_t>((Hq + 2 * Hkv) * D));
      for (auto& v : values) v = 1e-3 * normal(rng);
      const std::vector<uint8_t> bytes = ref::encode_values(spec.dtype, values);
      bias_device = upload(bytes.data(), bytes.size());
    }

    args_.resize(sets);
    for (size_t s = 0; s < sets; ++s) {
      Args& a = args_[s];
      char* base = block + s * set_bytes;
      a.num_tokens = T;
      a.positions = positions_device;
      a.positions_type = PositionsType::int32;
      a.seq_len = seq_len;
      a.bias = bias_device;
      if (packed) {
        a.qkv = base + offsets[0];
      } else {
        a.q = base + offsets[0];
        a.k = base + offsets[1];
        if (spec.io.copy_v) a.v = base + offsets[2];
      }
    }
  }
  ~RotatedInputs() {
    for (void* p : allocations_) backend_.free(p);
  }
  RotatedInputs(const RotatedInputs&) = delete;
  RotatedInputs& operator=(const RotatedInputs&) = delete;

  /// The arguments of the next set.
  const Args& next() {
    const Args& a = args_[next_];
    next_ = (next_ + 1) % args_.size();
    return a;
  }

 private:
  void* upload(const void* data, size_t bytes) {
    void* p = backend_.alloc(bytes);
    allocations_.push_back(p);
    backend_.copy_to_device(p, data, bytes);
    return p;
  }

  Backend& backend_;
  std::vector<void*> allocations_;
  std::vector<Args> args_;
  size_t next_ = 0;
};

/// Microseconds per launch of one sample: kLaunchesPerSample launches between two events, each
/// on the next input set.
double sample_us(Backend& backend, const Kernel& kernel, RotatedInputs& inputs) {
  const double us = backend.time_calls(
      [&](void* stream) {
        for (int i = 0; i < kLaunchesPerSample; ++i) kernel.launch(inputs.next(), stream);
      },
      1);
  return us / kLaunchesPerSample;
}

struct HeadToHead {
  double default_us = 0.0, tuned_us = 0.0;
};

/// Medians of interleaved samples of both kernels on the same inputs; which goes first
/// alternates by round, so drift (clocks, temperature) hits both alike.
HeadToHead time_head_to_head(Backend& backend, const Kernel& fallback, const Kernel& tuned, RotatedInputs& inputs) {
  std::vector<double> default_us, tuned_us;
  for (int round = 0; round < kWarmupRounds + kRounds; ++round) {
    const bool default_first = round % 2 == 0;
    const double first = sample_us(backend, default_first ? fallback : tuned, inputs);
    const double second = sample_us(backend, default_first ? tuned : fallback, inputs);
    if (round < kWarmupRounds) continue;
    default_us.push_back(default_first ? first : second);
    tuned_us.push_back(default_first ? second : first);
  }
  return {median(default_us), median(tuned_us)};
}

/// Removes the temporary tuning database (and its lock) however the test ends.
struct RemoveOnExit {
  std::filesystem::path path;
  ~RemoveOnExit() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    std::filesystem::remove(path.string() + ".lock", ignored);
  }
};

TEST(TunerGpu, DeviceMetadataDescribesTheOpenedDevice) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto backend = make_cuda_backend(0, "");
  const DeviceProperties p = backend->properties();
  const DeviceMetadata m = device_metadata(*backend);
  EXPECT_EQ(m.gpu_name, p.name);
  EXPECT_FALSE(m.gpu_name.empty());
  EXPECT_EQ("sm_" + std::to_string(p.compute_capability_major) + std::to_string(p.compute_capability_minor),
            backend->arch());
  EXPECT_EQ(m.compute_capability,
            std::to_string(p.compute_capability_major) + "." + std::to_string(p.compute_capability_minor));
  EXPECT_EQ(m.sm_count, backend->sm_count());
  EXPECT_GT(m.l2_bytes, 0);
  EXPECT_GT(m.driver_version, 0);
  EXPECT_EQ(m, cuda_device_metadata(0));
}

// The tuner's claims checked from outside: after tuning, the kernels get() builds from the
// database and the default config's kernels are timed here, interleaved on the same inputs; the
// tuned one must not be slower beyond noise, and at large token counts the times the tuner
// reported for the default and the winner must match what is measured here.
TEST(TunerGpu, TunedConfigsAreNotSlowerThanTheDefaultTimedIndependentlyAndGetUsesThem) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: the tuner's GPU tier needs one";
  const std::string specs_dir = ropejit::test::source_dir() + "/specs/";
  const std::vector<Spec> specs = {load_spec_file(specs_dir + "llama-3.1-8b.json"),
                                   load_spec_file(specs_dir + "qwen2.5-7b.json")};
  auto measurer = make_cuda_measurer();
  TuneOptions options;
  options.tokens = {1, 256, 16384};
  options.budget_ms = 400;
  const auto results = tune(specs, *measurer, options);
  measurer.reset();  // its workload buffers and modules: not needed for what follows
  ASSERT_EQ(results.size(), 2u);

  const RemoveOnExit db{std::filesystem::temp_directory_path() /
                        ("ropejit-tuner-gpu-" + std::to_string(::getpid()) + ".json")};
  const DeviceMetadata device = cuda_device_metadata(0);
  for (const auto& r : results) {
    ASSERT_EQ(r.buckets.size(), 3u);
    for (const auto& b : r.buckets) {
      SCOPED_TRACE(r.spec.name + " @" + std::to_string(b.tokens));
      ASSERT_TRUE(b.best);
      ASSERT_TRUE(b.default_result.rejected.empty()) << b.default_result.rejected;
      ASSERT_GT(b.default_result.time_us, 0.0);
      ASSERT_GT(b.best->time_us, 0.0);
      // The speed-up it reports is the ratio of the two times checked against independent ones below.
      EXPECT_NEAR(b.speedup, b.default_result.time_us / b.best->time_us, 1e-9 * b.speedup);
      EXPECT_GT(b.best->gbps, 0.0);
      EXPECT_GT(b.best->copy_fraction, 0.0);
      EXPECT_LT(b.best->copy_fraction, 1.5) << "faster than a device copy: inputs were cache hits";
      int correct = 0;
      for (const auto& c : b.candidates) correct += c.rejected.empty() && c.samples > 0;
      EXPECT_GE(correct, 2) << "candidates beyond the default passed the output check";
    }
    save_tuning_entries(db.path.string(), device, r.entries());
  }

  RuntimeOptions runtime_options;
  runtime_options.backend = BackendKind::cuda;
  runtime_options.tuning_db = db.path.string();
  Runtime runtime(runtime_options);
  Backend& backend = runtime_backend(runtime);
  const int64_t rotate_bytes = 4 * std::max<int64_t>(backend.properties().l2_bytes, int64_t(1) << 20);
  for (const auto& r : results) {
    // What RotatedInputs builds; the two specs tuned here are such.
    ASSERT_EQ(r.spec.io.output, OutputForm::inplace) << r.spec.name;
    ASSERT_EQ(r.spec.io.positions, PositionsForm::explicit_) << r.spec.name;
    const Kernel tuned = runtime.get(r.spec);
    const Config default_config_of_spec = default_config(r.spec);
    const Kernel fallback = runtime.get(r.spec, default_config_of_spec);
    int agreement_checks = 0;
    for (const auto& b : r.buckets) {
      SCOPED_TRACE(r.spec.name + " @" + std::to_string(b.tokens));
      EXPECT_EQ(tuned.config_for(b.tokens), b.best->config);
      RotatedInputs inputs(backend, r.spec, b.tokens, rotate_bytes);
      const HeadToHead t = time_head_to_head(backend, fallback, tuned, inputs);
      const std::string timings = "independent: tuned " + config_name(tuned.config_for(b.tokens)) + " " +
                                  std::to_string(t.tuned_us) + " us, default " + config_name(default_config_of_spec) +
                                  " " + std::to_string(t.default_us) + " us; tuner: best " +
                                  std::to_string(b.best->time_us) + " us, default " +
                                  std::to_string(b.default_result.time_us) + " us";
      ASSERT_GT(t.default_us, 0.0) << timings;
      ASSERT_GT(t.tuned_us, 0.0) << timings;
      EXPECT_LE(t.tuned_us, t.default_us * kNoiseMargin + kNoiseSlackUs)
          << "the tuned config is slower than the default beyond noise\n" << timings;
      if (b.tokens < kAgreementMinTokens) continue;
      ++agreement_checks;
      EXPECT_LE(b.default_result.time_us, t.default_us * kAgreement) << "the tuner misreports the default\n" << timings;
      EXPECT_GE(b.default_result.time_us, t.default_us / kAgreement) << "the tuner misreports the default\n" << timings;
      EXPECT_LE(b.best->time_us, t.tuned_us * kAgreement) << "the tuner misreports its pick\n" << timings;
      EXPECT_GE(b.best->time_us, t.tuned_us / kAgreement) << "the tuner misreports its pick\n" << timings;
    }
    EXPECT_GE(agreement_checks, 1) << r.spec.name << ": no bucket of " << kAgreementMinTokens << "+ tokens";
  }
}

TEST(TunerGpu, WithoutADeviceTuningFailsWithAClearMessage) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present: this checks the no-GPU message";
  try {
    make_cuda_measurer();
    FAIL() << "a measurer without a GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::backend_error);
    EXPECT_NE(std::string(e.what()).find("tuning measures on a GPU"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ropejit
