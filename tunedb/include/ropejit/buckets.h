#pragma once
/// Token-count buckets: one tuned config per (spec hash, bucket).
#include <array>
#include <cstdint>
#include <string>

namespace ropejit {

/// Inclusive upper bound of each bucket's token count; the last is open-ended.
inline constexpr std::array<int64_t, 7> kBucketUpperBounds{1, 8, 64, 512, 4096, 65535, INT64_MAX};

/// Number of buckets.
inline constexpr int kNumBuckets = static_cast<int>(kBucketUpperBounds.size());

/// Bucket index of a token count (a handful of compares: cheap enough for every launch).
inline int bucket_of(int64_t num_tokens) {
  int b = 0;
  while (b + 1 < kNumBuckets && num_tokens > kBucketUpperBounds[b]) ++b;
  return b;
}

/// The token count a bucket is tuned at (its upper bound; the open bucket at 65536).
inline int64_t bucket_representative(int bucket) {
  return bucket + 1 < kNumBuckets ? kBucketUpperBounds[bucket] : 65536;
}

/// "1", "2-8", ..., ">=65536".
inline std::string bucket_name(int bucket) {
  const int64_t lo = bucket == 0 ? 1 : kBucketUpperBounds[bucket - 1] + 1;
  if (bucket + 1 == kNumBuckets) return ">=" + std::to_string(lo);
  if (lo == kBucketUpperBounds[bucket]) return std::to_string(lo);
  return std::to_string(lo) + "-" + std::to_string(kBucketUpperBounds[bucket]);
}

}  // namespace ropejit
