// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/) from the repository's
// own data: shipped specs and bad-spec cases, real and bad HF configs, and inputs built with the
// library (a tuning database, a cache entry and Binary payload, launch shapes per spec).
// Usage: fuzz_make_seeds [OUTPUT_DIR]   (default: <repo>/tests/fuzz/corpus; rerun after a
// format change and commit the result; tests/fuzz/README.md)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_common.h"
#include "ropejit/buckets.h"
#include "ropejit/cache.h"
#include "ropejit/config.h"
#include "ropejit/spec.h"
#include "ropejit/tuning_db.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kRepo = ROPEJIT_SOURCE_DIR;

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

// Little-endian bytes of an integer, as the launch target's ByteReader reads them.
template <class T>
std::string le(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

void spec_seeds(const fs::path& out) {
  for (const auto& e : fs::directory_iterator(kRepo / "specs"))
    if (e.path().extension() == ".json" && e.path().filename() != "schema.json")
      put(out, e.path().filename().string(), read_text(e.path()));
  // A few refused specs: bad values across the blocks, and broken documents.
  const json base = json::parse(read_text(kRepo / "tests/data/bad_specs/base.json"));
  put(out, "bad-base.json", base.dump(2));
  const char* wanted[] = {"head_dim_fraction", "rotary_dim_odd", "llama3_low_above_high", "io_mrope_section_sum",
                          "io_block_tables_explicit", "qk_norm_eps_negative", "truncated", "trailing_garbage"};
  for (const json& c : json::parse(read_text(kRepo / "tests/data/bad_specs/cases.json"))) {
    const std::string name = c["name"];
    if (std::find(std::begin(wanted), std::end(wanted), name) == std::end(wanted)) continue;
    if (c.contains("text")) {
      put(out, "bad-" + name + ".json", c["text"].get<std::string>());
      continue;
    }
    json j = base;
    if (c.contains("set"))
      for (const auto& [pointer, value] : c["set"].items()) j[json::json_pointer(pointer)] = value;
    if (c.contains("remove"))
      for (const auto& pointer : c["remove"]) {
        const json::json_pointer ptr(pointer.get<std::string>());
        j[ptr.parent_pointer()].erase(ptr.back());
      }
    put(out, "bad-" + name + ".json", j.dump(2));
  }
}

void hf_seeds(const fs::path& out) {
  for (const auto& e : fs::directory_iterator(kRepo / "tests/data/hf_real"))
    if (e.path().extension() == ".json") put(out, "real-" + e.path().filename().string(), read_text(e.path()));
  // The conformance models: each config with its model_type, as config.json carries it.
  const json models = json::parse(read_text(kRepo / "tests/data/conformance/models.json"));
  for (const auto& [name, model] : models.items()) {
    json config = model["config"];
    config["model_type"] = model["model_type"];
    put(out, "model-" + name + ".json", config.dump(2));
  }
  const char* bad[] = {"factor_below_one.json", "factor_bool.json", "chatglm_group_num_not_dividing.json",
                       "deepseek_qk_rope_head_dim_string.json", "attention_bias_string.json"};
  for (const char* name : bad)
    if (fs::exists(kRepo / "tests/data/bad_hf" / name)) put(out, std::string("bad-") + name, read_text(kRepo / "tests/data/bad_hf" / name));
}

ropejit::TuningEntry entry(const std::string& spec_file, int64_t tokens, double us, const std::string& date) {
  const ropejit::Spec spec = ropejit::load_spec_file((kRepo / "specs" / spec_file).string());
  ropejit::TuningEntry e;
  e.spec_hash = ropejit::spec_hash(spec).hex();
  e.spec_name = spec.name;
  e.tokens = tokens;
  e.bucket = ropejit::bucket_of(tokens);
  e.best = {ropejit::default_config(spec), us};
  ropejit::Config other = e.best.config;
  other.block_threads = 128;
  e.runner_up = ropejit::TimedConfig{other, us * 1.1};
  e.default_time_us = us * 1.3;
  e.gbps = 1800.0;
  e.date = date;
  return e;
}

void tuning_db_seeds(const fs::path& out) {
  ropejit::DeviceMetadata h100{"0.1.0", "13.0", 13000, "NVIDIA H100 80GB HBM3", "9.0", 132, 52428800};
  ropejit::DeviceMetadata a100{"0.1.0", "13.0", 13000, "NVIDIA A100-SXM4-80GB", "8.0", 108, 41943040};
  ropejit::TuningDbFile a;
  a.devices.push_back({h100, {entry("llama-3.1-8b.json", 1, 4.2, "2026-11-20T10:00:00Z"),
                              entry("llama-3.1-8b.json", 4096, 61.0, "2026-11-20T10:00:00Z"),
                              entry("qwen3-8b.json", 300, 12.5, "2026-11-21T08:30:00Z")}});
  ropejit::TuningDbFile b;
  b.devices.push_back({h100, {entry("llama-3.1-8b.json", 4096, 58.0, "2026-11-24T09:15:00Z")}});
  b.devices.push_back({a100, {entry("deepseek-v3.json", 64, 9.75, "2026-11-22T12:00:00Z")}});
  const std::string ja = ropejit::tuning_db_to_json(a), jb = ropejit::tuning_db_to_json(b);
  put(out, "h100.json", ja);
  put(out, "h100-a100.json", jb);
  put(out, "merge-two.txt", ja + "\n#merge#\n" + jb);
  put(out, "other-format.json", "{\"format\": 2, \"devices\": []}\n");
  put(out, "truncated.json", ja.substr(0, ja.size() / 2));
  put(out, "empty-devices.json", "{\"format\": 1, \"devices\": []}\n");
}

void cache_entry_seeds(const fs::path& out) {
  ropejit::Binary b;
  b.arch = "sm_90";
  b.image = std::string("\x7f" "ELF\x02\x01\x01", 7) + std::string(57, '\0');
  b.entry = "ropejit_rope_0123456789abcdef";
  b.source_hash = ropejit::hash_bytes("fuzz seed source");
  b.registers = 32;
  b.compile_ms = 12.5;
  b.log = "ptxas info    : Used 32 registers, used 0 barriers";
  const std::string payload = ropejit::serialize_binary(b);
  // The entry file exactly as DiskCache::store writes it, for the key fuzz_cache_entry.cpp uses.
  const std::string dir = ropejit::fuzz::scratch_dir() + "/seed-cache";
  ropejit::DiskCacheOptions options;
  options.dir = dir;
  ropejit::DiskCache cache(options);
  const ropejit::CacheKey key{"0123456789abcdef0123456789abcdef", "--gpu-architecture=sm_90 -default-device",
                              "sm_90", "13.0", "0.1.0", "cuda"};
  if (!cache.store(key, payload)) ropejit::fuzz::finding("seed cache store failed");
  const std::string file = read_text(cache.path_for(key));
  put(out, "entry-file", std::string(1, '\0') + file);
  put(out, "entry-file-fixsum", std::string(1, '\1') + file);
  put(out, "payload-store", std::string(1, '\2') + payload);
  put(out, "foreign-entry", std::string(1, '\3') + file);
  put(out, "entry-truncated", std::string(1, '\0') + file.substr(0, file.size() - 9));
  put(out, "ptx-payload", std::string(1, '\2') + [&] {
    ropejit::Binary p = b;
    p.is_ptx = true;
    p.arch = "compute_90";
    p.image = ".version 8.0\n.target sm_90\n.address_size 64\n";
    return ropejit::serialize_binary(p);
  }());
}

// fuzz_c_launch_args.cpp's input: spec, flags, then the shape fields in its reading order.
void launch_seeds(const fs::path& out) {
  // The target's spec order: specs/*.json sorted by file name, then its 5 kExtraSpecs (op rope).
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kRepo / "specs"))
    if (e.path().extension() == ".json" && e.path().filename() != "schema.json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<bool> rerotates;
  for (const auto& f : files) rerotates.push_back(ropejit::load_spec_file(f.string()).op == ropejit::OpKind::rerotate);
  rerotates.resize(files.size() + 5, false);
  for (size_t i = 0; i < rerotates.size(); ++i) {
    const int32_t from = rerotates[i] ? 64 : 0;  // from_seq_len: only op rerotate takes one
    // host mode (2): tokens 16, batch 2, max_seq_len 32, int32, 8 pages, 4 blocks, seq_len 64
    put(out, "host-" + std::to_string(i),
        std::string{char(i), char(2)} + le<uint8_t>(16) + le<uint8_t>(2) + le<uint8_t>(32) + le<uint8_t>(0) +
            le<uint8_t>(8) + le<uint8_t>(4) + le<int32_t>(64) + le<int32_t>(from));
    // device mode (1): tokens 1000, batch 3, max_seq_len 512, int64, 64 pages, 16 blocks, seq_len 4096
    put(out, "device-" + std::to_string(i),
        std::string{char(i), char(1)} + le<uint32_t>(1000) + le<uint8_t>(3) + le<uint16_t>(512) + le<uint8_t>(1) +
            le<uint16_t>(64) + le<uint8_t>(16) + le<int32_t>(4096) + le<int32_t>(from ? 4096 : 0));
  }
  // raw mode: zeroed args (num_tokens 0), and an old header's struct_size (before the norm weights).
  put(out, "raw-zero", std::string{char(0), char(0)} + std::string(64, '\0'));
  put(out, "raw-old-size", std::string{char(3), char(0x20)} + std::string(64, '\0'));
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path out = argc > 1 ? fs::path(argv[1]) : kRepo / "tests/fuzz/corpus";
  spec_seeds(out / "fuzz_spec");
  hf_seeds(out / "fuzz_hf_import");
  tuning_db_seeds(out / "fuzz_tuning_db");
  cache_entry_seeds(out / "fuzz_cache_entry");
  launch_seeds(out / "fuzz_c_launch_args");
  std::printf("seeds written under %s\n", out.c_str());
  return 0;
}
