// The block pool and KV cache bookkeeping, with no tensors involved in the pool tests:
// exact block ids, LRU eviction order, refcounts, rollback.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tachyon::kv
