// libFuzzer target: disk cache entries (runtime/include/ropejit/cache.h). The first byte picks
// what the rest is:
//   0: a whole entry file, as found at the key's path      2: a payload stored with store()
//   1: the same, its trailing checksum made right first     3: an entry file under a foreign name
// and the rest is always parsed as a Binary payload too (deserialize_binary).
// Promises checked: load() of any file is a hit or a miss (never a crash, an exception or a read
// past the file); a hit's header is what list() calls header_ok with the key's text; store then
// load returns the payload; deserialize_binary accepts only what serialize_binary writes
// (serializing what it parsed gives the same bytes).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <xxhash.h>

#include "fuzz_common.h"
#include "ropejit/cache.h"

using ropejit::fuzz::finding;

namespace {

// One cache folder for the whole run: the constructor's probe write happens once.
ropejit::DiskCache& cache() {
  static ropejit::DiskCache c([] {
    ropejit::DiskCacheOptions o;
    o.dir = ropejit::fuzz::scratch_dir() + "/cache";
    o.warn = [](const std::string& w) { finding("the fuzz cache folder got disabled: " + w); };
    return o;
  }());
  return c;
}

// The key every entry is written for; its fields look like a real cuda entry's.
const ropejit::CacheKey& fuzz_key() {
  static const ropejit::CacheKey key{"0123456789abcdef0123456789abcdef", "--gpu-architecture=sm_90 -default-device",
                                     "sm_90", "13.0", "0.1.0", "cuda"};
  return key;
}

// A foreign entry name in another shard: list() must read it, load() of our key never.
const ropejit::CacheKey& other_key() {
  static const ropejit::CacheKey key{"fedcba9876543210fedcba9876543210", "", "host-x86_64", "19.1", "0.1.0", "host"};
  return key;
}

void write_entry(const std::string& path, std::string_view bytes) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  ropejit::fuzz::write_file(path, bytes);
}

// deserialize_binary: malformed → nullopt; accepted → serializes back to the same bytes.
void check_binary(std::string_view payload) {
  const std::optional<ropejit::Binary> binary = ropejit::deserialize_binary(payload);
  if (binary && ropejit::serialize_binary(*binary) != payload)
    finding("serialize_binary(deserialize_binary(p)) != p for a payload of " + std::to_string(payload.size()) + " bytes");
}

// A load hit must come from a well-formed entry of this key, as list() sees it.
void check_listing(const std::optional<std::string>& hit) {
  const std::vector<ropejit::CacheEntryInfo> entries = cache().list();
  const std::string path = cache().path_for(fuzz_key());
  for (const ropejit::CacheEntryInfo& e : entries) {
    if (e.path != path) continue;
    if (hit && (!e.header_ok || e.key_text != fuzz_key().text()))
      finding("load() hit an entry whose header list() does not accept");
    return;
  }
  if (hit) finding("load() hit an entry list() does not show");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] & 3;
  std::string rest(ropejit::fuzz::as_text(data + 1, size - 1));
  check_binary(rest);

  ropejit::DiskCache& c = cache();
  c.clear();  // each input starts from an empty folder
  std::optional<std::string> hit;
  switch (mode) {
    case 1:  // a right checksum lets the fuzzer reach the length and key checks behind it
      if (rest.size() >= 8) {
        const uint64_t sum = XXH3_64bits(rest.data(), rest.size() - 8);
        for (int i = 0; i < 8; ++i) rest[rest.size() - 8 + i] = char((sum >> (8 * i)) & 0xff);
      }
      [[fallthrough]];
    case 0:
      write_entry(c.path_for(fuzz_key()), rest);
      hit = c.load(fuzz_key());
      check_listing(hit);
      if (hit) check_binary(*hit);
      break;
    case 2: {
      if (!c.store(fuzz_key(), rest)) finding("store() failed in a writable folder");
      hit = c.load(fuzz_key());
      if (!hit || *hit != rest) finding("load() after store() did not return the stored payload");
      check_listing(hit);
      break;
    }
    default:
      write_entry(c.path_for(other_key()), rest);
      if (c.load(fuzz_key())) finding("load() hit a foreign entry");
      (void)c.load(other_key());
      if (c.entry_count() != 1) finding("entry_count() does not count the one entry file");
      if (c.total_bytes() != rest.size()) finding("total_bytes() is not the entry file's size");
      break;
  }
  return 0;
}
