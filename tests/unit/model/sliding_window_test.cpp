// Sliding-window layers reading a block group of their own (kv::KvLayout::splits_sliding), whose
// blocks are released once they left the window: every step's logits are the bits of the cache
// that keeps every block, over a context many windows long, while the sliding blocks held stay at
// what one window needs. A row that would reach back into a released block is refused.
// Tiny Gemma 3 (5:1 pattern in small) and gpt-oss (alternating) checkpoints, window 8; on the CPU
// and, when a GPU is visible, on the CUDA backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <tuple>

#include "base/error.h"
#include "kernels/backend.h"
#include "model/model.h"

namespace tachyon::model {
namespace {

constexpr int32_t kBlockSize = 4;

class SlidingWindow : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    const auto& [fixture, device] = GetParam();
    if (device == "cuda" && kernels::default_device() != "cuda") GTEST_SKIP() << "no CUDA device visible";
    backend_ = kernels::make_backend(device);
    model_ = load_model(std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/hf/" + fixture, *backend_);
  }
  // Forwards tokens[begin, end) of `seq`, the rows from `begin` on; every row's logits.
  std::vector<float> run(kv::KvCache& kv, kv::SeqId seq, const std::vector<int32_t>& tokens, int32_t begin,
                         int32_t end) {
    EXPECT_TRUE(kv.reserve(seq, end, begin));
    Batch batch;
    batch.add(seq, std::span<const int32_t>(tokens.data() + begin, static_cast<size_t>(end - begin)), begin,
              LogitRows::All);
    return model_->forward(batch, kv).logits;
  }
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<Model> model_;
};

TEST_P(SlidingWindow, ReleasedBlocksGiveTheBitsOfTheUnboundedCache) {
  const kv::KvLayout unbounded_layout = model_->kv_layout(64, kBlockSize);
  ASSERT_EQ(unbounded_layout.max_window(), 8);
  ASSERT_FALSE(unbounded_layout.splits_sliding()) << "a model's layout keeps every block unless asked";
  kv::KvLayout split_layout = unbounded_layout;
  split_layout.num_sliding_blocks = 6;  // two windows' worth: 200 positions need 50 blocks unbounded
  kv::KvCache unbounded(*backend_, unbounded_layout), split(*backend_, split_layout);
  ASSERT_TRUE(split.layout().splits_sliding());
  const kv::SeqId a = unbounded.add_sequence(), b = split.add_sequence();
  std::mt19937 rng(11);
  std::vector<int32_t> tokens(21);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % 512);
  const size_t v = static_cast<size_t>(model_->config().vocab_size);
  // The prompt in chunks of 7 (multi-row forwards reaching back into the chunk before), then
  // greedy decoding to 120 positions (15 windows).
  std::vector<float> want;
  for (int32_t begin = 0; begin < 21; begin += 7) {
    want = run(unbounded, a, tokens, begin, begin + 7);
    const auto got = run(split, b, tokens, begin, begin + 7);
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << "prompt chunk at " << begin;
  }
  tokens.push_back(static_cast<int32_t>(std::max_element(want.end() - static_cast<long>(v), want.end()) -
                                        (want.end() - static_cast<long>(v))));
  int32_t peak = 0;
  for (int32_t pos = 21; pos < 120; ++pos) {
    want = run(unbounded, a, tokens, pos, pos + 1);
    const auto got = run(split, b, tokens, pos, pos + 1);
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), v * sizeof(float))) << "decode step at " << pos;
    tokens.push_back(static_cast<int32_t>(std::max_element(want.begin(), want.end()) - want.begin()));
    peak = std::max(peak, split.num_sliding_blocks_in_use());
  }
  EXPECT_EQ(peak, split_layout.sliding_blocks_per_sequence(1));  // 3: keys q − 7 .. q over at most 3 blocks
  EXPECT_EQ(split.block_table(b).size(), unbounded.block_table(a).size());  // the full layers keep all 120
  EXPECT_EQ(split.first_sliding_position(b), 112);                        // the last row read keys 112..119
  // Going back behind the released blocks is refused, not read.
  Batch back;
  back.add(b, std::span<const int32_t>(tokens.data() + 100, 1), 100, LogitRows::Last);
  EXPECT_THROW(model_->forward(back, split), Error);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SlidingWindow,
                         ::testing::Combine(::testing::Values("gemma3_text", "gpt_oss"),
                                            ::testing::Values("cpu", "cuda")),
                         [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

}  // namespace
}  // namespace tachyon::model
