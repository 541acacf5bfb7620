#pragma once
// The read-or-compile-and-store step both backends share around the disk cache.
#include <functional>

#include "ropejit/cache.h"
#include "ropejit/compile.h"

namespace ropejit {

/// The binary for `key`: read from `disk` when an entry is there and `usable` accepts it, else
/// made by `compile` under the key's lock (concurrent processes compile once) and stored.
/// `disk` may be null or disabled: then it only compiles. `from_disk` says which happened.
Binary cached_binary(DiskCache* disk, const CacheKey& key,
                     const std::function<bool(const Binary&)>& usable,
                     const std::function<Binary()>& compile, bool& from_disk);

/// Compiles with `compile` and overwrites the entry for `key` (when `disk` is usable): the
/// entry that was read could not be loaded.
Binary recompile_binary(DiskCache* disk, const CacheKey& key, const std::function<Binary()>& compile);

}  // namespace ropejit
