#pragma once
// A thread's heads of one row (rope.cuh's rope_heads): which heads it owns, the lane of each with
// its angles, and the loop over them, whose loads may run one head ahead of their use
// (Config::ahead: heads_trips, two word buffers); MLA's and the re-rotation's loops take
// heads_trips too. Included by rope.cuh after head_lanes.cuh, whose QK-norm lanes it calls.

namespace ropejit {

// Heads 0 .. n - 1 of a thread's loop: step(k, words) runs head k's LaneStep `step` (three
// plain lambdas: NVRTC compiles no generic one without -default-device). With loads ahead
// (kLoadsAhead), head k + 1's loads (fetch) are issued before head k's arithmetic and stores
// (finish), into the other of two word buffers (no copy between them, which would wait for the
// loads): two heads' loads in flight (Little's law); head 0's were issued by the caller into
// `first`, before its angles. Without, each head runs whole, as it always did. Rolled either way
// (compile time, registers): with loads ahead two heads a trip.
template <class T, class Words, class Whole, class Fetch, class Finish>
__device__ __forceinline__ void heads_trips(int n, Words& first, Whole&& whole, Fetch&& fetch, Finish&& finish) {
  if constexpr (T::kLoadsAhead) {
    if (n == 1) {  // one head (a decode launch's): nothing to load ahead of it
      finish(0, first);
      return;
    }
    // The last head loads its own words again (an L1 hit, before its stores) rather than branch
    // around the loads: a branch lets the compiler sink them below the arithmetic.
    Words second;
#pragma unroll 1
    for (int k = 0; k < n; k += 2) {
      fetch(k + 1 < n ? k + 1 : k, second);
      finish(k, first);
      if (k + 1 >= n) break;
      fetch(k + 2 < n ? k + 2 : k + 1, first);
      finish(k + 1, second);
    }
  } else {
#pragma unroll 1
    for (int k = 0; k < n; ++k) whole(k, first);
  }
}

// One lane of one head, the QK-norm's lanes together; its loads through `in` as kStep says.
template <class T, LaneStep kStep = LaneStep::whole>
__device__ __forceinline__ void lane_of_head(const KernelParams& p, const HeadIo<T>& io, int lane,
                                             const float (&cos_v)[rope_shape<T>().pairs_per_lane],
                                             const float (&sin_v)[rope_shape<T>().pairs_per_lane], LaneWords<T>& in) {
  if constexpr (T::kCooperativeHeads) {
    process_lane_norm<T, kStep>(p, io, lane, cos_v, sin_v, in);
  } else {
    const HeadNorm no_norm{};
    process_lane<T, kStep>(io, no_norm, lane, cos_v, sin_v, in);
  }
}

template <class T>
__device__ __forceinline__ void lane_of_head(const KernelParams& p, const HeadIo<T>& io, int lane,
                                             const float (&cos_v)[rope_shape<T>().pairs_per_lane],
                                             const float (&sin_v)[rope_shape<T>().pairs_per_lane]) {
  LaneWords<T> in;
  lane_of_head<T, LaneStep::whole>(p, io, lane, cos_v, sin_v, in);
}

// The row's heads `group + k * head_groups` that this thread owns, k < kHeadsPerThread.
template <class T>
__device__ __forceinline__ bool owned_head(int group, int k, int& head) {
  constexpr WorkShape W = rope_shape<T>();
  head = group + k * W.head_groups;
  if constexpr (!W.even_groups) return head < W.heads;  // the last group is short
  return true;
}

// How many heads head group `group` owns (the last group may be short).
template <class T>
__device__ __forceinline__ int owned_heads(int group) {
  constexpr WorkShape W = rope_shape<T>();
  if constexpr (W.even_groups) return T::kHeadsPerThread;
  const int n = (W.heads - group + W.head_groups - 1) / W.head_groups;
  return n < T::kHeadsPerThread ? n : T::kHeadsPerThread;
}

// One lane of one head with the lane's angles: the thread's own (cos_v, sin_v), or with
// `shared` (a SharedAngleRows<T>) the row's block-shared ones, read per head so they take no
// registers across heads (a fetch reads none). `void*`: a kernel that never reads shared rows
// names no row type, so the standalone emitter can prune it whole.
template <class T, LaneStep kStep = LaneStep::whole>
__device__ __forceinline__ void lane_of_head_angles(const KernelParams& p, const HeadIo<T>& io, int lane, bool rotates,
                                                    const float (&cos_v)[rope_shape<T>().pairs_per_lane],
                                                    const float (&sin_v)[rope_shape<T>().pairs_per_lane],
                                                    const void* shared, int shared_row, LaneWords<T>& in) {
  if constexpr (kStep == LaneStep::fetch) {
    lane_of_head<T, kStep>(p, io, lane, cos_v, sin_v, in);
  } else {
    constexpr int kPairs = rope_shape<T>().pairs_per_lane;
    float c[kPairs], s[kPairs];
#pragma unroll
    for (int i = 0; i < kPairs; ++i) c[i] = cos_v[i], s[i] = sin_v[i];
    if (shared && rotates) read_shared_angles<T>(*static_cast<const SharedAngleRows<T>*>(shared), shared_row, lane, c, s);
    lane_of_head<T, kStep>(p, io, lane, c, s, in);
  }
}

template <class T>
__device__ __forceinline__ void lane_of_head_angles(const KernelParams& p, const HeadIo<T>& io, int lane, bool rotates,
                                                    const float (&cos_v)[rope_shape<T>().pairs_per_lane],
                                                    const float (&sin_v)[rope_shape<T>().pairs_per_lane],
                                                    const void* shared, int shared_row) {
  LaneWords<T> in;
  lane_of_head_angles<T, LaneStep::whole>(p, io, lane, rotates, cos_v, sin_v, shared, shared_row, in);
}

// The head rope_heads' loop takes first in group `group` (a role slot's first q head), or null
// when the group owns none.
template <class T>
__device__ __forceinline__ bool first_loop_head(const KernelParams& p, const RowRef& ref, int group, HeadIo<T>& io,
                                                bool& rotates) {
  constexpr WorkShape W = rope_shape<T>();
  rotates = true;
  if constexpr (W.role_slots) {
    if (W.q_slots == 0) return false;
    io = role_head_io<T>(p, ref, kRoleQ, group);
    return true;
  } else {
    int head;
    if (!owned_head<T>(group, 0, head)) return false;
    io = head_io<T>(p, ref, head);
    rotates = head < W.rot_heads;
    return true;
  }
}

// With loads ahead: the first head's loads of rope_heads' loop, issued before the thread's
// angles (and before the block's shared-angle barrier): rope_heads finishes them.
template <class T>
__device__ __forceinline__ void fetch_first_head(const KernelParams& p, const RowRef& ref, int group, int lane,
                                                 LaneWords<T>& first) {
  if constexpr (T::kLoadsAhead) {
    HeadIo<T> io;
    bool rotates;
    float unused[rope_shape<T>().pairs_per_lane];
    if (first_loop_head<T>(p, ref, group, io, rotates))
      lane_of_head_angles<T, LaneStep::fetch>(p, io, lane, rotates, unused, unused, nullptr, 0, first);
  }
}

// The heads this thread owns in one row: `group + k * head_groups`, or with role slots the
// group's q heads, then its k and v head (k in the q heads' loop with a QK-norm, else each role
// compiled alone).
// `first`: with loads ahead, the loop's first head's words (fetch_first_head).
template <class T>
__device__ __forceinline__ void rope_heads(const KernelParams& p, const RowRef& ref, int group, int lane,
                                           const float (&cos_v)[rope_shape<T>().pairs_per_lane],
                                           const float (&sin_v)[rope_shape<T>().pairs_per_lane],
                                           const void* shared, int shared_row, LaneWords<T>& first) {
  constexpr WorkShape W = rope_shape<T>();
  // Not unrolled: unrolling hoists every head's pointers (register spills) and multiplies
  // compile time, while the stores below already order the heads. A QK-norm head's lanes
  // share its group, so they take the same heads and meet at the same shuffles.
  if constexpr (W.role_slots && T::kCooperativeHeads) {
    // One norm-and-rotate body for the q heads and then the k head (compiled once); k's vectors
    // leave the loop, so its cache store (FP8 rounding) is outside it, once per kv head. A token
    // with no cache slot still takes k's trip (not stored): no early exit, which would cost
    // ptxas's proof that the warp stays converged (rope_head_kernel).
    float x[norm_lane_vectors<T>()][T::kVec];
#pragma unroll 1
    for (int k = 0; k < W.loop_slots; ++k) {
      const bool is_k = k == W.q_slots;
      HeadIo<T> io =
          role_head_io<T, false>(p, ref, is_k ? kRoleK : kRoleQ, is_k ? group : group + k * W.head_groups);
      norm_rotate_lane<T>(p, io, lane, cos_v, sin_v, x);
      if (!is_k) {
        per_head_scale<T>(io, lane, x);
        store_lane_vectors<T>(io, lane, x);
      }
    }
    HeadIo<T> k_io = role_head_io<T>(p, ref, kRoleK, group);
    if constexpr (kv_store_loop(W, quantized_cache<T>(), T::kCopyV)) {
      // k's and v's cache stores (their rounding) compiled once: a loop over the two roles, v
      // loaded into x once k is stored. A token with no cache slot runs it with its stores
      // skipped (store_lane_vector): every lane of the warp takes the NVFP4 shuffles.
#pragma unroll 1
      for (int r = 0; r < kKvStoreLoopTrips; ++r) {
        HeadIo<T> io = r == 0 ? k_io : role_head_io<T>(p, ref, kRoleV, group);
        if (r != 0) norm_rotate_lane<T, true>(p, io, lane, cos_v, sin_v, x);
        per_head_scale<T>(io, lane, x);
        store_lane_vectors<T, /*kCacheHead=*/true>(io, lane, x);
      }
    } else {
      per_head_scale<T>(k_io, lane, x);  // no cache slot: its shuffles taken, nothing stored
      store_lane_vectors<T>(k_io, lane, x);
      if constexpr (T::kCopyV) process_lane_norm<T>(p, role_head_io<T>(p, ref, kRoleV, group), lane, cos_v, sin_v);
    }
  } else if constexpr (W.role_slots) {
    // A q slot's steps: its loads through `in` as each LaneStep says (heads_trips).
    auto q_slot = [&](int k) { return role_head_io<T>(p, ref, kRoleQ, group + k * W.head_groups); };
    heads_trips<T>(
        W.q_slots, first,
        [&](int k, LaneWords<T>& in) {
          lane_of_head_angles<T, LaneStep::whole>(p, q_slot(k), lane, true, cos_v, sin_v, shared, shared_row, in);
        },
        [&](int k, LaneWords<T>& in) {
          lane_of_head_angles<T, LaneStep::fetch>(p, q_slot(k), lane, true, cos_v, sin_v, shared, shared_row, in);
        },
        [&](int k, LaneWords<T>& in) {
          lane_of_head_angles<T, LaneStep::finish>(p, q_slot(k), lane, true, cos_v, sin_v, shared, shared_row, in);
        });
    if constexpr (kv_store_loop(W, quantized_cache<T>(), T::kCopyV)) {
#pragma unroll 1
      for (int r = 0; r < kKvStoreLoopTrips; ++r)  // k, then v: their cache stores compiled once
        lane_of_head_angles<T>(p, role_head_io<T>(p, ref, r == 0 ? kRoleK : kRoleV, group), lane, r == 0, cos_v,
                               sin_v, shared, shared_row);
    } else {
      lane_of_head_angles<T>(p, role_head_io<T>(p, ref, kRoleK, group), lane, true, cos_v, sin_v, shared, shared_row);
      if constexpr (T::kCopyV) lane_of_head<T>(p, role_head_io<T>(p, ref, kRoleV, group), lane, cos_v, sin_v);
    }
  } else {
    // Head k's steps (group + k * head_groups), its loads through `in` as each LaneStep says.
    auto head_of = [&](int k) { return group + k * W.head_groups; };
    heads_trips<T>(
        owned_heads<T>(group), first,
        [&](int k, LaneWords<T>& in) {
          lane_of_head_angles<T, LaneStep::whole>(p, head_io<T>(p, ref, head_of(k)), lane, head_of(k) < W.rot_heads,
                                                  cos_v, sin_v, shared, shared_row, in);
        },
        [&](int k, LaneWords<T>& in) {
          lane_of_head_angles<T, LaneStep::fetch>(p, head_io<T>(p, ref, head_of(k)), lane, head_of(k) < W.rot_heads,
                                                  cos_v, sin_v, shared, shared_row, in);
        },
        [&](int k, LaneWords<T>& in) {
          lane_of_head_angles<T, LaneStep::finish>(p, head_io<T>(p, ref, head_of(k)), lane, head_of(k) < W.rot_heads,
                                                   cos_v, sin_v, shared, shared_row, in);
        });
  }
}

}  // namespace ropejit
