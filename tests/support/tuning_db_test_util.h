#pragma once
// Helpers shared by the tuning database tests (test_tuning_db*.cpp): device metadata, entries,
// and a fixture with a fresh folder.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ropejit/buckets.h"
#include "ropejit/tuning_db.h"
#include "ropejit/warnings.h"

namespace ropejit {

inline DeviceMetadata h100() {
  DeviceMetadata m;
  m.ropejit_version = "0.1.0";
  m.nvrtc_version = "13.0";
  m.driver_version = 13000;
  m.gpu_name = "NVIDIA H100 80GB HBM3";
  m.compute_capability = "9.0";
  m.sm_count = 132;
  m.l2_bytes = 50 << 20;
  return m;
}

inline DeviceMetadata h200() {
  DeviceMetadata m = h100();
  m.gpu_name = "NVIDIA H200";
  return m;
}

inline std::string random_hash(std::mt19937_64& rng) {
  return Hash128{rng(), rng()}.hex();
}

inline TuningEntry entry(const std::string& hash, int bucket, int block_threads, double us, const std::string& date = "2025-01-01T00:00:00Z") {
  TuningEntry e;
  e.spec_hash = hash;
  e.spec_name = "spec-" + hash.substr(0, 4);
  e.bucket = bucket;
  e.tokens = bucket_representative(bucket);
  e.best.config.block_threads = block_threads;
  e.best.time_us = us;
  e.runner_up = TimedConfig{Config{}, us * 1.1};
  e.default_time_us = us * 1.5;
  e.gbps = 1234.5;
  e.date = date;
  return e;
}

/// A fresh folder per test holding `tuning.json`; collects warnings; a seeded generator.
class TuningDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ropejit-tuning-db-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "tuning.json").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::filesystem::path dir_;
  std::string path_;
  std::vector<std::string> warnings_;
  WarningSink sink() {
    return [this](const std::string& w) { warnings_.push_back(w); };
  }
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace ropejit
