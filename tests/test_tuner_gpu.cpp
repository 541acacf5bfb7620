// GPU tier: the device metadata the tuning database is keyed by; tune two specs end to end on
// the cuda backend, store the results, and check that get() picks them up. Skips (visibly)
// without a CUDA device.
#include <gtest/gtest.h>

#include "support/repo_paths.h"
#include <unistd.h>

#include <filesystem>

#include "backend.h"
#include "device_info.h"
#include "ropejit/runtime.h"
#include "ropejit/tuner.h"
#include "ropejit/tuning_db.h"

namespace ropejit {
namespace {

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

TEST(TunerGpu, TunedConfigsAreAtLeastAsFastAsTheDefaultAndGetUsesThem) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: the tuner's GPU tier needs one";
  const std::string specs_dir = ropejit::test::source_dir() + "/specs/";
  const std::vector<Spec> specs = {load_spec_file(specs_dir + "llama-3.1-8b.json"),
                                   load_spec_file(specs_dir + "qwen2.5-7b.json")};
  auto measurer = make_cuda_measurer();
  TuneOptions options;
  options.tokens = {1, 256, 16384};
  options.budget_ms = 400;
  const auto results = tune(specs, *measurer, options);
  ASSERT_EQ(results.size(), 2u);

  const auto path = std::filesystem::temp_directory_path() / ("ropejit-tuner-gpu-" + std::to_string(::getpid()) + ".json");
  const DeviceMetadata device = cuda_device_metadata(0);
  for (const auto& r : results) {
    ASSERT_EQ(r.buckets.size(), 3u);
    for (const auto& b : r.buckets) {
      SCOPED_TRACE(r.spec.name + " @" + std::to_string(b.tokens));
      ASSERT_TRUE(b.best);
      ASSERT_TRUE(b.default_result.rejected.empty()) << b.default_result.rejected;
      // The default is re-measured head to head with the finalists, so this compares like with like.
      EXPECT_LE(b.best->time_us, b.default_result.time_us);
      EXPECT_GE(b.speedup, 1.0);
      EXPECT_GT(b.best->gbps, 0.0);
      EXPECT_GT(b.best->copy_fraction, 0.0);
      EXPECT_LT(b.best->copy_fraction, 1.5) << "faster than a device copy: inputs were cache hits";
      int correct = 0;
      for (const auto& c : b.candidates) correct += c.rejected.empty() && c.samples > 0;
      EXPECT_GE(correct, 2) << "candidates beyond the default passed the output check";
    }
    save_tuning_entries(path.string(), device, r.entries());
  }

  RuntimeOptions runtime_options;
  runtime_options.backend = BackendKind::cuda;
  runtime_options.tuning_db = path.string();
  Runtime runtime(runtime_options);
  for (const auto& r : results) {
    Kernel kernel = runtime.get(r.spec);
    for (const auto& b : r.buckets) EXPECT_EQ(kernel.config_for(b.tokens), b.best->config) << r.spec.name;
  }
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + ".lock");
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
