// Sliding-window models (tiny Gemma 3 and gpt-oss checkpoints, window 8) through the engine with
// their sliding layers' blocks released once they left the window (EngineConfig::
// release_sliding_blocks), against the cache that keeps every block: the same greedy tokens with
// continuous batching, chunked prefill, prefix-cache hits, speculative rollback and preemption in
// a tiny pool, over contexts many windows long; the sliding blocks in use stay bounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>

#include "engine/engine.h"
#include "engine/kv_sizing.h"
#include "engine_test_helpers.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "spec/ngram.h"

namespace tachyon::engine {
namespace {

using test_helpers::collect;
using test_helpers::idle_stats;

constexpr int32_t kBlockSize = 4, kWindow = 8, kConcurrent = 4, kStep = 24, kMaxTokens = 48;  // the longest prompt (75) and 48 fit gpt-oss's 128

struct Outcome {
  std::vector<int32_t> tokens;
  int32_t cached = 0;
};

class SlidingEngine : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string dir = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/hf/" + GetParam();
    model_ = model::load_model(dir, *backend_);
    const kv::KvLayout layout = model_->kv_layout(1, kBlockSize);
    ASSERT_EQ(layout.max_window(), kWindow);
    ASSERT_GT(layout.num_sliding_layers(), 0);
    ASSERT_LT(layout.num_sliding_layers(), layout.num_layers);
    std::mt19937 rng(5);
    std::vector<int32_t> shared(40);  // a 40-token prefix (5 windows) shared by every prompt
    for (auto& t : shared) t = static_cast<int32_t>(rng() % 512);
    for (int i = 0; i < 6; ++i) {
      std::vector<int32_t> prompt = shared;
      for (int j = 0; j < 3 + 4 * i; ++j) prompt.push_back(static_cast<int32_t>(rng() % 512));
      if (i % 2) {  // repetitive tails: prompt lookup drafts (and has some rejected)
        const std::vector<int32_t> again(prompt.end() - 12, prompt.end());
        prompt.insert(prompt.end(), again.begin(), again.end());
      }
      prompts_.push_back(prompt);
    }
  }

  // Every prompt greedy to kMaxTokens; waves of requests, so the later ones find the shared
  // prefix cached.
  std::vector<Outcome> run(EngineConfig config, EngineStats* stats = nullptr) {
    config.block_size = kBlockSize;
    Engine engine(*model_, config);
    std::vector<Outcome> outs(prompts_.size());
    for (size_t wave = 0; wave < prompts_.size(); wave += 3) {
      std::vector<std::shared_ptr<RequestStream>> streams;
      for (size_t i = wave; i < std::min(prompts_.size(), wave + 3); ++i) {
        GenerationRequest r;
        r.prompt = prompts_[i];
        r.max_tokens = kMaxTokens;
        r.sampling.temperature = 0;
        streams.push_back(engine.submit(r));
      }
      for (size_t i = wave; i < wave + streams.size(); ++i) {
        RequestOutput last;
        outs[i].tokens = collect(*streams[i - wave], &last);
        EXPECT_NE(last.finish, FinishReason::Error) << last.error;
        outs[i].cached = last.num_cached_prompt_tokens;
      }
    }
    const EngineStats st = idle_stats(engine);
    EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total) << "leaked KV blocks";
    if (stats) *stats = st;
    return outs;
  }

  std::unique_ptr<kernels::Backend> backend_ = kernels::make_backend("cpu");
  std::unique_ptr<model::Model> model_;
  std::vector<std::vector<int32_t>> prompts_;
};

TEST_P(SlidingEngine, ReleasedBlocksGiveTheTokensOfTheUnboundedCache) {
  const auto unbounded =
      run({.max_concurrent = 1, .num_blocks = 256, .release_sliding_blocks = false, .prefix_cache = false});
  EngineStats stats;
  const auto released = run({.max_concurrent = kConcurrent, .max_tokens_per_step = kStep, .num_blocks = 256}, &stats);
  int32_t cached = 0;
  for (size_t i = 0; i < prompts_.size(); ++i) {
    EXPECT_EQ(released[i].tokens, unbounded[i].tokens) << "prompt " << i;
    EXPECT_EQ(released[i].tokens.size(), static_cast<size_t>(kMaxTokens));
    cached += released[i].cached;
  }
  EXPECT_GT(cached, 0) << "no prefix hit on a sliding-window model";
  // The sliding layers held at most the windows of the running requests and one step's chunks,
  // far below the 4 × (91..123)-token contexts that the full layers hold.
  EXPECT_EQ(stats.kv_sliding_blocks_total, sliding_pool_blocks(kWindow, kBlockSize, kConcurrent, kStep));
  const int32_t bound = kConcurrent * ((kWindow - 1 + kBlockSize - 1) / kBlockSize + 3) + kStep / kBlockSize;
  EXPECT_GT(stats.kv_sliding_blocks_peak, 0);
  EXPECT_LE(stats.kv_sliding_blocks_peak, bound);
}

TEST_P(SlidingEngine, PromptLookupRollbacksAndPreemptionInATinyPoolKeepTheTokens) {
  const auto unbounded =
      run({.max_concurrent = 1, .num_blocks = 256, .release_sliding_blocks = false, .prefix_cache = false});
  // Speculation: drafts verified in multi-row steps, the rejected ones rolled back.
  auto drafter = spec::make_ngram_drafter({});
  EngineConfig spec_config{.max_concurrent = kConcurrent, .max_tokens_per_step = kStep, .num_blocks = 256};
  spec_config.drafter = drafter.get();
  spec_config.gates = false;
  spec_config.auto_k = false;
  EngineStats spec_stats;
  const auto speculated = run(spec_config, &spec_stats);
  EXPECT_GT(spec_stats.spec_accepted_tokens, 0u);
  EXPECT_GT(spec_stats.spec_drafted_tokens, spec_stats.spec_accepted_tokens) << "no rejection: rollback not exercised";
  // A pool of 40 blocks (160 tokens: one request's whole context and a little) for 4 at a time.
  EngineStats stats;
  const auto tiny = run({.max_concurrent = kConcurrent, .max_tokens_per_step = kStep, .num_blocks = 40}, &stats);
  for (size_t i = 0; i < prompts_.size(); ++i) {
    EXPECT_EQ(speculated[i].tokens, unbounded[i].tokens) << "prompt " << i;
    EXPECT_EQ(tiny[i].tokens, unbounded[i].tokens) << "prompt " << i;
  }
  EXPECT_GT(stats.preemptions, 0u) << "the tiny pool never preempted";
}

// A KV budget is shared by the full layers and the sliding layers' pool; on the host the full
// layers are capped at the running requests' full contexts, as every layer was before.
TEST_P(SlidingEngine, AKvBudgetIsSharedByBothGroups) {
  const int32_t sliding = sliding_pool_blocks(kWindow, kBlockSize, kConcurrent, kStep);
  {
    Engine engine(*model_, {.max_concurrent = kConcurrent, .max_tokens_per_step = kStep, .block_size = kBlockSize,
                            .kv_memory_bytes = int64_t{1} << 20});
    const KvPoolSize& pool = engine.kv_pool();
    EXPECT_EQ(pool.num_sliding_blocks, sliding) << pool.why;
    EXPECT_LE(pool.bytes, int64_t{1} << 20) << pool.why;
    EXPECT_NE(pool.why.find("sliding-window layers"), std::string::npos) << pool.why;
    const kv::KvLayout layout = with_sliding_pool(model_->kv_layout(1, kBlockSize), {}, 1 << 20);
    kv::KvLayout whole = layout;
    whole.num_sliding_blocks = 0;
    // More tokens than the same bytes hold with every layer in every block.
    EXPECT_GT(pool.num_blocks, (int64_t{1} << 20) / static_cast<int64_t>(whole.bytes_per_block()));
  }
  Engine host(*model_, {.max_concurrent = kConcurrent, .max_tokens_per_step = kStep, .block_size = kBlockSize});
  const int32_t context = static_cast<int32_t>(model_->config().max_position_embeddings);
  EXPECT_EQ(host.kv_pool().num_blocks, kConcurrent * context / kBlockSize) << host.kv_pool().why;
  EXPECT_EQ(host.kv_pool().num_sliding_blocks, sliding);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SlidingEngine, ::testing::Values("gemma3_text", "gpt_oss"));

}  // namespace
}  // namespace tachyon::engine
