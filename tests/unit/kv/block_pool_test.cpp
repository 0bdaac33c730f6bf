// The block pool and KV cache bookkeeping, with no tensors involved in the pool tests:
// exact block ids, LRU eviction order, refcounts, rollback.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kernels/backend.h"
#include "kv/kv_cache.h"

namespace tachyon::kv {
namespace {

TEST(BlockPool, AllocatesInOrderAndRunsOut) {
  BlockPool pool(3);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.allocate(), std::nullopt);
  pool.release(1);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.allocate(), 1);
}

TEST(BlockPool, CachedBlocksAreEvictedLeastRecentlyReleasedFirst) {
  BlockPool pool(4);
  for (int i = 0; i < 4; ++i) pool.allocate();
  pool.set_hash(2, 0xaa);
  pool.set_hash(0, 0xbb);
  pool.release(2);  // released first: evicted first
  pool.release(0);
  EXPECT_EQ(pool.num_cached(), 2);
  EXPECT_EQ(pool.allocate(), 2);  // evicts 0xaa
  EXPECT_EQ(pool.find_cached(0xaa), std::nullopt);
  auto hit = pool.find_cached(0xbb);  // revived
  ASSERT_EQ(hit, 0);
  EXPECT_EQ(pool.refcount(0), 1);
  EXPECT_EQ(pool.num_free(), 0);
}

// A block released without a hash is handed out next, before never-used blocks and before
// cached ones: a pool used in turns touches only as many blocks as its busiest turn held (its
// pages become resident only when written), and no cached prefix is evicted while a worthless
// free block is left.
TEST(BlockPool, BlocksReleasedWithoutAHashAreReusedFirst) {
  BlockPool pool(64);
  std::vector<BlockId> ever;
  for (int turn = 0; turn < 20; ++turn) {
    std::vector<BlockId> held;
    for (int i = 0; i < 4; ++i) held.push_back(*pool.allocate());
    ever.insert(ever.end(), held.begin(), held.end());
    for (BlockId id : held) pool.release(id);
  }
  std::sort(ever.begin(), ever.end());
  ever.erase(std::unique(ever.begin(), ever.end()), ever.end());
  EXPECT_EQ(ever, (std::vector<BlockId>{0, 1, 2, 3}));  // handed out in turn: all 64 by the 16th turn

  BlockPool cached(3);
  for (int i = 0; i < 3; ++i) cached.allocate();
  cached.set_hash(0, 0xaa);
  cached.release(0);  // cached
  cached.release(1);  // free, no hash: handed out before the cached block is evicted
  EXPECT_EQ(cached.allocate(), 1);
  EXPECT_EQ(cached.allocate(), 0);  // only now is 0xaa evicted
  EXPECT_EQ(cached.find_cached(0xaa), std::nullopt);
}

TEST(BlockPool, SharedBlocksNeedEveryReleaseAndDoubleReleaseIsCaught) {
  BlockPool pool(2);
  auto id = *pool.allocate();
  pool.retain(id);
  pool.release(id);
  EXPECT_EQ(pool.num_free(), 1);
  pool.release(id);
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_THROW(pool.release(id), Error);
}

TEST(KvCache, ReserveTruncateAndRemoveReturnEveryBlock) {
  auto backend = kernels::make_backend("cpu");
  KvCache kv(*backend, {.num_layers = 1, .num_kv_heads = 1, .head_dim = 8, .block_size = 16, .num_blocks = 4});
  auto a = kv.add_sequence(), b = kv.add_sequence();
  EXPECT_TRUE(kv.reserve(a, 33));  // 3 blocks
  EXPECT_EQ(kv.block_table(a).size(), 3u);
  EXPECT_FALSE(kv.reserve(b, 17));  // needs 2, 1 left: refused, nothing changed
  EXPECT_EQ(kv.block_table(b).size(), 0u);
  EXPECT_EQ(kv.pool().num_free(), 1);
  kv.truncate(a, 16);  // speculation rollback: 1 block left
  EXPECT_EQ(kv.block_table(a).size(), 1u);
  EXPECT_EQ(kv.num_tokens(a), 16);
  EXPECT_TRUE(kv.reserve(b, 17));
  kv.remove_sequence(a);
  kv.remove_sequence(b);
  EXPECT_EQ(kv.pool().num_free(), 4);
  EXPECT_THROW(kv.num_tokens(a), Error);
}

// A draft tree's accepted branch moves to consecutive positions in one op: the same K/V as
// moving position by position, in every layer; a move that reads a position an earlier move
// wrote is refused.
TEST(KvCache, CopyPositionsMovesEveryLayersRowsInOrder) {
  auto backend = kernels::make_backend("cpu");
  const KvLayout layout{.num_layers = 2, .num_kv_heads = 2, .head_dim = 4, .block_size = 4, .num_blocks = 6};
  KvCache kv(*backend, layout);
  auto seq = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(seq, 12));
  const int64_t width = 8, slots = 6 * 4;
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t i = 0; i < slots * width; ++i) {
      kv.layer(l).k_f32()[i] = static_cast<float>(1000 * l + i);
      kv.layer(l).v_f32()[i] = static_cast<float>(-1000 * l - i);
    }
  // The expected result: one copy_position at a time, on a snapshot.
  auto snapshot = [&] {
    std::vector<float> all;
    for (int64_t l = 0; l < 2; ++l) {
      all.insert(all.end(), kv.layer(l).k_f32(), kv.layer(l).k_f32() + slots * width);
      all.insert(all.end(), kv.layer(l).v_f32(), kv.layer(l).v_f32() + slots * width);
    }
    return all;
  };
  const auto before = snapshot();
  const std::vector<std::pair<int32_t, int32_t>> moves = {{7, 5}, {9, 6}, {10, 7}};  // 7 is read, then written
  for (const auto& move : moves) kv.copy_positions(seq, {&move, 1});
  const auto one_by_one = snapshot();
  // Restore and do it in one op.
  size_t at = 0;
  for (int64_t l = 0; l < 2; ++l) {
    std::copy_n(before.begin() + static_cast<long>(at), slots * width, kv.layer(l).k_f32()), at += slots * width;
    std::copy_n(before.begin() + static_cast<long>(at), slots * width, kv.layer(l).v_f32()), at += slots * width;
  }
  kv.copy_positions(seq, moves);
  EXPECT_EQ(snapshot(), one_by_one);
  EXPECT_NE(one_by_one, before);
  const std::vector<std::pair<int32_t, int32_t>> bad = {{7, 5}, {5, 6}};
  EXPECT_THROW(kv.copy_positions(seq, bad), Error);
}

}  // namespace
}  // namespace tachyon::kv
