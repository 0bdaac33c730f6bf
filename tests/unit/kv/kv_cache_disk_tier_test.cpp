// KvCache with the disk tier attached: a cached block the pool evicts is written with its bytes
// in the stored format; a prefix that misses in memory is loaded back from disk, also by a new
// cache (a restarted server), with the same bytes; a hybrid model's state snapshot travels
// with its block.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <vector>

#include "kv/disk_prefix_store.h"
#include "kv/kv_cache.h"
#include "tier_test_blocks.h"
#include "hybrid_snapshots.h"

namespace tachyon::kv {
namespace {

namespace fs = std::filesystem;
using kernels::KvFormat;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("tachyon_kv_disk_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::shared_ptr<DiskPrefixStore> open_store(const TempDir& dir, const KvCache& kv) {
  return std::make_shared<DiskPrefixStore>(
      DiskPrefixStore::Options{.dir = dir.path.string(), .max_bytes = 64 << 20, .fingerprint = kv.layout_fingerprint()});
}

const KvLayout kLayout = kTierLayout;

TEST(KvCacheDiskTier, EvictedBlocksAreWrittenAndLoadedBackWithTheirBytes) {
  TempDir dir;
  auto backend = kernels::make_backend("cpu");
  KvCache kv(*backend, kLayout);
  kv.attach_disk_tier(open_store(dir, kv));
  const std::vector<int32_t> t = tier_prompt(13);
  const auto payloads = cache_prompt(*backend, kv, t);
  EXPECT_EQ(kv.pool().num_cached(), 3);
  // Another sequence takes every block: the three cached ones are evicted, so written.
  const SeqId other = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(other, 16));
  kv.disk_tier()->flush();
  EXPECT_EQ(kv.pool().num_cached(), 0);
  EXPECT_EQ(kv.disk_tier()->stats().writes, 3u);
  kv.remove_sequence(other);
  // Nothing in memory: the prefix comes from disk, byte for byte.
  const SeqId s = kv.add_sequence();
  EXPECT_EQ(kv.match_prefix(s, t), 12);
  EXPECT_EQ(kv.num_disk_loaded_blocks(), 3);
  for (int b = 0; b < 3; ++b) EXPECT_EQ(kv.block_payload(kv.block_table(s)[b]), payloads[b]) << "block " << b;
  // Another prompt sharing only the first block gets that one.
  std::vector<int32_t> u = t;
  u[5] = 7;
  kv.remove_sequence(s);
  const SeqId s2 = kv.add_sequence();
  EXPECT_EQ(kv.match_prefix(s2, u), 4);
}

TEST(KvCacheDiskTier, ANewCacheOnTheSameFolderReusesTheBlocksSpilledAtShutdown) {
  TempDir dir;
  auto backend = kernels::make_backend("cpu");
  const std::vector<int32_t> t = tier_prompt(13);
  std::vector<std::vector<std::byte>> payloads;
  {
    KvCache kv(*backend, kLayout);
    kv.attach_disk_tier(open_store(dir, kv));
    payloads = cache_prompt(*backend, kv, t);
    EXPECT_EQ(kv.disk_tier()->stats().writes, 0u);  // nothing evicted yet
    EXPECT_EQ(kv.spill_to_disk(), 3);
    EXPECT_EQ(kv.disk_tier()->stats().writes, 3u);
    EXPECT_EQ(kv.spill_to_disk(), 0);  // already there
  }
  KvCache restarted(*backend, kLayout);
  restarted.attach_disk_tier(open_store(dir, restarted));
  const SeqId s = restarted.add_sequence();
  EXPECT_EQ(restarted.match_prefix(s, t), 12);
  EXPECT_EQ(restarted.num_disk_loaded_blocks(), 3);
  for (int b = 0; b < 3; ++b) EXPECT_EQ(restarted.block_payload(restarted.block_table(s)[b]), payloads[b]);
  // Without the tier the same cache has nothing for it.
  KvCache memory_only(*backend, kLayout);
  const SeqId m = memory_only.add_sequence();
  EXPECT_EQ(memory_only.match_prefix(m, t), 0);
}

TEST(KvCacheDiskTier, ALayoutWithOtherBytesHasAnotherFingerprint) {
  auto backend = kernels::make_backend("cpu");
  KvCache a(*backend, kLayout);
  KvLayout other = kLayout;
  other.format = KvFormat::BF16;
  KvCache b(*backend, other);
  KvLayout more_blocks = kLayout;
  more_blocks.num_blocks = 8;  // the pool's size does not change a block's bytes
  KvCache c(*backend, more_blocks);
  EXPECT_NE(a.layout_fingerprint(), b.layout_fingerprint());
  EXPECT_EQ(a.layout_fingerprint(), c.layout_fingerprint());
  // A payload of another layout is refused, not half-loaded.
  const std::vector<std::byte> wrong(b.block_payload(0).size() + 8);
  EXPECT_FALSE(a.restore_block(0, wrong));
}

TEST(KvCacheDiskTier, AHybridModelsSnapshotTravelsWithItsBlock) {
  TempDir dir;
  auto backend = kernels::make_backend("cpu");
  const KvLayout layout = hybrid_snapshot_layout();
  const std::vector<int32_t> t = tier_prompt(9);
  std::vector<float> expected;
  {
    KvCache kv(*backend, layout);
    kv.attach_disk_tier(open_store(dir, kv));
    const SeqId s = kv.add_sequence();
    ASSERT_TRUE(kv.reserve(s, 8));
    expected = write_hybrid_snapshots(*backend, kv, s);
    kv.register_blocks(s, t, 8);
    kv.remove_sequence(s);
    EXPECT_EQ(kv.spill_to_disk(), 2);
  }
  KvCache restarted(*backend, layout);
  restarted.attach_disk_tier(open_store(dir, restarted));
  const SeqId s = restarted.add_sequence();
  EXPECT_EQ(restarted.match_prefix(s, t), 8);  // a hybrid prefix needs the snapshot of its last block
  EXPECT_EQ(restarted.resume_position(s, 8), 8);
  EXPECT_EQ(read_resumed_snapshot(*backend, restarted, s), expected);
}

}  // namespace
}  // namespace tachyon::kv
