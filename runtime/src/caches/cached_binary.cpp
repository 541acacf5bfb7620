#include "caches/cached_binary.h"

#include <optional>

namespace ropejit {

Binary cached_binary(DiskCache* disk, const CacheKey& key,
                     const std::function<bool(const Binary&)>& usable,
                     const std::function<Binary()>& compile, bool& from_disk) {
  from_disk = false;
  if (!disk || !disk->enabled()) return compile();
  auto read = [&]() -> std::optional<Binary> {
    auto payload = disk->load(key);
    if (!payload) return std::nullopt;
    auto binary = deserialize_binary(*payload);
    if (!binary || !usable(*binary)) return std::nullopt;  // malformed or another source: a miss, rewritten below
    return binary;
  };
  if (auto hit = read()) {
    from_disk = true;
    return std::move(*hit);
  }
  auto lock = disk->lock(key);
  if (auto hit = read()) {  // another process compiled it while we waited for the lock
    from_disk = true;
    return std::move(*hit);
  }
  Binary binary = compile();
  disk->store(key, serialize_binary(binary));
  return binary;
}

Binary recompile_binary(DiskCache* disk, const CacheKey& key, const std::function<Binary()>& compile) {
  Binary binary = compile();
  if (disk && disk->enabled()) disk->store(key, serialize_binary(binary));
  return binary;
}

}  // namespace ropejit
