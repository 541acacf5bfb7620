#pragma once
/// Static kernel report: resource usage, occupancy and the memory-instruction mix of one
/// compiled kernel, read from its SASS (nvdisasm) or, without a disassembler, its PTX.
/// docs/static-report.md defines every figure.
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ropejit/compile.h"
#include "ropejit/config.h"

namespace ropejit {

/// Static counts of global memory instructions, one slot per access width.
struct WidthCounts {
  static constexpr std::array<int, 6> kBits = {8, 16, 32, 64, 128, 256};
  std::array<int, 6> count{};  ///< count[i]: accesses of kBits[i] bits
  /// Adds one access of `bits` (ignored if not in kBits).
  void add(int bits);
  /// All accesses.
  int total() const;
  /// Accesses of `bits`.
  int of(int bits) const;
  /// Accesses of any width but `bits`.
  int other_than(int bits) const;
};

/// What a SASS or PTX listing says about one kernel (the parsers' result).
struct InstrCounts {
  int instructions = 0;            ///< static count, NOP padding and the trailing self-branch left out
  double per_item = 0.0;           ///< estimated instructions one thread runs per work item
  WidthCounts data_loads;          ///< LDG (not .CONSTANT) / ld.global (not .nc): q/k/v and bias
  WidthCounts readonly_loads;      ///< LDG.CONSTANT / ld.global.nc: positions, inv_freq, cos/sin table
  WidthCounts data_stores;         ///< STG / st.global
  WidthCounts generic_loads;       ///< LD.E / ld without a state space (address space unknown)
  WidthCounts generic_stores;      ///< ST.E / st without a state space
  int local_accesses = 0;          ///< LDL/STL, ld.local/st.local
  int shared_accesses = 0;         ///< LDS/STS, ld.shared/st.shared
  int inner_loops = 0;             ///< loops inside the grid-stride loop (nested too), the shared-angle loop not counted
  int loads_in_flight = 0;         ///< most 128-bit loads issued before one of their results is read
  int bytes_in_flight = 0;         ///< the same for q/k/v loads of any width, in bytes
  int fp64_arith = 0;              ///< DFMA, DADD, DMUL, DSETP, DMNMX (fma/add/mul .f64 in PTX)
  int fp64_convert = 0;            ///< conversions and rounding to or from f64 (F2F/F2I/I2F/FRND .F64)
  double fp64_arith_per_item = 0;  ///< fp64_arith weighted as per_item
  double fp64_convert_per_item = 0;
  int first_data_load = -1;        ///< listing index of the first q/k/v load (-1: none)
  int first_barrier = -1;          ///< listing index of the first unguarded block barrier (-1: none)
  /// The first q/k/v load is issued before any instruction reads a read-only (index) load's
  /// result: its round trip overlaps the position's (a decode launch's one round trip).
  bool data_load_before_index_use = false;
};

/// Counts a SASS listing (`nvdisasm -c` or `cuobjdump -sass`). Instructions inside loops
/// nested in the outermost (grid-stride) loop, at any depth, weigh their innermost loop's trips
/// per item in the per-item figures: `inner_loop_trips[n]` for the n-th such loop in the listing
/// when there are as many as it names, else `inner_loop_trips[0]` for each; a nested loop that
/// fills shared memory without q/k/v accesses (a block's shared angles): `angle_loop_weight`, its
/// trips per item (a fraction where only some of a block's warps take it).
InstrCounts count_sass(std::string_view listing, const std::vector<int>& inner_loop_trips = {1},
                       double angle_loop_weight = 1);

/// Counts a PTX listing the same way (instruction counts are PTX, not machine instructions).
InstrCounts count_ptx(std::string_view ptx, const std::vector<int>& inner_loop_trips = {1},
                      double angle_loop_weight = 1);

/// Per-SM limits of one compute capability, the inputs of theoretical occupancy.
struct ArchLimits {
  int max_threads = 2048;       ///< resident threads per SM
  int max_warps = 64;           ///< resident warps per SM
  int max_blocks = 32;          ///< resident blocks per SM
  int registers = 65536;        ///< 32-bit registers per SM
  int reg_alloc_unit = 256;     ///< registers per warp are allocated in these units
  int shared_bytes = 233472;    ///< shared memory per SM usable by blocks
  int shared_reserved = 1024;   ///< shared memory the system reserves per block
};

/// The limits of "sm_80", "sm_90", ... (Error invalid_argument for an unknown arch).
ArchLimits arch_limits(const std::string& arch);

/// Theoretical occupancy of one launch shape.
struct Occupancy {
  int blocks_per_sm = 0;
  int warps_per_sm = 0;
  double fraction = 0.0;  ///< warps_per_sm / max_warps
  std::string limiter;    ///< "threads", "blocks", "registers" or "shared"
};

/// Occupancy of blocks of `block_threads` using `registers` per thread and `shared` bytes.
Occupancy occupancy(const ArchLimits& limits, int block_threads, int registers, int shared);

/// Where the instruction figures come from.
enum class StatsSource { automatic, sass, ptx };

/// A loop inside the grid-stride loop as the plan sees it: what it is, and its trips per work item.
struct PlannedLoop {
  std::string name;
  int trips = 1;
};

/// The static report of one kernel.
struct KernelStats {
  std::string spec_name;
  std::string arch;
  std::string config;        ///< config_name
  std::string source;        ///< "sass" or "ptx"
  std::string disassembler;  ///< the tool used for "sass", or why PTX was used
  int registers = 0;
  int spill_bytes = 0;
  int stack_bytes = 0;       ///< local memory per thread
  int shared_bytes = 0;
  int block_threads = 0;
  int heads_per_thread = 1;  ///< the config's; an all-heads QK-norm's actual heads per thread
  int heads_loop_trips = 1;  ///< times the heads loop runs per item (role slots: the q heads)
  /// Loop trips a thread runs one after another, each waiting for its own loads: the heads loop
  /// (an all-heads norm: once per pass over its heads), then the k/v store loop (the model's lifetime).
  int serial_trips = 1;
  /// Each loop inside the grid-stride loop, nested ones too, in program order (the heads loop first).
  std::vector<PlannedLoop> planned_loops;
  Occupancy occupancy;       ///< at block_threads on `arch`
  InstrCounts counts;
  int items_per_row = 0;         ///< work items (threads) per token row
  double qkv_vectors_per_row = 0;  ///< 16-byte vectors of q/k/v one row reads (each also written)
  double instr_per_vector = 0;     ///< per_item * items_per_row / qkv_vectors_per_row
};

/// The report of `binary` (a CUBIN of `source` for an sm_XX, or PTX). `source` serves the PTX
/// fallback. Error(invalid_argument) if `want` is sass and no disassembler is found;
/// Error(internal) if the disassembler fails.
KernelStats kernel_stats(const Spec& spec, const Config& config, const Source& source, const Binary& binary,
                         StatsSource want = StatsSource::automatic);

/// The disassembler to run: $ROPEJIT_NVDISASM ("none" disables it), nvdisasm or cuobjdump on
/// PATH, in $CUDA_HOME/bin (default /usr/local/cuda/bin), then the path found at configure time.
std::optional<std::string> find_disassembler();

/// The SASS of a CUBIN from the disassembler at `tool` (nvdisasm -c, or cuobjdump -sass),
/// run on a temporary file. Error(internal) with its output if it fails.
std::string disassemble(const std::string& tool, std::string_view cubin);

}  // namespace ropejit
