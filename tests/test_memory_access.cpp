// What a launch does to memory (runtime memory_access, the calibrated model's input): sectors,
// separate runs, partly written sectors, second reads and index loads, per layout (unit tier).
// ropejit-tier: unit
#include <gtest/gtest.h>

#include "ropejit/config.h"
#include "ropejit/runtime.h"
#include "support/repo_paths.h"

using namespace ropejit;

namespace {

MemoryAccess access_of(const std::string& spec_name, int64_t tokens, int batch = 1) {
  const Spec spec = load_spec_file(test::spec_path(spec_name));
  LaunchShape shape;
  shape.tokens = tokens;
  shape.batch = batch;
  shape.max_seq_len = (tokens + batch - 1) / batch;
  const MemoryAccess a = memory_access(spec, default_config(spec), shape);
  EXPECT_EQ(a.bytes, bytes_moved(spec, tokens, batch, shape.max_seq_len)) << spec_name;
  return a;
}

}  // namespace

TEST(MemoryAccess, DenseRowsAreOneStream) {
  // Llama-3.1-8B in place: q and k whole rows, positions: every byte a sector byte, no runs apart.
  const MemoryAccess a = access_of("llama-3.1-8b", 1000);
  EXPECT_EQ(a.bytes, 1000 * 20484);
  EXPECT_EQ(a.sector_bytes, a.bytes);
  EXPECT_EQ(a.chunks, 0);
  EXPECT_EQ(a.partial_sectors, 0);
  EXPECT_EQ(a.reread_bytes, 0);
  EXPECT_EQ(a.index_levels, 1);
}

TEST(MemoryAccess, PartialRotarySlicesRoundToSectors) {
  // GPT-NeoX-20B: 24 of 96 dims in place, 48 bytes at the start of each 192-byte head, 128 heads:
  // two sectors read and two written per head, the second written in part, each a run of its own.
  const MemoryAccess a = access_of("gpt-neox-20b", 100);
  EXPECT_EQ(a.bytes, 100 * (128 * 48 * 2 + 4));
  EXPECT_EQ(a.sector_bytes, 100 * (128 * 64 * 2 + 4));
  EXPECT_EQ(a.chunks, 100 * 128 * 2);
  EXPECT_EQ(a.partial_sectors, 100 * 128);
}

TEST(MemoryAccess, TrailingSlicesAreRunsOfTheirOwn) {
  // DeepSeek-V4's output: the trailing 64 of 512 dims, 128 aligned bytes of each 1 KB head.
  const MemoryAccess out = access_of("deepseek-v4-output", 10);
  EXPECT_EQ(out.sector_bytes, out.bytes);
  EXPECT_EQ(out.chunks, 10 * 64 * 2);
  EXPECT_EQ(out.partial_sectors, 0);
  // MLA: q's rope part (128 of each 384-byte head) read and written, the latent row one run at a
  // random slot; kv_c and k_pe whole rows.
  const MemoryAccess mla = access_of("deepseek-v3-mla", 10);
  EXPECT_EQ(mla.chunks, 10 * (128 * 2 + 1));
}

TEST(MemoryAccess, ScatteredCacheRowsAndTheirScales) {
  // NVFP4 cache, HND, slot mapping: each token's 8 heads x 64 bytes of codes and 8 bytes of
  // block scales, for k and v, land at random slots: 32 runs; each 8-byte scale row shares its
  // sector with other slots' rows: written in part.
  const MemoryAccess a = access_of("llama-3.1-8b-nvfp4", 64);
  EXPECT_EQ(a.chunks, 64 * 32);
  EXPECT_EQ(a.partial_sectors, 64 * 16);
  EXPECT_EQ(a.sector_bytes - a.bytes, 64 * 16 * (32 - 8));
}

TEST(MemoryAccess, BlockTablePagesRunOn) {
  // Phi-3.5 re-rotation: HND pages through block tables, a key's head rows continue the previous
  // key's: one run per page and head, read and written; the binary search over 64 sequences (6
  // levels), the sequence's start, then its block table entry before the first key is read.
  const MemoryAccess a = access_of("phi-3.5-mini-rerotate", 65536, 64);
  EXPECT_GE(a.sector_bytes, a.bytes);
  EXPECT_LT(a.sector_bytes, a.bytes + a.bytes / 100);  // only the block table entries round up
  EXPECT_GE(a.chunks, 65536 / 16 * 32 * 2);
  EXPECT_EQ(a.index_levels, 8);
  EXPECT_EQ(access_of("phi-3.5-mini-rerotate", 4096, 4).index_levels, 4);
}

TEST(MemoryAccess, AllHeadsNormReadsOnceOnChipTwiceElse) {
  // OLMo 2: its default keeps a row on chip (two heads a thread, 256 threads a token): each value
  // read once. A thread with 16 heads (a row one warp) reads q and k for the norm's sums, then again
  // to rotate them; an item reads its share of the row (16 KB over 32 items) between the two.
  const Spec spec = load_spec_file(test::spec_path("olmo-2-7b"));
  LaunchShape shape;
  shape.tokens = 100;
  shape.batch = 1;
  shape.max_seq_len = 100;
  EXPECT_EQ(memory_access(spec, default_config(spec), shape).reread_bytes, 0);
  Config warp = default_config(spec);
  warp.heads_per_thread = 16;
  ASSERT_FALSE(work_shape(spec, warp).row_on_chip);
  const MemoryAccess a = memory_access(spec, warp, shape);
  EXPECT_EQ(a.reread_bytes, 100 * 16384);
  EXPECT_EQ(a.reread_distance, 16384 / 32);
  // Four heads a thread: on chip, its eight vectors read again (not held).
  Config four = default_config(spec);
  four.heads_per_thread = 4;
  ASSERT_TRUE(work_shape(spec, four).row_on_chip);
  EXPECT_EQ(memory_access(spec, four, shape).reread_bytes, 100 * 16384);
  EXPECT_EQ(memory_access(spec, four, shape).reread_distance, 16384 / 128);
}
