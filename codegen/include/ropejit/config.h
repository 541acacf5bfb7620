#pragma once
/// Config: one launch shape of a kernel (the tunables). kTunables is the single table the
/// generator, the heuristic and the tuner read.
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ropejit/shape.cuh"  // WorkShape, shared with the kernel
#include "ropejit/spec.h"

namespace ropejit {

/// Where sin/cos come from: computed from baked inv_freq, or read from an fp32 table.
enum class SinCosMode { compute, table };
/// one block per group of work items, or a persistent grid sized to the SM count.
enum class GridMode { blocks, persistent };

inline constexpr std::array<EnumName<SinCosMode>, 2> kSinCosNames{{
    {SinCosMode::compute, "compute"}, {SinCosMode::table, "table"}}};
inline constexpr std::array<EnumName<GridMode>, 2> kGridNames{{
    {GridMode::blocks, "blocks"}, {GridMode::persistent, "persistent"}}};
template <> constexpr const auto& enum_table<SinCosMode>() { return kSinCosNames; }
template <> constexpr const auto& enum_table<GridMode>() { return kGridNames; }

/// A launch shape. Every field is a tunable listed in kTunables.
struct Config {
  int block_threads = 256;      ///< threads per block
  int vec = 8;                  ///< elements per vector access (vec * dtype size <= 16 bytes)
  int heads_per_thread = 1;     ///< heads one thread rotates with one sin/cos computation
  SinCosMode sincos = SinCosMode::compute;
  GridMode grid = GridMode::blocks;
  /// Loads one step ahead of their use: a thread's first head's before its angles (and the
  /// block's barrier), each next head's before this head's stores (rope.cuh heads_trips).
  bool ahead = false;
  /// A partial cooperative head (a QK-norm, per-head FP8 scales, the Hadamard transform) spreads
  /// its pass-through vectors over fewer lanes, rotating ones included (shape.cuh make_work_shape).
  bool spread = false;
  bool operator==(const Config& o) const {
    return block_threads == o.block_threads && vec == o.vec && heads_per_thread == o.heads_per_thread &&
           sincos == o.sincos && grid == o.grid && ahead == o.ahead && spread == o.spread;
  }
};

/// One tunable: its name and candidate values (enum tunables list their enum indices).
struct Tunable {
  std::string_view name;
  std::vector<int> values;
};

/// The search space's axes, in Config field order.
const std::vector<Tunable>& tunables();

/// Sets the tunable `name` of `c` to `value` (an enum tunable: its index); Error(internal) for a
/// name tunables() does not list.
void set_tunable(Config& c, std::string_view name, int value);

/// Why a config cannot implement a spec (vec must divide the rotated half, etc.), or nullopt.
std::optional<std::string> config_problem(const Spec& spec, const Config& config);

/// Bytes one lane loads of one head (rope.cuh lane_load_vectors): its rotated vectors (one
/// interleaved, the neox halves, the whole neox slice) or a QK-norm lane's, in the loaded dtype.
int lane_load_bytes(const Spec& spec, const Config& config);

/// The heuristic default: valid for every spec (config_problem is nullopt).
Config default_config(const Spec& spec);

/// Launches of up to this many tokens are decode steps (default_config's decode shape).
inline constexpr int64_t kDecodeTokens = 8;

/// The heuristic default for launches of `tokens` tokens: default_config(spec), and for decode
/// sizes (up to 8 tokens) one head a thread with its loads ahead (one round trip a launch).
Config default_config(const Spec& spec, int64_t tokens);

/// "bt256.v8.h1.compute.blocks" (".ahead" after it with loads ahead, ".spread" with a spread tail): short, stable, used in
/// source and cache keys.
std::string config_name(const Config& config);

/// The work decomposition of a valid (spec, config): make_work_shape of
/// templates/ropejit/shape.cuh, the function the kernel evaluates on its Traits.
WorkShape work_shape(const Spec& spec, const Config& config);

/// True when a launch reads and writes the q/k pass-through tail [d, D) (tail_moves of
/// shape.cuh for the spec): it leaves the buffer, or a bias or QK-norm changes it.
bool rotary_tail_moves(const Spec& spec);

/// Grid and block of one launch over `rows` rows (tokens, or batch * max_seq_len padded).
struct LaunchDims {
  unsigned grid = 1;
  unsigned block = 1;
};

/// Launch dimensions; a persistent grid is `sm_count` x `blocks_per_sm` blocks (the occupancy
/// the loaded kernel reaches; <= 0: the thread limit's bound, 2048 / block_threads). Blocks
/// mode ignores both.
LaunchDims launch_dims(const Spec& spec, const Config& config, int64_t rows, int sm_count,
                       int blocks_per_sm = 0);

/// JSON text of a config and back (throws Error(invalid_argument) naming the field).
std::string config_to_json(const Config& config);
Config config_from_json(std::string_view text);

}  // namespace ropejit
