// A KV cache whose sliding-window layers keep their K/V in blocks of their own
// (KvLayout::splits_sliding): those blocks are released once they left every window, the full
// layers keep theirs, prefix hits end where the sliding group still holds the window, and
// layouts without the split are what they were.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <span>
#include <vector>

#include "base/error.h"
#include "kv/disk_prefix_store.h"
#include "kv/kv_cache.h"

namespace tachyon::kv {
namespace {

// Gemma 3's pattern in small: three sliding layers of window 8 and one full layer, blocks of 4.
KvLayout split_layout(int32_t full_blocks, int32_t sliding_blocks) {
  KvLayout l{.num_layers = 4, .num_kv_heads = 1, .head_dim = 32, .block_size = 4, .num_blocks = full_blocks};
  l.layer_window = {8, 8, 0, 8};
  l.num_sliding_blocks = sliding_blocks;
  return l;
}

int32_t held(const std::vector<BlockId>& table) {
  return static_cast<int32_t>(std::count_if(table.begin(), table.end(), [](BlockId b) { return b != kNoBlock; }));
}

TEST(KvCacheSliding, BytesPerGroup) {
  KvLayout l = split_layout(10, 6);
  const size_t layer_block = 2 * 4 * 32 * 4;  // K and V, 4 slots, one head of 32, f32
  EXPECT_TRUE(l.splits_sliding());
  EXPECT_EQ(l.bytes_per_block(), layer_block);            // the full layer only
  EXPECT_EQ(l.sliding_bytes_per_block(), 3 * layer_block);  // the three sliding layers
  EXPECT_EQ(l.sliding_pool_bytes(), 6 * 3 * layer_block);
  EXPECT_EQ(l.sliding_blocks_per_sequence(1), 3);  // keys [q − 7, q]: 8 positions over at most 3 blocks
  l.num_sliding_blocks = 0;  // no split: every layer in every block, as before
  EXPECT_FALSE(l.splits_sliding());
  EXPECT_EQ(l.bytes_per_block(), 4 * layer_block);
  EXPECT_EQ(l.sliding_pool_bytes(), 0u);
  l.num_sliding_blocks = 6;
  l.layer_window = {8, 8, 8, 8};  // every layer sliding: nothing to split off
  EXPECT_FALSE(l.splits_sliding());
}

TEST(KvCacheSliding, ReleasesBlocksThatLeftTheWindowAndKeepsFullOnes) {
  auto backend = kernels::make_backend("cpu");
  KvCache kv(*backend, split_layout(64, 8));
  const SeqId s = kv.add_sequence();
  int32_t peak = 0;
  for (int32_t n = 1; n <= 200; ++n) {  // a decode: position n − 1 is computed by the next forward
    ASSERT_TRUE(kv.reserve(s, n, n - 1)) << "at " << n;
    peak = std::max(peak, kv.num_sliding_blocks_in_use());
    const std::vector<BlockId>& sliding = kv.sliding_block_table(s);
    ASSERT_EQ(sliding.size(), kv.block_table(s).size());
    // Every block the row at n − 1 reads (keys n − 8 .. n − 1) is held.
    for (int32_t p = std::max(0, n - 8); p < n; ++p) ASSERT_NE(sliding[p / 4], kNoBlock) << n << " " << p;
    EXPECT_LE(kv.first_sliding_position(s), std::max(0, n - 8));
  }
  EXPECT_EQ(static_cast<int32_t>(kv.block_table(s).size()), 50);  // the full layer keeps all 200 positions
  EXPECT_EQ(kv.pool().num_free(), 14);
  EXPECT_EQ(held(kv.sliding_block_table(s)), 2);  // keys 192..199: blocks 48 and 49
  EXPECT_EQ(peak, 3);  // bounded by the window, not the length (the pool has 8)
  ASSERT_TRUE(kv.reserve(s, 205, 200));  // a verify step of 5 rows from 200 (keys from 193)
  EXPECT_EQ(held(kv.sliding_block_table(s)), 4);
  kv.truncate(s, 202);  // 2 accepted: the rollback keeps the blocks rows from 202 read
  EXPECT_EQ(held(kv.sliding_block_table(s)), 3);
  ASSERT_TRUE(kv.reserve(s, 203, 202));
  EXPECT_EQ(kv.first_sliding_position(s), 192);
  kv.remove_sequence(s);
  EXPECT_EQ(kv.num_sliding_blocks_in_use(), 0);
  EXPECT_EQ(kv.pool().num_free(), 64);
}

TEST(KvCacheSliding, OutOfSlidingBlocksAllocatesNothing) {
  auto backend = kernels::make_backend("cpu");
  KvCache kv(*backend, split_layout(64, 4));
  const SeqId a = kv.add_sequence(), b = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(a, 12));  // 3 sliding blocks
  EXPECT_FALSE(kv.reserve(b, 8));  // needs 2, 1 left
  EXPECT_TRUE(kv.block_table(b).empty());
  EXPECT_EQ(kv.pool().num_free(), 61);
  ASSERT_TRUE(kv.reserve(a, 13, 12));  // the row at 12 sees keys 5..12: block 0 goes back first
  EXPECT_EQ(kv.sliding_block_table(a)[0], kNoBlock);
  EXPECT_TRUE(kv.reserve(b, 4));
}

TEST(KvCacheSliding, PrefixHitEndsWhereTheSlidingWindowIsStillHeld) {
  auto backend = kernels::make_backend("cpu");
  KvCache kv(*backend, split_layout(64, 12));
  std::vector<int32_t> tokens(41);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i * 7 % 23);
  const SeqId a = kv.add_sequence();
  for (int32_t n = 4; n <= 40; n += 4) {  // computed in chunks of 4, registered after each
    ASSERT_TRUE(kv.reserve(a, n, n - 4));
    kv.register_blocks(a, tokens, n);
  }
  kv.remove_sequence(a);  // its sliding blocks 7..9 were held last; 0..6 were released earlier
  const SeqId b = kv.add_sequence();
  // Every full block of the 40-token prefix is cached, and the sliding blocks 0..9 still are
  // (released and registered, not yet reused): the whole prefix is a hit.
  EXPECT_EQ(kv.match_prefix(b, tokens), 40);
  EXPECT_EQ(kv.first_sliding_position(b), 32);  // the row at 40 reads keys 33..40
  EXPECT_EQ(held(kv.sliding_block_table(b)), 2);
  kv.remove_sequence(b);
  // Another sequence takes 11 of the 12 sliding blocks, least recently released first: only
  // the last one (block 9) keeps its content; the full layers' blocks are all still cached.
  const SeqId c = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(c, 44));
  kv.remove_sequence(c);
  const SeqId d = kv.add_sequence();
  EXPECT_EQ(kv.match_prefix(d, tokens), 0) << "the window's sliding blocks were reused: no hit may read them";
  EXPECT_EQ(kv.pool().num_free() + static_cast<int32_t>(kv.block_table(d).size()), 64);
}

TEST(KvCacheSliding, ShorterHitWhenOnlyAnEarlierWindowIsHeld) {
  auto backend = kernels::make_backend("cpu");
  KvCache kv(*backend, split_layout(64, 12));
  std::vector<int32_t> tokens(41);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i * 5 % 19);
  const SeqId a = kv.add_sequence();
  for (int32_t n = 4; n <= 40; n += 4) {
    ASSERT_TRUE(kv.reserve(a, n, n - 4));
    kv.register_blocks(a, tokens, n);
  }
  kv.remove_sequence(a);
  // A request sharing the first 16 tokens holds the sliding blocks of their window (2 and 3).
  const SeqId e = kv.add_sequence();
  ASSERT_EQ(kv.match_prefix(e, std::span<const int32_t>(tokens).first(17)), 16);
  EXPECT_EQ(held(kv.sliding_block_table(e)), 2);
  const SeqId c = kv.add_sequence();  // takes the other 10 sliding blocks: every other window is gone
  ASSERT_TRUE(kv.reserve(c, 40));
  const SeqId b = kv.add_sequence();
  EXPECT_EQ(kv.match_prefix(b, tokens), 16) << "the full layers hold 40 tokens; the sliding ones only the window at 16";
  for (int32_t p = 16 - 7; p < 16; ++p) EXPECT_NE(kv.sliding_block_table(b)[p / 4], kNoBlock) << p;
  EXPECT_EQ(kv.block_table(b).size(), 4u);
  EXPECT_EQ(kv.pool().num_free(), 64 - 10 - 4);  // c's 10; the 4 shared by e and b; the trimmed hit's 6 released
}

TEST(KvCacheSliding, CopyPositionsMovesBothGroups) {
  auto backend = kernels::make_backend("cpu");
  KvCache kv(*backend, split_layout(16, 8));
  const SeqId s = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(s, 24));
  ASSERT_TRUE(kv.reserve(s, 24, 16));  // the rows from 16 read keys from 9: blocks 0 and 1 go
  EXPECT_EQ(kv.first_sliding_position(s), 8);
  for (int64_t l = 0; l < 4; ++l) {  // tag positions 16..23 with their position, per layer
    const kernels::PagedKv layer = kv.layer(l);
    const std::vector<BlockId>& table = l == 2 ? kv.block_table(s) : kv.sliding_block_table(s);
    for (int32_t p = 16; p < 24; ++p)
      static_cast<float*>(layer.k)[(int64_t{table[p / 4]} * 4 + p % 4) * 32] = static_cast<float>(p + 100 * l);
  }
  const std::pair<int32_t, int32_t> moves[] = {{22, 17}};
  kv.copy_positions(s, moves);
  for (int64_t l = 0; l < 4; ++l) {
    const std::vector<BlockId>& table = l == 2 ? kv.block_table(s) : kv.sliding_block_table(s);
    EXPECT_EQ(static_cast<float*>(kv.layer(l).k)[(int64_t{table[17 / 4]} * 4 + 17 % 4) * 32], 22.f + 100 * l);
  }
  const std::pair<int32_t, int32_t> released[] = {{3, 17}};  // block 0 left the window
  EXPECT_THROW(kv.copy_positions(s, released), Error);
}

TEST(KvCacheSliding, DiskTierAndRecurrentStateAreRefused) {
  auto backend = kernels::make_backend("cpu");
  KvCache kv(*backend, split_layout(16, 8));
  const auto dir = std::filesystem::temp_directory_path() / ("tachyon-sliding-disk-" + std::to_string(::getpid()));
  auto disk = std::make_shared<DiskPrefixStore>(DiskPrefixStore::Options{.dir = dir.string(), .max_bytes = 1 << 20,
                                                                           .fingerprint = 1});
  EXPECT_THROW(kv.attach_disk_tier(disk), Error);
  disk.reset();
  std::filesystem::remove_all(dir);
  KvLayout hybrid = split_layout(16, 8);
  hybrid.num_state_layers = 1;
  hybrid.state_floats = 8;
  EXPECT_THROW(KvCache(*backend, hybrid), Error);
}

}  // namespace
}  // namespace tachyon::kv
