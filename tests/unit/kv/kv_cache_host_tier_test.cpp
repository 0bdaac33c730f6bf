// KvCache with the host tier (swap space) attached: a cached block the pool evicts is copied to
// host memory through Backend::swap_copy and copied back, byte for byte (codes and scales of a
// quantized format, a hybrid model's state snapshot), by a prefix lookup that misses in the pool;
// a full tier drops its least recently used blocks (those prefixes are then recomputed) and
// leaks no pool block.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/cpu_backend.h"
#include "kv/host_block_index.h"
#include "kv/kv_cache.h"
#include "tier_test_blocks.h"
#include "hybrid_snapshots.h"

namespace tachyon::kv {
namespace {

using kernels::KvFormat;

// Counts the swap copies, so a test sees that blocks travelled through swap_copy.
class SwapCountingBackend final : public kernels::CpuBackend {
 public:
  void swap_copy(std::span<const DeviceCopy> copies, bool to_host) override {
    (to_host ? outs : ins) += 1;
    CpuBackend::swap_copy(copies, to_host);
  }
  int outs = 0, ins = 0;
};

const KvLayout kLayout = kTierLayout;

// Another sequence takes every block: every cached one is evicted.
void take_every_block(KvCache& kv) {
  const SeqId other = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(other, kv.layout().num_blocks * kv.layout().block_size));
  kv.remove_sequence(other);
}

TEST(HostBlockIndex, ReusesTheLeastRecentlyUsedSlotWhenFull) {
  HostBlockIndex index(2);
  const int32_t a = index.insert(0xa, false), b = index.insert(0xb, true);
  EXPECT_NE(a, b);
  EXPECT_TRUE(index.find(0xa));  // a is now the most recent: b goes first
  EXPECT_EQ(index.insert(0xc, false), b);
  EXPECT_FALSE(index.contains(0xb));
  EXPECT_TRUE(index.contains(0xa));
  EXPECT_EQ(index.evictions(), 1u);
  EXPECT_EQ(index.num_used(), 2);
  index.clear();
  EXPECT_EQ(index.num_used(), 0);
  EXPECT_THROW(HostBlockIndex{0}, Error);
}

TEST(KvCacheHostTier, EvictedBlocksComeBackFromHostMemoryWithTheirBytes) {
  SwapCountingBackend backend;
  KvCache kv(backend, kLayout);
  kv.attach_host_tier(16 * static_cast<int64_t>(kv.host_slot_bytes()));
  EXPECT_EQ(kv.host_tier_stats().slots, 16);
  const std::vector<int32_t> t = tier_prompt(13, 100);
  const auto payloads = cache_prompt(backend, kv, t, 1);
  EXPECT_EQ(kv.host_tier_stats().swapped_out_blocks, 0u);  // nothing evicted yet
  take_every_block(kv);
  EXPECT_EQ(kv.pool().num_cached(), 0);
  HostTierStats st = kv.host_tier_stats();
  EXPECT_EQ(st.swapped_out_blocks, 3u);
  EXPECT_EQ(st.swapped_out_bytes, 3 * 2 * static_cast<uint64_t>(kLayout.k_layout().block_bytes + kLayout.v_layout().block_bytes));
  EXPECT_EQ(backend.outs, 3);
  // Nothing in the pool: the prefix comes from host memory, codes and scales alike.
  const SeqId s = kv.add_sequence();
  EXPECT_EQ(kv.match_prefix(s, t), 12);
  EXPECT_EQ(kv.host_tier_stats().swapped_in_blocks, 3u);
  EXPECT_EQ(backend.ins, 3);
  for (int b = 0; b < 3; ++b) EXPECT_EQ(kv.block_payload(kv.block_table(s)[b]), payloads[b]) << "block " << b;
  kv.remove_sequence(s);
  // Evicted again: the tier still has them, so nothing is copied out a second time.
  take_every_block(kv);
  EXPECT_EQ(kv.host_tier_stats().swapped_out_blocks, 3u);
  EXPECT_EQ(kv.pool().num_free(), kLayout.num_blocks);
}

TEST(KvCacheHostTier, AFullTierDropsTheOldestPrefixWhichIsThenRecomputed) {
  auto backend = kernels::make_backend("cpu");
  KvCache kv(*backend, kLayout);
  kv.attach_host_tier(3 * static_cast<int64_t>(kv.host_slot_bytes()));  // one prompt's blocks
  const std::vector<int32_t> first = tier_prompt(13, 100), second = tier_prompt(13, 500);
  cache_prompt(*backend, kv, first, 1);
  take_every_block(kv);
  const auto payloads = cache_prompt(*backend, kv, second, 7);
  take_every_block(kv);  // the second prompt's blocks take the three slots
  const HostTierStats st = kv.host_tier_stats();
  EXPECT_EQ(st.swapped_out_blocks, 6u);
  EXPECT_EQ(st.evictions, 3u);
  EXPECT_EQ(st.slots_used, 3);
  const SeqId s = kv.add_sequence();
  EXPECT_EQ(kv.match_prefix(s, first), 0);  // dropped: the caller recomputes it
  kv.remove_sequence(s);
  const SeqId s2 = kv.add_sequence();
  EXPECT_EQ(kv.match_prefix(s2, second), 12);
  for (int b = 0; b < 3; ++b) EXPECT_EQ(kv.block_payload(kv.block_table(s2)[b]), payloads[b]) << "block " << b;
  kv.remove_sequence(s2);
  EXPECT_EQ(kv.pool().num_free(), kLayout.num_blocks);  // no block leaked
}

// A prefix whose admission cannot fit the pool now is not loaded (that would only evict other
// cached blocks, and be undone when the admission fails) and the caller is told to wait; once
// blocks are free, it is loaded.
TEST(KvCacheHostTier, NothingIsLoadedForAnAdmissionThatCannotFit) {
  SwapCountingBackend backend;
  KvCache kv(backend, kLayout);
  kv.attach_host_tier(16 * static_cast<int64_t>(kv.host_slot_bytes()));
  const std::vector<int32_t> t = tier_prompt(13, 100);  // 4 blocks once admitted
  cache_prompt(backend, kv, t, 1);
  take_every_block(kv);
  const SeqId running = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(running, 12));  // 3 of the 4 blocks
  const SeqId s = kv.add_sequence();
  bool wait = false;
  EXPECT_EQ(kv.match_prefix(s, t, 16, &wait), 0);
  EXPECT_TRUE(wait);  // the caller may wait for room rather than recompute
  EXPECT_EQ(backend.ins, 0);
  kv.remove_sequence(s);
  kv.remove_sequence(running);
  const SeqId again = kv.add_sequence();
  EXPECT_EQ(kv.match_prefix(again, t, 16, &wait), 12);
  EXPECT_FALSE(wait);
  EXPECT_EQ(backend.ins, 3);
  EXPECT_TRUE(kv.reserve(again, 13));
}

// With one slot, the eviction that loading a block causes takes that very slot: a miss, not
// the evicted block's bytes.
TEST(KvCacheHostTier, ASingleSlotTierNeverReadsASlotItJustReused) {
  auto backend = kernels::make_backend("cpu");
  KvCache kv(*backend, kLayout);
  kv.attach_host_tier(static_cast<int64_t>(kv.host_slot_bytes()));
  const std::vector<int32_t> t = tier_prompt(5, 100);  // one full block
  SeqId s = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(s, 5));
  kv.register_blocks(s, t, 5);
  kv.remove_sequence(s);
  take_every_block(kv);
  ASSERT_EQ(kv.host_tier_stats().slots_used, 1);  // t's block
  // Every pool block cached with another prompt: loading t's block evicts one into the slot.
  const std::vector<int32_t> other = tier_prompt(17, 900);
  s = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(s, 16));
  kv.register_blocks(s, other, 16);
  kv.remove_sequence(s);
  s = kv.add_sequence();
  EXPECT_EQ(kv.match_prefix(s, t), 0);
  EXPECT_EQ(kv.host_tier_stats().swapped_in_blocks, 0u);
  kv.remove_sequence(s);
  EXPECT_EQ(kv.pool().num_free(), kLayout.num_blocks);
}

// A tensor-parallel replica added after the tier (at the first forward): each slot then holds
// both ranks' heads, within the same bytes, and both come back.
TEST(KvCacheHostTier, AReplicaAddedLaterTravelsInTheSameSlots) {
  auto backend = kernels::make_backend("cpu"), rank1 = kernels::make_backend("cpu");
  KvCache kv(*backend, kLayout);
  const int64_t one_rank_slot = static_cast<int64_t>(kv.host_slot_bytes());
  kv.attach_host_tier(8 * one_rank_slot);
  kv.add_replica(*rank1);
  EXPECT_EQ(kv.host_slot_bytes(), 2 * static_cast<size_t>(one_rank_slot));
  EXPECT_EQ(kv.host_tier_stats().slots, 4);
  const std::vector<int32_t> t = tier_prompt(13, 100);
  const SeqId s = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(s, 13));
  std::vector<std::vector<std::byte>> payloads;
  for (int b = 0; b < 3; ++b) {
    fill_block(*backend, kv, kv.block_table(s)[b], b + 1);
    payloads.push_back(kv.block_payload(kv.block_table(s)[b]));  // both storages' bytes
  }
  kv.register_blocks(s, t, 13);
  kv.remove_sequence(s);
  take_every_block(kv);
  const SeqId r = kv.add_sequence();
  EXPECT_EQ(kv.match_prefix(r, t), 12);
  for (int b = 0; b < 3; ++b) EXPECT_EQ(kv.block_payload(kv.block_table(r)[b]), payloads[b]) << "block " << b;
}

TEST(KvCacheHostTier, RefusesAByteBoundBelowOneBlockAndASplitLayout) {
  auto backend = kernels::make_backend("cpu");
  KvCache kv(*backend, kLayout);
  EXPECT_THROW(kv.attach_host_tier(static_cast<int64_t>(kv.host_slot_bytes()) - 1), Error);
  KvLayout sliding = kLayout;
  sliding.layer_window = {8, 0};
  sliding.num_sliding_blocks = 4;
  KvCache split(*backend, sliding);
  EXPECT_THROW(split.attach_host_tier(int64_t{1} << 20), Error);
}

TEST(KvCacheHostTier, AHybridModelsSnapshotTravelsWithItsBlock) {
  auto backend = kernels::make_backend("cpu");
  const KvLayout layout = hybrid_snapshot_layout();
  const std::vector<int32_t> t = tier_prompt(9, 100);
  KvCache kv(*backend, layout);
  kv.attach_host_tier(8 * static_cast<int64_t>(kv.host_slot_bytes()));
  const SeqId s = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(s, 8));
  const std::vector<float> expected = write_hybrid_snapshots(*backend, kv, s);
  kv.register_blocks(s, t, 8);
  kv.remove_sequence(s);
  take_every_block(kv);  // the snapshot blocks' slots are recycled by the new owner...
  EXPECT_EQ(kv.host_tier_stats().swapped_out_blocks, 2u);
  const SeqId r = kv.add_sequence();
  EXPECT_EQ(kv.match_prefix(r, t), 8);  // ... but the snapshots came back with the blocks
  EXPECT_EQ(kv.resume_position(r, 8), 8);
  EXPECT_EQ(read_resumed_snapshot(*backend, kv, r), expected);
}

}  // namespace
}  // namespace tachyon::kv
