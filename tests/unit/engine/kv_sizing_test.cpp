// The KV pool's sizing rules on counts: explicit blocks and bytes, a share of the host capped
// at full use, and a GPU's utilization after what the weights and workspaces took.
#include "engine/kv_sizing.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace tachyon::engine {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;

// Qwen3-8B's shape in f32: 36 layers x 8 KV heads x 128 x (K, V) x 4 bytes = 288 KiB a token.
KvDemand qwen3_8b(int32_t max_concurrent = 16) {
  return {.bytes_per_block = 36 * 8 * 128 * 2 * 4 * 16, .block_size = 16, .max_context = 40960,
          .max_concurrent = max_concurrent};
}

TEST(KvSizing, ExplicitBlocksAndBytes) {
  EXPECT_EQ(kv_pool_from_blocks(100, qwen3_8b()).num_blocks, 100);
  const KvPoolSize one_gib = kv_pool_from_bytes(kGiB, qwen3_8b());
  EXPECT_EQ(one_gib.num_blocks, kGiB / qwen3_8b().bytes_per_block);  // 227 blocks: the ~3.6k tokens of old
  EXPECT_EQ(one_gib.bytes, one_gib.num_blocks * qwen3_8b().bytes_per_block);
  EXPECT_THROW(kv_pool_from_bytes(1000, qwen3_8b()), Error);  // not one block
}

TEST(KvSizing, HostTakesItsShareOfAvailableMemory) {
  const KvDemand d = qwen3_8b();
  const KvPoolSize s = kv_pool_on_host(64 * kGiB, d);
  EXPECT_EQ(s.num_blocks, static_cast<int64_t>(64 * kGiB * kHostKvShare) / d.bytes_per_block);
  EXPECT_LE(s.bytes, static_cast<int64_t>(64 * kGiB * kHostKvShare));
  EXPECT_NE(s.why.find("available"), std::string::npos) << s.why;
}

TEST(KvSizing, HostPoolIsCappedAtWhatFullUseNeeds) {
  // A small model: 2 layers x 2 heads x 64 x 2 x 4 bytes = 2 KiB a token, 4k context, 4 at once.
  const KvDemand d{.bytes_per_block = 2048 * 16, .block_size = 16, .max_context = 4096, .max_concurrent = 4};
  const KvPoolSize s = kv_pool_on_host(64 * kGiB, d);
  EXPECT_EQ(s.num_blocks, 4 * 4096 / 16);
  EXPECT_EQ(s.bytes, 32 * kMiB);
  // A context that is not a whole number of blocks rounds up per sequence.
  EXPECT_EQ(kv_pool_on_host(64 * kGiB, {.bytes_per_block = 1024, .block_size = 16, .max_context = 17,
                                        .max_concurrent = 3})
                .num_blocks,
            6);
}

TEST(KvSizing, HostWithoutRoomStillGetsOneBlock) {
  EXPECT_EQ(kv_pool_on_host(0, qwen3_8b()).num_blocks, 1);
}

TEST(KvSizing, DeviceUtilizationLessWhatIsInUse) {
  const KvDemand d = qwen3_8b();
  // An 80 GiB GPU with 17 GiB in use after the weights and a warm-up step: 0.9 x 80 - 17 = 55 GiB.
  const KvPoolSize s = kv_pool_on_device(63 * kGiB, 80 * kGiB, 0.9, d);
  EXPECT_EQ(s.num_blocks, static_cast<int64_t>(0.9 * 80 * kGiB - 17 * kGiB) / d.bytes_per_block);
  // Not capped at full use: a tiny model's spare device memory still becomes blocks (prefix cache).
  const KvDemand tiny{.bytes_per_block = 1024, .block_size = 16, .max_context = 64, .max_concurrent = 1};
  EXPECT_EQ(kv_pool_on_device(79 * kGiB, 80 * kGiB, 0.5, tiny).num_blocks, 39 * kGiB / 1024);
}

TEST(KvSizing, DeviceRefusesAUtilizationBelowWhatIsInUse) {
  try {
    kv_pool_on_device(10 * kGiB, 80 * kGiB, 0.5, qwen3_8b());  // 70 GiB in use > 40 GiB allowed
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--gpu-memory-utilization"), std::string::npos) << e.what();
  }
  EXPECT_THROW(kv_pool_on_device(70 * kGiB, 80 * kGiB, 0, qwen3_8b()), Error);
  EXPECT_THROW(kv_pool_on_device(70 * kGiB, 80 * kGiB, 1.5, qwen3_8b()), Error);
}

// The sliding-window layers' own pool: a fixed count from the window and the scheduler's limits,
// whatever the context, enough for one request's biggest step alone.
TEST(KvSizing, SlidingPoolFollowsTheWindowNotTheContext) {
  // Gemma 3: window 1024, blocks of 16, 16 requests, 512-token steps: 16 × 67 + 32, and a quarter.
  EXPECT_EQ(sliding_pool_blocks(1024, 16, 16, 512), 1104 + 1104 / 4);
  // gpt-oss: window 128.
  EXPECT_EQ(sliding_pool_blocks(128, 16, 16, 512), 208 + 208 / 4);
  for (int32_t window : {1, 7, 8, 9, 128, 4096})
    for (int32_t step : {1, 16, 100, 512})
      EXPECT_GE(sliding_pool_blocks(window, 16, 1, step), (window - 1 + step + 15) / 16 + 1) << window << " " << step;
  EXPECT_THROW(sliding_pool_blocks(0, 16, 16, 512), Error);
}

// A budget sized for every layer in every block, split: the sliding pool by its rule while that
// is at most half of the bytes, else half (never below one request's step); the full layers the rest.
TEST(KvSizing, SplitGivesTheFullLayersWhatTheSlidingPoolLeaves) {
  // Gemma-3-27B in bf16: every layer 496 KiB a block; the 10 full layers 80 KiB, the 52 sliding 416 KiB.
  const int64_t whole = 62 * 8192 * 16, full = 10 * 8192 * 16, sliding = 52 * 8192 * 16;
  const KvPoolSize big = kv_pool_from_bytes(64 * kGiB, {.bytes_per_block = whole, .block_size = 16});
  const KvPoolSize split = split_kv_pool(big, whole, full, sliding, 1380, 66, 0);
  EXPECT_EQ(split.num_sliding_blocks, 1380);
  EXPECT_EQ(split.num_blocks, (big.num_blocks * whole - 1380 * sliding) / full);
  EXPECT_GT(split.num_blocks, 5 * big.num_blocks) << "the longest context grows ~5x";
  EXPECT_LE(split.bytes, 64 * kGiB);
  const KvPoolSize small = kv_pool_from_bytes(4 * kGiB, {.bytes_per_block = whole, .block_size = 16});
  const KvPoolSize small_split = split_kv_pool(small, whole, full, sliding, 1380, 66, 0);
  EXPECT_EQ(small_split.num_sliding_blocks, small.num_blocks * whole / 2 / sliding);  // half of the bytes
  EXPECT_GE(small_split.num_sliding_blocks, 66);
  EXPECT_LE(small_split.bytes, 4 * kGiB);
  EXPECT_EQ(split_kv_pool(small, whole, full, sliding, 1380, 66, 100).num_blocks, 100);  // the host's full-use cap
  const KvPoolSize tiny = kv_pool_from_bytes(100 * kMiB, {.bytes_per_block = whole, .block_size = 16});
  EXPECT_EQ(split_kv_pool(tiny, whole, full, sliding, 1380, 66, 0).num_sliding_blocks, 66);  // one step's, at least
}

// The swap space: given bytes as they are, 0 off; the default (-1) is the device pool's size on a
// GPU, bounded by kAutoSwapCap and a quarter of free host memory, and off on the CPU.
TEST(KvSizing, SwapSpaceIsAskedForOrThePoolsSizeOnAGpu) {
  for (bool device : {false, true}) {
    EXPECT_EQ(swap_space(3 * kGiB, device, kGiB, 64 * kGiB).bytes, 3 * kGiB);
    EXPECT_EQ(swap_space(0, device, kGiB, 64 * kGiB).bytes, 0);
  }
  EXPECT_EQ(swap_space(-1, false, kGiB, 64 * kGiB).bytes, 0);
  EXPECT_NE(swap_space(-1, false, kGiB, 64 * kGiB).why.find("CPU"), std::string::npos);
  EXPECT_EQ(swap_space(-1, true, kGiB, 64 * kGiB).bytes, kGiB);               // the pool's size
  EXPECT_EQ(swap_space(-1, true, 40 * kGiB, 64 * kGiB).bytes, kAutoSwapCap);  // capped
  EXPECT_EQ(swap_space(-1, true, 40 * kGiB, 8 * kGiB).bytes, 2 * kGiB);       // a quarter of the host's
  EXPECT_EQ(swap_space(-1, true, kGiB, 0).bytes, 0);
  EXPECT_NE(swap_space(-1, true, kGiB, 64 * kGiB).why.find("--swap-space"), std::string::npos);
}

}  // namespace
}  // namespace tachyon::engine
