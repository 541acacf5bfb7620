#pragma once
// The work decomposition, defined once for the host (codegen's work_shape,
// launch_dims, source emission) and the kernel (rope.cuh). Plain C++17 constexpr: host C++,
// NVRTC and the host backend all compile this same file, so the grid the host sizes is the
// grid the kernel walks.

// NVRTC treats an unannotated function as host-only; host C++ has no __host__/__device__.
#if defined(__CUDACC__)
#define ROPEJIT_HOST_DEVICE __host__ __device__
#else
#define ROPEJIT_HOST_DEVICE
#endif

namespace ropejit {

/// True when the pass-through tail [d, D) is touched: it moves (output not in place) or
/// changes (a bias, a QK-norm); in place and unchanged it is left as it is.
ROPEJIT_HOST_DEVICE constexpr bool tail_moves(bool inplace, bool tail_changes) {
  return !inplace || tail_changes;
}

/// Most vectors one lane may hold when it takes a whole neox rotary slice (registers: the
/// slice and its cos/sin stay in registers under the 64-register cap).
constexpr int kMaxSliceVectors = 4;

/// Lanes of one warp: a warp-cooperative QK-norm head takes at most this many.
constexpr int kWarpLanes = 32;

/// Most vectors a QK-norm lane holds with tail_spread (registers: under the 64-register cap).
constexpr int kMaxLaneVectors = 4;

/// The least power of 2 >= n (n >= 1).
ROPEJIT_HOST_DEVICE constexpr int power_of_two_at_least(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

/// How the kernel splits one row (a token, or a (sequence, slot) of the padded output) into
/// work items: lanes per head row times head groups.
struct WorkShape {
  int half = 0;              ///< d / 2
  bool whole_slice = false;  ///< neox with vec not dividing d/2: one lane rotates all of [0, d)
  int pairs_per_lane = 0;    ///< pairs whose angles one rotating lane needs
  int rot_lanes = 0;         ///< lanes rotating pairs of one head
  int tail_lanes = 0;        ///< lanes moving the pass-through part (D - d elements)
  int tail_vectors = 0;      ///< vectors of the pass-through part, (D - d) / vec when it moves
  int rot_vectors = 0;       ///< vectors one rotating lane holds: 1 (interleaved), 2 (neox) or the slice's
  /// QK-norm lanes: pass-through vector t sits on lane (rot_lanes + t) mod tail_width; the modulus is
  /// rot_lanes + tail_vectors (one vector per lane slot), or the head's lanes with tail_spread.
  int tail_width = 0;
  /// A QK-norm head row whose pass-through vectors spread over all its lanes, rotating ones
  /// included: over 32 when wider than a warp (DeepSeek-V4's 512-element heads, 64 of them
  /// rotated) instead of one thread per whole head, or, with Config::spread, over fewer lanes
  /// than one vector a lane slot would take.
  bool tail_spread = false;
  /// Lanes of one head row in the work items: rot_lanes + tail_lanes; with a QK-norm that
  /// rounded up to a power of 2, its lanes' sums of squares meeting in warp shuffles of that
  /// width (lanes past rot_lanes + tail_lanes hold no vector and add 0), or 1 (whole_heads);
  /// lane slots of an all-heads norm (with_norm_scope).
  int lanes = 0;
  /// QK-norm whose head needs more than a warp's lanes: one thread walks every lane of its heads.
  bool whole_heads = false;
  int rot_heads = 0;         ///< q + k heads per row (rotated)
  int heads = 0;             ///< heads per row the kernel touches (+ v when copied)
  int head_groups = 0;       ///< ceil(heads / heads_per_thread)
  bool even_groups = false;  ///< every group owns heads_per_thread heads (the last is not short)
  /// One head group per kv head (GQA: Hq a multiple of Hkv, a thread's heads_per_thread slots
  /// are its Hq / Hkv q heads, then its k head and, copied, its v head): each slot has one role,
  /// known when compiling, so each role's heads run code of their own (rope.cuh rope_kernel).
  bool role_slots = false;
  int q_slots = 0;           ///< role_slots: Hq / Hkv, the slots of q heads
  /// role_slots: trips of the heads loop, q_slots, plus the k head with a QK-norm (one norm-and-rotate
  /// body for q and k; k's cache store follows the loop).
  int loop_slots = 0;
  /// All-heads norm: a row's head_groups x lanes threads span whole warps of one block, each thread's
  /// heads held in registers from their one read (qk_norm_all.cuh; with_norm_scope).
  bool row_on_chip = false;
};

/// Pass-through vectors QK-norm lane `lane` holds: t0, t0 + tail_width, ... below tail_vectors,
/// t0 = (lane - rot_lanes) mod tail_width.
ROPEJIT_HOST_DEVICE constexpr int tail_vector_first(const WorkShape& w, int lane) {
  return (lane - w.rot_lanes + w.tail_width) % w.tail_width;
}
ROPEJIT_HOST_DEVICE constexpr int tail_vector_count(const WorkShape& w, int lane) {
  if (lane >= w.tail_width) return 0;  // a lane past the head row's (lanes round up to a power of 2)
  const int t0 = tail_vector_first(w, lane);
  return t0 < w.tail_vectors ? (w.tail_vectors - t0 + w.tail_width - 1) / w.tail_width : 0;
}
/// Most vectors one QK-norm lane (or lane slot) holds: its rotated ones and its pass-through ones.
ROPEJIT_HOST_DEVICE constexpr int max_lane_vectors(const WorkShape& w) {
  int most = 0;
  const int slots = w.lanes > w.tail_width ? w.lanes : w.tail_width;
  for (int lane = 0; lane < slots; ++lane) {
    const int n = (lane < w.rot_lanes ? w.rot_vectors : 0) + tail_vector_count(w, lane);
    most = n > most ? n : most;
  }
  return most;
}

/// The vectors of one lane of a cooperative head row: its rotated ones, elements first + j * step
/// for j < count (first = rotary_begin + lane * vec), then its pass-through ones, tail_first +
/// i * tail_step for i < tail_count (from pass_begin; tail_vector_first). Without tail_spread a
/// lane holds one kind only, kept in first/step/count (tail_count 0).
struct LaneVectors {
  int first, step, count;
  int tail_first, tail_step, tail_count;
};

ROPEJIT_HOST_DEVICE constexpr LaneVectors lane_vectors_of(const WorkShape& w, int vec, int rotary_begin,
                                                          int pass_begin, int lane) {
  LaneVectors v{0, 0, 0, 0, 0, 0};
  const bool rotating = w.lanes == w.rot_lanes || lane < w.rot_lanes;  // every lane rotates: no test
  if (rotating) {
    v.first = rotary_begin + lane * vec;       // whole_slice: lane 0
    v.step = w.whole_slice ? vec : w.half;     // interleaved: one vector
    v.count = w.rot_vectors;
  }
  if (w.tail_vectors > 0) {
    const int first = pass_begin + tail_vector_first(w, lane) * vec;
    const int count = tail_vector_count(w, lane);
    if (w.tail_spread) {
      v.tail_first = first, v.tail_step = w.tail_width * vec, v.tail_count = count;
    } else if (!rotating) {
      v.first = first, v.step = w.tail_width * vec, v.count = count;
    }
  }
  return v;
}

/// Whether the lane holds vector j, and its first element.
ROPEJIT_HOST_DEVICE constexpr bool lane_holds_vector(const WorkShape& w, const LaneVectors& lv, int j) {
  return j < lv.count + (w.tail_spread ? lv.tail_count : 0);
}
ROPEJIT_HOST_DEVICE constexpr int lane_vector_element(const WorkShape& w, const LaneVectors& lv, int j) {
  return w.tail_spread && j >= lv.count ? lv.tail_first + (j - lv.count) * lv.tail_step : lv.first + j * lv.step;
}

/// NVFP4 blocks of `block` values (16) across lanes: for every lane and vector j it holds, the
/// lanes lane ^ k (k < block / vec) hold vector j too, and together the aligned block, each at
/// its place (lane % (block / vec)) * vec: one shuffle butterfly per vector gives the block's amax.
ROPEJIT_HOST_DEVICE constexpr bool blocks_in_lane_groups(const WorkShape& w, int vec, int rotary_begin,
                                                         int pass_begin, int block) {
  if (vec > block || block % vec != 0) return false;
  const int group = block / vec;
  if (w.lanes % group != 0) return false;  // one thread a whole head (whole_heads): lanes 1
  for (int lane = 0; lane < w.lanes; ++lane) {
    const LaneVectors lv = lane_vectors_of(w, vec, rotary_begin, pass_begin, lane);
    for (int j = 0; j < max_lane_vectors(w); ++j) {
      if (!lane_holds_vector(w, lv, j)) continue;
      const int start = lane_vector_element(w, lv, j) - (lane % group) * vec;
      if (start % block != 0) return false;
      for (int k = 1; k < group; ++k) {
        const int partner = lane ^ k;
        const LaneVectors pv = lane_vectors_of(w, vec, rotary_begin, pass_begin, partner);
        if (!lane_holds_vector(w, pv, j) || lane_vector_element(w, pv, j) != start + (partner % group) * vec)
          return false;
      }
    }
  }
  return true;
}

/// The work decomposition of a kernel. neox rotates vec pairs per lane (x[i], x[i + d/2]);
/// interleaved vec/2 adjacent pairs.
ROPEJIT_HOST_DEVICE constexpr WorkShape make_work_shape(int head_dim, int rotary_dim,
                                                        int num_q_heads, int num_kv_heads,
                                                        bool interleaved, bool copy_v, bool inplace,
                                                        bool tail_changes, int vec,
                                                        int heads_per_thread, bool qk_norm,
                                                        bool spread_tail = false) {
  WorkShape w;
  w.half = rotary_dim / 2;
  // A half of 12 bf16 (GPT-NeoX-20B) takes no 16-byte vector; the 24-element slice takes 3.
  w.whole_slice = !interleaved && w.half % vec != 0;
  w.pairs_per_lane = interleaved ? vec / 2 : w.whole_slice ? w.half : vec;
  w.rot_lanes = interleaved ? rotary_dim / vec : w.whole_slice ? 1 : w.half / vec;
  w.rot_vectors = interleaved ? 1 : w.whole_slice ? rotary_dim / vec : 2;
  w.tail_vectors = tail_moves(inplace, tail_changes) ? (head_dim - rotary_dim) / vec : 0;
  w.tail_lanes = w.tail_vectors;
  w.tail_width = w.rot_lanes + w.tail_vectors;
  w.lanes = w.rot_lanes + w.tail_lanes;
  // QK-norm: a head's lanes form an aligned power-of-2 segment of one warp (lanes | 32, block
  // and grid stride multiples of 32, items a multiple of lanes), reduced by shuffles; wider than
  // a warp, the pass-through vectors spread over the 32 lanes (at most kMaxLaneVectors a lane),
  // else one thread owns a whole head (rope.cuh rope_kernel).
  if (qk_norm) {
    w.lanes = power_of_two_at_least(w.lanes);
    // Config::spread: a partial head within a warp spreads its pass-through vectors over the least
    // power-of-2 width from rot_lanes that keeps kMaxLaneVectors a lane, rotating lanes included:
    // fewer lanes a head (work items, shuffle steps, empty lanes) for more vectors a lane
    // (registers). DeepSeek-V3.2's indexer, 64 of 128 rotated at vec 4: 8 lanes of 2 + 2 vectors
    // in place of 32 lanes, 8 of them empty (docs/PERF.md).
    for (int width = power_of_two_at_least(w.rot_lanes);
         spread_tail && w.tail_vectors > 0 && w.lanes <= kWarpLanes && width < w.lanes; width *= 2) {
      WorkShape spread = w;
      spread.lanes = spread.tail_width = width;
      spread.tail_lanes = width - w.rot_lanes;
      spread.tail_spread = true;
      if (max_lane_vectors(spread) <= kMaxLaneVectors) {
        w = spread;
        break;
      }
    }
    if (w.lanes > kWarpLanes && w.rot_lanes < kWarpLanes) {
      WorkShape spread = w;
      spread.lanes = spread.tail_width = kWarpLanes;
      spread.tail_lanes = kWarpLanes - w.rot_lanes;
      spread.tail_spread = true;
      if (max_lane_vectors(spread) <= kMaxLaneVectors) w = spread;
    }
    w.whole_heads = w.lanes > kWarpLanes;
    if (w.whole_heads) w.lanes = 1;
  }
  w.rot_heads = num_q_heads + num_kv_heads;
  w.heads = w.rot_heads + (copy_v ? num_kv_heads : 0);
  w.head_groups = (w.heads + heads_per_thread - 1) / heads_per_thread;
  w.even_groups = w.head_groups * heads_per_thread == w.heads;
  w.role_slots = !w.whole_heads && num_q_heads > 0 && num_kv_heads > 0 && num_q_heads % num_kv_heads == 0 &&
                 w.head_groups == num_kv_heads && w.even_groups;
  w.q_slots = w.role_slots ? num_q_heads / num_kv_heads : 0;
  w.loop_slots = w.q_slots + (w.role_slots && qk_norm ? 1 : 0);
  return w;
}

/// Role slots with a quantized cache (FP8, NVFP4) and copied v: k's and v's cache stores run in
/// one 2-trip loop after the q heads (rope.cuh rope_heads), so their rounding is compiled once;
/// with cooperative heads an NVFP4 cache head's vectors are stored by a loop of their own in it
/// (cache_vector_loop). The static model weighs each loop by its own trips (compile kernel_stats.cpp).
ROPEJIT_HOST_DEVICE constexpr bool kv_store_loop(const WorkShape& w, bool quantized_cache, bool copy_v) {
  return w.role_slots && quantized_cache && copy_v;
}
constexpr int kKvStoreLoopTrips = 2;  ///< k, then v

/// Role slots whose rows fill whole warps (head_groups x lanes a multiple of 32, blocks too): a
/// warp's threads share one row, so its head groups can split the row's angles among them
/// (angles.cuh angle_split).
ROPEJIT_HOST_DEVICE constexpr bool warp_rows(const WorkShape& w) {
  return w.role_slots && w.lanes <= kWarpLanes && (w.head_groups * w.lanes) % kWarpLanes == 0;
}
/// Cooperative heads (lanes 2..32 a head) whose threads all take the same shuffles, trip for trip,
/// so every shuffle may name the whole warp (a constant mask: ptxas checks no convergence per
/// shuffle): role slots (a trip's role is the same in every thread), or every group owning
/// heads_per_thread heads and no shuffle that only some roles take (`per_role_shuffles`: a
/// per-head FP8 scale of q or of the cache alone, NVFP4's cache blocks). A warp may straddle two
/// rows: no thread skips a shuffle for its row (no cache slot, padding: stores skipped instead),
/// and threads past the grid's end have left the kernel, which CUDA allows in a mask ("all
/// non-exited threads named in mask"; never a shuffle's source: a head's lanes leave together).
ROPEJIT_HOST_DEVICE constexpr bool warp_wide_shuffles(const WorkShape& w, bool per_role_shuffles) {
  return !w.whole_heads && w.lanes > 1 && w.lanes <= kWarpLanes &&
         (w.role_slots || (w.even_groups && !per_role_shuffles));
}
/// An NVFP4 cache head's lane vectors stored one a trip of a loop, its block scale and e2m1 codes
/// compiled once (more than one vector: one is no loop). Not FP8's: its rounding is too short to
/// pay for the loop's moves (sm_80 qwen3-8b-paged-fp8: +3 points of H100 issue share).
ROPEJIT_HOST_DEVICE constexpr bool cache_vector_loop(int lane_vectors, bool nvfp4) { return nvfp4 && lane_vectors > 1; }

/// Op mla_append (Multi-head Latent Attention): q's heads as a q-only kernel's (rotating lanes, and
/// with a separate q output or concat_k's k_nope the pass-through part too); the latent cache row
/// rides on the same items (mla_append.cuh: head group 0's rotating lanes rotate k_pe, every item
/// copies its share of kv_c). absorbed_q_latent > 0 (absorbed_q's kv_lora_rank): the pass-through
/// lanes copy q_out's latent part, that many elements, instead of q_nope.
ROPEJIT_HOST_DEVICE constexpr WorkShape mla_work_shape(int head_dim, int rotary_dim, int num_q_heads, bool interleaved,
                                                       bool q_inplace, int vec, int heads_per_thread,
                                                       int absorbed_q_latent) {
  return make_work_shape(absorbed_q_latent > 0 ? absorbed_q_latent + rotary_dim : head_dim, rotary_dim, num_q_heads, 0,
                         interleaved, false, q_inplace, false, vec, heads_per_thread, false);
}

/// Most vectors a thread of an all-heads row kept on chip holds (its heads' lane vectors, as raw
/// words in registers: 24 for 16-byte vectors; Wan's 80 heads of 16 lanes: 5 a thread at 256
/// threads a row, 64 registers, no spill); up to twice as many it reads again (row_holds_words).
constexpr int kMaxRowVectors = 6;

/// make_work_shape's shape `w` for the QK-norm's scope: unchanged without `all_heads`. An
/// all-heads norm (qk_norm.scope "all") adds a row's q heads in one sum of squares and its k heads
/// in another. `lanes` is then the lane slots of a head row (a thread walks its lanes slot,
/// slot + lanes, ... below rot_lanes + tail_lanes) and head_groups about heads / heads_per_thread,
/// a power of 2. Where a thread's heads take at most kMaxRowVectors vectors and the row's threads
/// span whole warps of one block (of `block_threads`), the row stays on chip: each thread holds
/// its vectors from their one read while the row's sums meet in shared memory (row_on_chip).
/// Else a row is one aligned power-of-2 segment of a warp, head_groups x lanes <= 32, whose
/// threads read their vectors twice (the sums, then the rotation).
ROPEJIT_HOST_DEVICE constexpr WorkShape with_norm_scope(WorkShape w, bool all_heads, int heads_per_thread,
                                                        int block_threads) {
  if (!all_heads) return w;
  w.tail_lanes = w.tail_vectors;  // a thread walks lane slots instead (qk_norm_all.cuh)
  w.tail_width = w.rot_lanes + w.tail_vectors;
  w.tail_spread = false;
  const int head_lanes = w.rot_lanes + w.tail_lanes;
  w.whole_heads = false;
  w.lanes = head_lanes >= kWarpLanes ? kWarpLanes : power_of_two_at_least(head_lanes);
  const int groups = power_of_two_at_least((w.heads + heads_per_thread - 1) / heads_per_thread);
  w.head_groups = groups < kWarpLanes / w.lanes ? groups : kWarpLanes / w.lanes;
  const int row_threads = groups * w.lanes, heads_each = (w.heads + groups - 1) / groups;
  if (head_lanes <= w.lanes && row_threads > kWarpLanes && row_threads <= block_threads &&
      heads_each * max_lane_vectors(w) <= 2 * kMaxRowVectors) {
    w.head_groups = groups;
    w.row_on_chip = true;
  }
  return w;
}

/// Whether an all-heads row kept on chip holds its threads' vectors from their one read; else a
/// thread reads them again for the rotation (its few vectors of a moment before: L1 or L2).
ROPEJIT_HOST_DEVICE constexpr bool row_holds_words(const WorkShape& w) {
  return w.row_on_chip && (w.heads + w.head_groups - 1) / w.head_groups * max_lane_vectors(w) <= kMaxRowVectors;
}

/// Rotating lanes whose pairs include one with a frequency (pairs from rotated_pairs on have
/// inv_freq 0, proportional RoPE): the others need no angles.
ROPEJIT_HOST_DEVICE constexpr int angle_lanes(WorkShape w, int rotated_pairs) {
  return rotated_pairs >= w.half ? w.rot_lanes : (rotated_pairs + w.pairs_per_lane - 1) / w.pairs_per_lane;
}

/// Most shared-memory bytes the cos/sin of one block pass may take (angles.cuh).
constexpr int kMaxSharedAngleBytes = 16 << 10;

/// How one block pass shares the cos/sin of its rows (angles.cuh): a block's consecutive items
/// cover at most max_rows rows, whose `pairs` angles its threads compute, units_per_thread
/// (row, pair) units each.
struct SharedAngleShape {
  bool enabled = false;  ///< several head groups per row would otherwise compute the same angles
  int items_per_row = 0;
  int max_rows = 0;
  int pairs = 0;  ///< pairs with a frequency, rounded up to whole lanes
  int units_per_thread = 0;
};

/// The sharing of kernel `w` at `block_threads` threads; none with a cos/sin table (one load per
/// pair already), for a whole-head QK-norm thread (it walks every lane itself), for an all-heads
/// norm (qk_norm_all.cuh: a row is one warp segment whose lanes compute their own), with role
/// slots (a thread's angles already serve a kv head's q heads and its k; with the shared rows
/// the FP8 append's three role bodies spill 104-108 bytes at the 64-register cap), or past the
/// shared-memory budget.
ROPEJIT_HOST_DEVICE constexpr SharedAngleShape shared_angle_shape(WorkShape w, int rotated_pairs, int block_threads,
                                                                  bool table_sincos, bool all_heads_norm) {
  SharedAngleShape a;
  a.items_per_row = w.head_groups * w.lanes;
  a.max_rows = (block_threads - 1) / a.items_per_row + 2;  // a pass may start mid-row
  a.pairs = angle_lanes(w, rotated_pairs) * w.pairs_per_lane;
  a.units_per_thread = (a.max_rows * a.pairs + block_threads - 1) / block_threads;
  a.enabled = w.head_groups > 1 && !w.whole_heads && !w.role_slots && !table_sincos && !all_heads_norm && a.pairs > 0 &&
              a.max_rows * a.pairs * 2 * 4 <= kMaxSharedAngleBytes;
  return a;
}

/// Work items of a launch over `rows` rows: item = (row * head_groups + group) * lanes + lane.
ROPEJIT_HOST_DEVICE constexpr long long work_items(WorkShape w, long long rows) {
  return rows * w.head_groups * w.lanes;
}

/// One work item's coordinates (the inverse of work_items' numbering).
struct WorkItem {
  long long row;  ///< token, or padded slot
  int group;      ///< head group: the thread's heads are group, group + head_groups, ...
  int lane;       ///< vector lane within a head row
};

/// Lane fastest, then head group, then row: consecutive threads take consecutive vectors of
/// one head row, so their loads and stores coalesce.
ROPEJIT_HOST_DEVICE constexpr WorkItem decode_item(WorkShape w, long long item) {
  WorkItem out{0, 0, 0};
  out.lane = (int)(item % w.lanes);
  out.group = (int)((item / w.lanes) % w.head_groups);
  out.row = item / ((long long)w.lanes * w.head_groups);
  return out;
}

}  // namespace ropejit
