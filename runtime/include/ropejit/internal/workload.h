#pragma once
// The one workload builder: host contents for every buffer of one launch (launch_buffers),
// with the options the check harness, the tuner and the benchmark need.
#include <cstdint>
#include <string>
#include <vector>

#include "ropejit/internal/launch_buffers.h"
#include "ropejit/spec.h"

namespace ropejit {

/// How make_host_workload draws one launch.
struct WorkloadOptions {
  int64_t tokens = 0;                                   ///< T
  int batch = 0;                                        ///< varlen sequences; 0: random in [1, 8]
  int64_t sequence_tokens = 0;                          ///< varlen: tokens per sequence (the last takes
                                                        ///< what remains); 0: random cuts, empty ones allowed
  int max_slack = 0;                                    ///< padded S = longest sequence + random [0, max_slack]
  PositionsType positions_type = PositionsType::int32;  ///< explicit positions' element type
  int64_t max_position = 4096;                          ///< every position lies in [0, max_position)
  int stride_vec = 0;                                   ///< > 0: token rows wider than dense by 1 or 2 vectors
                                                        ///< of this many elements, random per buffer
  int64_t distinct_elements = 0;                        ///< > 0: values drawn for that many elements of a
                                                        ///< buffer, repeated beyond (multi-GB sets); 0: all
  uint64_t seed = 0;                                    ///< random generator seed
  int64_t cos_sin_rows = 0;                             ///< io.angles cos_sin_cache: its rows (0: every
                                                        ///< position's plus 0-2; fewer: NaN rows out)
};

/// One buffer of a workload: its descriptor and its contents before the launch.
struct HostBuffer {
  BufferDesc desc;
  std::string bytes;  ///< inputs and bias: random storage values, never zero; outputs: 0xff
                      ///< (NaN in every dtype) so every element a launch must write is proven written;
                      ///< caches: random bytes, so a slot written that should not be shows (rerotate:
                      ///< random finite values of the cache dtype, the keys it rotates)
};

/// Everything one launch reads and writes, on the host.
struct HostWorkload {
  LaunchShape shape;                ///< T, batch, S, positions type
  std::vector<HostBuffer> buffers;  ///< in launch_buffers order, strides applied
  std::vector<int64_t> positions;   ///< explicit [T] or mrope [3, T] positions (also the "positions" buffer)
  std::vector<int32_t> cu_seqlens;  ///< varlen [batch + 1]
  std::vector<int64_t> start_pos;   ///< varlen [batch]
  int64_t seq_len = 1;              ///< run length: max(position) + 1 (at least 1)
  std::vector<int64_t> slot_mapping;  ///< paged_kv slot_mapping [T] (-1: not cached)
  std::vector<int32_t> block_tables;  ///< paged_kv block_tables [batch, max_blocks_per_seq]
  // op rerotate: where the keys move (explicit: new_positions [T]; varlen/offset: new_start_pos
  // [batch] / [1]), each key's new position, and the length the keys were written at.
  std::vector<int64_t> new_positions;
  std::vector<int64_t> new_start_pos;
  std::vector<int64_t> moved_positions;  ///< rerotate: each key's new position [T]
  int64_t from_seq_len = 0;

  /// The buffer named `name`, or null.
  const HostBuffer* find(const std::string& name) const;
  /// Bytes one launch moves (sum of the buffers' moved bytes).
  int64_t bytes_moved() const;
};

/// Draws one launch of `spec` as `options` say: sequences and positions first, then every
/// buffer (data normal(0, 1), bias normal(0, 0.5), in the storage dtype, never zero).
HostWorkload make_host_workload(const Spec& spec, const WorkloadOptions& options);

}  // namespace ropejit
