// The response cache (src/server/response_cache.h) over a live engine, on the CPU and on a CUDA
// device (skipped without one; bench/cuda/run_cuda_tests.sh runs it there): what it keeps is
// what the engine delivered, chunk by chunk, and a hit replays exactly what the engine computes
// for the same request again — greedy, and sampled with a seed (the rule that lets them be
// cached) — while sampling without a seed is never cached. The cache is compiled into this
// binary (tests/unit/engine/CMakeLists.txt): the GPU machine builds without the server module.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_test_helpers.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "server/response_cache.h"

namespace tachyon::server {
namespace {

using engine::test_helpers::random_prompt;

class ResponseCacheEngine : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (std::string(GetParam()) == "cuda" && kernels::default_device() != "cuda")
      GTEST_SKIP() << "no CUDA device visible";
  }
};

// The engine's deliveries for `r`, as the server records them for the cache.
CachedResponse live(engine::Engine& engine, const engine::GenerationRequest& r) {
  CachedResponse out;
  auto stream = engine.submit(r);
  for (;;) {
    auto d = stream->next(std::chrono::seconds(120));
    EXPECT_TRUE(d.has_value()) << "timed out";
    if (!d) return out;
    out.deliveries.push_back(*d);
    if (d->finish != engine::FinishReason::None) return out;
  }
}

std::vector<int32_t> tokens_of(const CachedResponse& r) {
  std::vector<int32_t> t;
  for (const auto& d : r.deliveries) t.insert(t.end(), d.tokens.begin(), d.tokens.end());
  return t;
}

TEST_P(ResponseCacheEngine, A_hit_replays_what_the_engine_computes_again) {
  auto backend = kernels::make_backend(GetParam());
  const auto model = model::load_model(std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo", *backend);
  engine::Engine engine(*model, {.max_concurrent = 2, .num_blocks = 64, .prefix_cache = false});
  ResponseCache cache(int64_t{1} << 20);
  const uint64_t fingerprint = 0x49;

  engine::GenerationRequest greedy;
  greedy.prompt = random_prompt(40, 49);
  greedy.max_tokens = 16;
  greedy.sampling.temperature = 0.f;
  engine::GenerationRequest seeded = greedy;
  seeded.sampling.temperature = 0.9f;
  seeded.sampling.top_p = 0.95f;
  seeded.sampling.seed = 7;
  for (const engine::GenerationRequest& r : {greedy, seeded}) {
    const auto key = ResponseCache::key_of(fingerprint, r, {});
    ASSERT_TRUE(key.has_value());
    EXPECT_EQ(cache.find(*key), nullptr);
    CachedResponse first = live(engine, r);
    ASSERT_TRUE(ResponseCache::keeps(first.deliveries.back().finish));
    cache.insert(*key, std::move(first));
    const auto hit = cache.find(*key);  // the path a repeat takes
    ASSERT_NE(hit, nullptr);
    const CachedResponse again = live(engine, r);  // what the engine would have answered
    EXPECT_EQ(tokens_of(*hit), tokens_of(again)) << "temperature " << r.sampling.temperature;
    EXPECT_EQ(tokens_of(again).size(), 16u);
    EXPECT_EQ(hit->deliveries.back().finish, again.deliveries.back().finish);
    EXPECT_GT(hit->deliveries.size(), 1u);  // streamed replays come chunk by chunk
  }
  // Sampling without a seed draws anew each time: never cached.
  engine::GenerationRequest unseeded = seeded;
  unseeded.sampling.seed.reset();
  EXPECT_FALSE(ResponseCache::key_of(fingerprint, unseeded, {}).has_value());
  const ResponseCacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.entries, 2);
}

INSTANTIATE_TEST_SUITE_P(Devices, ResponseCacheEngine, ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace tachyon::server
