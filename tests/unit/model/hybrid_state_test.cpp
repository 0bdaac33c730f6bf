// Hybrid models (Qwen3-Next: Gated DeltaNet + attention) keep a recurrent state per sequence
// beside the paged KV, snapshotted at every block boundary. These tests prove that automatic
// prefix caching and speculative rollback really work on them: a prefix-cache hit or a
// rollback followed by recomputation gives bit-identical logits to computing from scratch.
// From scratch means with the same forward boundaries where those cut a 16-row chunk: whole
// chunks of a forward take the delta rule's chunked prefill form (kernels/ops.h,
// RecurrentMeta::resume_align), so a boundary inside a chunk (a decode step, a rollback point)
// changes the bits, within float tolerance, and that is checked too.
// Every case runs on the CPU and, when a GPU is visible, on the CUDA backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "model/model.h"

namespace tachyon::model {
namespace {

const std::string kFixture = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/hf/qwen3_next";

class HybridState : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cuda" && kernels::default_device() != "cuda") GTEST_SKIP() << "no CUDA device visible";
    backend_ = kernels::make_backend(GetParam());
    model_ = load_model(kFixture, *backend_);
    kv::KvLayout layout = model_->kv_layout(64);
    ASSERT_GT(layout.num_state_layers, 0);
    ASSERT_GE(layout.state_snapshot_interval, 1);
    layout.state_snapshot_interval = 1;  // a resume point at every block (the default saves memory)
    make_cache(layout);
    const auto golden = io::Checkpoint::open_file(kFixture + "/golden.safetensors");
    const auto& t = golden.get("input_ids_2");
    const auto* ids = static_cast<const int64_t*>(t.data);
    for (int64_t i = 0; i < t.num_elements(); ++i) ids_.push_back(static_cast<int32_t>(ids[i]));
  }

  void make_cache(const kv::KvLayout& layout) {
    kv_.reset();
    kv_ = std::make_unique<kv::KvCache>(*backend_, layout);
  }
  // Forwards tokens[begin, end) of `seq` (KV reserved here); returns every row's logits.
  std::vector<float> run(kv::SeqId seq, const std::vector<int32_t>& tokens, int32_t begin, int32_t end) {
    EXPECT_TRUE(kv_->reserve(seq, end));
    Batch batch;
    batch.add(seq, std::span<const int32_t>(tokens.data() + begin, static_cast<size_t>(end - begin)), begin,
              LogitRows::All);
    return model_->forward(batch, *kv_).logits;
  }
  // Logits of rows [from, tokens.size()) computed from scratch in a fresh sequence, by
  // forwards that end at each of `cuts` (none: one forward).
  std::vector<float> from_scratch(const std::vector<int32_t>& tokens, int32_t from, std::vector<int32_t> cuts = {}) {
    const auto seq = kv_->add_sequence();
    cuts.push_back(static_cast<int32_t>(tokens.size()));
    std::vector<float> all;
    int32_t begin = 0;
    for (int32_t end : cuts) {
      const auto part = run(seq, tokens, begin, end);
      all.insert(all.end(), part.begin(), part.end());
      begin = end;
    }
    kv_->remove_sequence(seq);
    const size_t v = static_cast<size_t>(model_->config().vocab_size);
    return {all.begin() + static_cast<long>(from * v), all.end()};
  }
  // Logits computed with other forward boundaries: equal within float tolerance, same argmax.
  void expect_close(const std::vector<float>& got, const std::vector<float>& want) {
    ASSERT_EQ(got.size(), want.size());
    const size_t v = static_cast<size_t>(model_->config().vocab_size);
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < got.size(); ++i)
      diff = std::max(diff, std::fabs(double(got[i]) - want[i])), scale = std::max(scale, std::fabs(double(want[i])));
    EXPECT_LT(diff / scale, 1e-4);
    for (size_t r = 0; r < got.size() / v; ++r)
      EXPECT_EQ(std::max_element(got.begin() + r * v, got.begin() + (r + 1) * v) - got.begin(),
                std::max_element(want.begin() + r * v, want.begin() + (r + 1) * v) - want.begin())
          << "row " << r;
  }

  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<kv::KvCache> kv_;
  std::vector<int32_t> ids_;  // 70 tokens
};

TEST_P(HybridState, PrefixCacheHitRestoresTheRecurrentStateBitExactly) {
  const int32_t bs = kv_->layout().block_size;
  // Request A computes all 70 tokens and publishes its full blocks.
  const auto a = kv_->add_sequence();
  ASSERT_EQ(kv_->match_prefix(a, ids_), 0);
  run(a, ids_, 0, static_cast<int32_t>(ids_.size()));
  kv_->register_blocks(a, ids_, static_cast<int32_t>(ids_.size()));
  // Request B shares A's first 3 blocks, then diverges.
  std::vector<int32_t> b(ids_.begin(), ids_.begin() + 3 * bs + 5);
  for (int i = 0; i < 9; ++i) b.push_back((b[i] * 7 + 11) % 512);
  const auto seq_b = kv_->add_sequence();
  const int32_t hit = kv_->match_prefix(seq_b, b);
  ASSERT_EQ(hit, 3 * bs) << "prefix caching silently off on a hybrid model";
  EXPECT_EQ(kv_->block_table(seq_b)[0], kv_->block_table(a)[0]);  // shared, not copied
  const auto cached = run(seq_b, b, hit, static_cast<int32_t>(b.size()));
  const auto fresh = from_scratch(b, hit);
  ASSERT_EQ(cached.size(), fresh.size());
  EXPECT_EQ(0, std::memcmp(cached.data(), fresh.data(), fresh.size() * sizeof(float)));
  kv_->remove_sequence(seq_b);
  kv_->remove_sequence(a);
}

TEST_P(HybridState, DecodeStepsTakeTheBlockSnapshotsToo) {
  const int32_t bs = kv_->layout().block_size;
  const auto a = kv_->add_sequence();
  run(a, ids_, 0, 10);
  for (int32_t p = 10; p < 2 * bs + 8; ++p) run(a, ids_, p, p + 1);  // one token per forward
  const std::vector<int32_t> prefix(ids_.begin(), ids_.begin() + 2 * bs + 8);
  kv_->register_blocks(a, prefix, 2 * bs + 8);
  const auto b = kv_->add_sequence();
  ASSERT_EQ(kv_->match_prefix(b, prefix), 2 * bs);
  const auto cached = run(b, prefix, 2 * bs, 2 * bs + 8);
  std::vector<int32_t> cuts;  // a's forwards up to the snapshot: [0, 10), then one token each
  for (int32_t p = 10; p <= 2 * bs; ++p) cuts.push_back(p);
  const auto fresh = from_scratch(prefix, 2 * bs, cuts);
  EXPECT_EQ(0, std::memcmp(cached.data(), fresh.data(), fresh.size() * sizeof(float)));
  expect_close(cached, from_scratch(prefix, 2 * bs));  // one prefill: chunks [0, 16), [16, 32) chunked
  kv_->remove_sequence(b);
  kv_->remove_sequence(a);
}

TEST_P(HybridState, MatchStopsAtTheLastBlockWithAStateSnapshot) {
  const int32_t bs = kv_->layout().block_size;
  const auto a = kv_->add_sequence();
  run(a, ids_, 0, 2 * bs);
  kv_->register_blocks(a, ids_, 2 * bs);
  kv_->truncate(a, bs + 3);  // block 1 keeps its hash but its state snapshot is void
  const auto b = kv_->add_sequence();
  EXPECT_EQ(kv_->match_prefix(b, ids_), bs);
  const auto logits = run(b, ids_, bs, 3 * bs);
  const auto fresh = from_scratch(std::vector<int32_t>(ids_.begin(), ids_.begin() + 3 * bs), bs);
  ASSERT_EQ(logits.size(), fresh.size());
  EXPECT_EQ(0, std::memcmp(logits.data(), fresh.data(), fresh.size() * sizeof(float)));
  kv_->remove_sequence(a);
  kv_->remove_sequence(b);
}

TEST_P(HybridState, RollbackBeyondTheRingResumesFromTheLastBlockSnapshot) {
  const int32_t bs = kv_->layout().block_size, ring = kv_->layout().state_rollback_rows;
  const auto seq = kv_->add_sequence();
  run(seq, ids_, 0, 40);
  run(seq, ids_, 40, 42 + ring);  // the ring keeps the states after [42, 42 + ring) only
  kv_->truncate(seq, 42);         // needs the state after position 41
  // Continuing at 42 must be refused, not silently wrong. The cache says where to recompute from.
  EXPECT_THROW(run(seq, ids_, 42, 43), Error);
  const int32_t resume = kv_->resume_position(seq, 42);
  EXPECT_EQ(resume, 2 * bs);
  run(seq, ids_, resume, 42);  // recompute the accepted tail from the block snapshot
  const auto continued = run(seq, ids_, 42, 50);
  const std::vector<int32_t> tokens(ids_.begin(), ids_.begin() + 50);
  const auto fresh = from_scratch(tokens, 42, {resume, 42});
  ASSERT_EQ(continued.size(), fresh.size());
  EXPECT_EQ(0, std::memcmp(continued.data(), fresh.data(), fresh.size() * sizeof(float)));
  expect_close(continued, from_scratch(tokens, 42));
  kv_->remove_sequence(seq);
  EXPECT_EQ(kv_->pool().num_free(), kv_->pool().num_blocks());
}

// A draft model's pattern: one token per forward, then the rejected ones are dropped.
TEST_P(HybridState, RollingBackSingleTokenForwardsIsExact) {
  const auto seq = kv_->add_sequence();
  run(seq, ids_, 0, 30);
  for (int32_t p = 30; p < 35; ++p) run(seq, ids_, p, p + 1);
  kv_->truncate(seq, 31);
  EXPECT_EQ(kv_->resume_position(seq, 31), 31);
  const auto continued = run(seq, ids_, 31, 40);
  const std::vector<int32_t> tokens(ids_.begin(), ids_.begin() + 40);
  const auto fresh = from_scratch(tokens, 31, {30, 31});
  EXPECT_EQ(0, std::memcmp(continued.data(), fresh.data(), fresh.size() * sizeof(float)));
  expect_close(continued, from_scratch(tokens, 31));
  kv_->remove_sequence(seq);
}

// Speculative verification: the ring keeps the state after each verified row, so rejecting
// drafts is exact with no recomputation, and a block completed inside the verified rows still
// gets its snapshot (copied from the ring at commit).
TEST_P(HybridState, RejectingDraftsInsideTheVerifiedRowsIsExactWithoutRecomputation) {
  const int32_t bs = kv_->layout().block_size;
  ASSERT_GE(kv_->layout().state_rollback_rows, 5);  // the default covers speculation depth 4
  const auto seq = kv_->add_sequence();
  run(seq, ids_, 0, 2 * bs + 14);            // positions [0, 46)
  run(seq, ids_, 2 * bs + 14, 2 * bs + 19);  // verify [46, 51): completes block 2 at 47
  kv_->truncate(seq, 2 * bs + 17);           // accept up to 49
  EXPECT_EQ(kv_->resume_position(seq, 2 * bs + 17), 2 * bs + 17);
  const auto continued = run(seq, ids_, 2 * bs + 17, 60);
  const std::vector<int32_t> prefix(ids_.begin(), ids_.begin() + 60);
  const auto fresh = from_scratch(prefix, 2 * bs + 17, {2 * bs + 14, 2 * bs + 17});
  ASSERT_EQ(continued.size(), fresh.size());
  EXPECT_EQ(0, std::memcmp(continued.data(), fresh.data(), fresh.size() * sizeof(float)));
  expect_close(continued, from_scratch(prefix, 2 * bs + 17));
  // Block 2's snapshot came from the verified rows: a prefix hit resumes from it exactly.
  kv_->register_blocks(seq, prefix, 60);
  const auto other = kv_->add_sequence();
  ASSERT_EQ(kv_->match_prefix(other, prefix), 3 * bs);
  const auto cached = run(other, prefix, 3 * bs, 60);
  const auto fresh2 = from_scratch(prefix, 3 * bs, {2 * bs + 14, 3 * bs});
  EXPECT_EQ(0, std::memcmp(cached.data(), fresh2.data(), fresh2.size() * sizeof(float)));
  expect_close(cached, from_scratch(prefix, 3 * bs));
  kv_->remove_sequence(other);
  kv_->remove_sequence(seq);
}

TEST_P(HybridState, RollbackToABlockBoundaryNeedsNoRecomputation) {
  const int32_t bs = kv_->layout().block_size;
  const auto seq = kv_->add_sequence();
  run(seq, ids_, 0, bs + 3);
  kv_->truncate(seq, bs);
  EXPECT_EQ(kv_->resume_position(seq, bs), bs);
  const auto continued = run(seq, ids_, bs, bs + 10);
  const auto fresh = from_scratch(std::vector<int32_t>(ids_.begin(), ids_.begin() + bs + 10), bs);
  EXPECT_EQ(0, std::memcmp(continued.data(), fresh.data(), fresh.size() * sizeof(float)));
  kv_->remove_sequence(seq);
}

// With a snapshot every 2nd block and a single snapshot slot, resume points thin out and are
// recycled oldest-first; whatever is left is still exact, and a recycled one is not offered.
TEST_P(HybridState, SnapshotIntervalAndRecyclingOnlyThinOutResumePoints) {
  kv::KvLayout layout = model_->kv_layout(64);
  layout.state_snapshot_interval = 2;
  layout.num_state_snapshots = 1;
  make_cache(layout);
  const int32_t bs = layout.block_size;
  const int32_t n = static_cast<int32_t>(ids_.size());  // 70: blocks 0-3 full
  const auto a = kv_->add_sequence();
  run(a, ids_, 0, n);  // claims blocks 1 and 3: one slot, so only block 1 gets it
  kv_->register_blocks(a, ids_, n);
  EXPECT_EQ(kv_->resume_position(a, 3 * bs), 2 * bs);
  const auto b = kv_->add_sequence();
  ASSERT_EQ(kv_->match_prefix(b, ids_), 2 * bs);
  const auto cached = run(b, ids_, 2 * bs, n);
  EXPECT_EQ(0, std::memcmp(cached.data(), from_scratch(ids_, 2 * bs).data(), cached.size() * sizeof(float)));
  // b's forward completed its block 3 and took the only slot: a's snapshot is gone.
  kv_->remove_sequence(b);
  const auto c = kv_->add_sequence();
  EXPECT_EQ(kv_->match_prefix(c, ids_), 0);
  kv_->remove_sequence(c);
  kv_->remove_sequence(a);
}

INSTANTIATE_TEST_SUITE_P(Devices, HybridState, ::testing::Values("cpu", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tachyon::model
