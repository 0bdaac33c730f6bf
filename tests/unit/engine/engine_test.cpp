// The engine on the demo model: continuous batching gives each request exactly the tokens
// it gets alone, prefix caching skips recomputation, cancellation and preemption lose
// nothing and leak no KV block.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "base/error.h"
#include "base/host_memory.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "spec/ngram.h"
#include "demo_runs.h"
#include "engine_test_helpers.h"

namespace tachyon::engine {
namespace {

using namespace test_helpers;


using testing_demo::kDemo;
testing_demo::Demo& fixture() { return testing_demo::demo(); }

TEST(Engine, ConcurrentRequestsEqualTheSameRequestsAlone) {
  auto& f = fixture();
  std::vector<std::vector<int32_t>> prompts, alone;
  for (uint32_t i = 0; i < 6; ++i) prompts.push_back(random_prompt(5 + 13 * i, i));
  {
    Engine engine(*f.model, {.max_concurrent = 1, .max_tokens_per_step = 512, .num_blocks = 256, .prefix_cache = false});
    for (auto& p : prompts) {
      auto s = engine.submit(greedy(p, 24));
      alone.push_back(collect(*s));
    }
  }
  // All at once, with a small step budget so prefills are chunked and mixed with decodes.
  Engine engine(*f.model, {.max_concurrent = 6, .max_tokens_per_step = 17, .num_blocks = 256});
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (auto& p : prompts) streams.push_back(engine.submit(greedy(p, 24)));
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(collect(*streams[i]), alone[i]) << "request " << i;
  const auto st = idle_stats(engine);
  EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total) << "leaked KV blocks";
}

TEST(Engine, SecondIdenticalLongPromptPrefillsOnlyItsLastPartialBlock) {
  auto& f = fixture();
  Engine engine(*f.model, {.max_concurrent = 4, .max_tokens_per_step = 512, .num_blocks = 512});
  const auto prompt = random_prompt(2000, 42);
  RequestOutput first_out, second_out;
  auto first = collect(*engine.submit(greedy(prompt, 8)), &first_out);
  const auto computed_before = engine.stats().computed_prompt_tokens;
  EXPECT_EQ(computed_before, 2000u);
  auto second = collect(*engine.submit(greedy(prompt, 8)), &second_out);
  const uint64_t computed = engine.stats().computed_prompt_tokens - computed_before;
  EXPECT_EQ(computed, 2000u % 16 == 0 ? 16u : 2000u % 16);  // 2000 = 125 blocks: the last block's 16
  EXPECT_EQ(second_out.num_cached_prompt_tokens, 2000 - static_cast<int32_t>(computed));
  EXPECT_EQ(first, second);  // token-identical with and without the cache hit
}

TEST(Engine, OutputsWithAndWithoutPrefixCacheAreIdentical) {
  auto& f = fixture();
  const auto system = random_prompt(100, 7);
  std::vector<std::vector<int32_t>> outs[2];
  for (int cached = 0; cached < 2; ++cached) {
    Engine engine(*f.model, {.max_concurrent = 4, .max_tokens_per_step = 64, .num_blocks = 256, .prefix_cache = cached == 1});
    for (uint32_t q = 0; q < 3; ++q) {
      auto p = system;
      auto tail = random_prompt(9 + q, 100 + q);
      p.insert(p.end(), tail.begin(), tail.end());
      outs[cached].push_back(collect(*engine.submit(greedy(p, 16))));
    }
    if (cached) {
      EXPECT_GT(engine.stats().prefix_cache_hit_tokens, 0u);
    }
  }
  EXPECT_EQ(outs[0], outs[1]);
}

TEST(Engine, CancelledRequestsReturnTheirBlocks) {
  auto& f = fixture();
  Engine engine(*f.model, {.max_concurrent = 4, .max_tokens_per_step = 512, .num_blocks = 64});
  auto s = engine.submit(greedy(random_prompt(50, 1), 500));
  auto first = s->next(std::chrono::seconds(60));
  ASSERT_TRUE(first.has_value());
  s.reset();  // the client goes away
  for (int i = 0; i < 200 && engine.stats().requests_cancelled == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto st = engine.stats();
  EXPECT_EQ(st.requests_cancelled, 1u);
  EXPECT_EQ(st.running, 0);
  EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total);
}

TEST(Engine, PreemptionUnderTinyKvStillGivesExactOutputs) {
  auto& f = fixture();
  std::vector<std::vector<int32_t>> prompts, alone;
  for (uint32_t i = 0; i < 4; ++i) prompts.push_back(random_prompt(20 + i, 50 + i));
  {
    Engine engine(*f.model, {.max_concurrent = 1, .num_blocks = 64, .prefix_cache = false});
    for (auto& p : prompts) alone.push_back(collect(*engine.submit(greedy(p, 40))));
  }
  // 4 requests of up to 64 tokens need 16 blocks; give them 9.
  Engine engine(*f.model, {.max_concurrent = 4, .num_blocks = 9});
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (auto& p : prompts) streams.push_back(engine.submit(greedy(p, 40)));
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(collect(*streams[i]), alone[i]) << "request " << i;
  const auto st = idle_stats(engine);
  EXPECT_GT(st.preemptions, 0u);
  EXPECT_EQ(st.kv_blocks_free, 9);
}

TEST(Engine, StopTokensAndLengthFinish) {
  auto& f = fixture();
  Engine engine(*f.model, {.num_blocks = 64});
  const auto prompt = random_prompt(12, 3);
  RequestOutput last;
  auto tokens = collect(*engine.submit(greedy(prompt, 10)), &last);
  ASSERT_EQ(tokens.size(), 10u);
  EXPECT_EQ(last.finish, FinishReason::Length);
  auto req = greedy(prompt, 10);
  req.stop_token_ids = {tokens[3]};
  auto stopped = collect(*engine.submit(req), &last);
  EXPECT_EQ(last.finish, FinishReason::Stop);
  const auto first_stop = std::find(tokens.begin(), tokens.end(), tokens[3]) - tokens.begin();
  EXPECT_EQ(stopped.size(), static_cast<size_t>(first_stop + 1));
}

TEST(Engine, RejectsRequestsThatCanNeverFit) {
  auto& f = fixture();
  Engine engine(*f.model, {.num_blocks = 8, .max_context = 1000});
  EXPECT_THROW(engine.submit(greedy({}, 4)), Error);
  EXPECT_THROW(engine.submit(greedy({1, 2, 99999}, 4)), Error);
  EXPECT_THROW(engine.submit(greedy(random_prompt(10, 1), 0)), Error);
  EXPECT_THROW(engine.submit(greedy(random_prompt(990, 1), 20)), Error);  // > context
  // The context is shortened to the pool's 8 blocks: 128 tokens.
  EXPECT_EQ(engine.max_context(), 128);
  EXPECT_THROW(engine.submit(greedy(random_prompt(120, 1), 20)), Error);  // > the context
  auto bad = greedy(random_prompt(10, 1), 4);
  bad.sampling.top_p = 2;
  EXPECT_THROW(engine.submit(bad), Error);
}

TEST(Engine, LogprobsAreReported) {
  auto& f = fixture();
  Engine engine(*f.model, {.num_blocks = 64});
  auto req = greedy(random_prompt(8, 9), 3);
  req.logprobs = 2;
  req.prompt_logprobs = true;
  std::vector<TokenLogprob> lps, prompt_lps;
  auto s = engine.submit(req);
  for (;;) {
    auto out = s->next(std::chrono::seconds(60));
    ASSERT_TRUE(out);
    lps.insert(lps.end(), out->logprobs.begin(), out->logprobs.end());
    if (!out->prompt_logprobs.empty()) prompt_lps = out->prompt_logprobs;
    if (out->finish != FinishReason::None) break;
  }
  ASSERT_EQ(lps.size(), 3u);
  EXPECT_EQ(prompt_lps.size(), 7u);
  for (const auto& lp : lps) {
    ASSERT_EQ(lp.top.size(), 2u);
    EXPECT_EQ(lp.top[0].first, lp.token);  // greedy: the chosen token is the best
    EXPECT_LE(lp.logprob, 0.f);
    EXPECT_GE(lp.top[0].second, lp.top[1].second);
  }
}

// Plain greedy steps ask the backend for argmax ids only (model::StepOutputs::argmax); a request with
// logprobs gets full logits and samples on the host. Both must give the same tokens, alone
// and in a mixed batch (where one logprobs request turns the whole step to full logits).
TEST(Engine, ArgmaxOnlyStepsGiveTheTokensOfFullLogits) {
  auto& f = fixture();
  for (int32_t concurrent : {1, 4}) {
    Engine engine(*f.model, {.max_concurrent = concurrent, .num_blocks = 256});
    std::vector<std::shared_ptr<RequestStream>> ids_only, with_logits;
    for (uint32_t seed = 0; seed < 4; ++seed) {
      ids_only.push_back(engine.submit(greedy(random_prompt(12, 40 + seed), 24)));
      auto r = greedy(random_prompt(12, 40 + seed), 24);
      r.logprobs = 0;
      with_logits.push_back(engine.submit(r));
    }
    for (size_t i = 0; i < ids_only.size(); ++i)
      EXPECT_EQ(collect(*ids_only[i]), collect(*with_logits[i])) << "prompt " << i << " concurrency " << concurrent;
  }
}

// Sampled requests with no logits processor, logprobs or grammar draw on the backend
// (Backend::sample_tokens, with each request's own uniform draws): the tokens of the host
// sampler over full logits, alone and in mixed batches, and only ids come back.
class DrawCountingBackend final : public kernels::CpuBackend {
 public:
  void sample_tokens(const float* x, int64_t rows, int64_t n, const kernels::TokenSampling* params,
                     int32_t* ids) override {
    for (int64_t r = 0; r < rows; ++r) drawn_with_temperature += params[r].temperature > 0.f;
    CpuBackend::sample_tokens(x, rows, n, params, ids);
  }
  int64_t drawn_with_temperature = 0;
};

TEST(Engine, SampledStepsDrawOnTheBackendWithTheRequestsGenerator) {
  DrawCountingBackend backend;
  const auto model = model::load_model(kDemo, backend);
  auto sampled = [](uint32_t seed, bool with_logprobs) {
    GenerationRequest r;
    r.prompt = random_prompt(12, 60 + seed);
    r.max_tokens = 24;
    r.sampling.temperature = 0.9f;
    r.sampling.top_k = seed % 2 ? 40 : 0;
    r.sampling.top_p = 0.95f;
    r.sampling.min_p = seed == 3 ? 0.05f : 0.f;
    r.sampling.seed = 1000 + seed;
    if (with_logprobs) r.logprobs = 0;  // full logits: the host sampler draws
    return r;
  };
  for (int32_t concurrent : {1, 4}) {
    Engine engine(*model, {.max_concurrent = concurrent, .num_blocks = 256});
    std::vector<std::shared_ptr<RequestStream>> ids_only, with_logits;
    for (uint32_t seed = 0; seed < 4; ++seed) {
      ids_only.push_back(engine.submit(sampled(seed, false)));
      with_logits.push_back(engine.submit(sampled(seed, true)));
    }
    for (size_t i = 0; i < ids_only.size(); ++i)
      EXPECT_EQ(collect(*ids_only[i]), collect(*with_logits[i])) << "prompt " << i << " concurrency " << concurrent;
  }
  // With no logprobs request beside it, every token of a sampled request is drawn on the
  // backend; a greedy request in the same steps (its rows at temperature 0) keeps its argmax.
  backend.drawn_with_temperature = 0;
  Engine engine(*model, {.max_concurrent = 2, .num_blocks = 256});
  auto a = engine.submit(sampled(0, false)), b = engine.submit(greedy(random_prompt(12, 70), 24));
  EXPECT_EQ(collect(*a).size(), 24u);
  const auto tb = collect(*b);
  EXPECT_EQ(backend.drawn_with_temperature, 24);
  Engine alone(*model, {.num_blocks = 256});
  auto b_alone = alone.submit(greedy(random_prompt(12, 70), 24));
  EXPECT_EQ(tb, collect(*b_alone));
}

// Requests that generate to the end of the context (no max_tokens: the server asks for the
// rest of the context), more of them than the pool holds: the newest are preempted and
// recomputed, every one reaches the context with exactly the tokens it gets alone, and every
// block comes back.
TEST(Engine, RequestsToTheEndOfTheContextAllCompleteInATinyPoolWithTheirOwnTokens) {
  auto& f = fixture();
  constexpr int32_t kContext = 80;
  std::vector<std::vector<int32_t>> prompts, alone;
  for (uint32_t i = 0; i < 5; ++i) prompts.push_back(random_prompt(9 + 3 * i, 300 + i));
  {
    Engine engine(*f.model, {.max_concurrent = 1, .num_blocks = 64, .max_context = kContext, .prefix_cache = false});
    for (auto& p : prompts)
      alone.push_back(collect(*engine.submit(greedy(p, kContext - static_cast<int32_t>(p.size())))));
  }
  // 5 requests of 80 tokens need 25 blocks; the pool holds one context and a block (6). With
  // prompt lookup too: a preempted request's drafts are dropped, not recomputed.
  for (const bool speculate : {false, true}) {
    SCOPED_TRACE(speculate ? "ngram drafter" : "no drafter");
    const auto drafter = spec::make_ngram_drafter({});
    Engine engine(*f.model, {.max_concurrent = 5, .max_tokens_per_step = 32, .num_blocks = 6, .max_context = kContext,
                             .drafter = speculate ? drafter.get() : nullptr, .gates = false});
    ASSERT_EQ(engine.max_context(), kContext);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (auto& p : prompts) streams.push_back(engine.submit(greedy(p, kContext - static_cast<int32_t>(p.size()))));
    for (size_t i = 0; i < prompts.size(); ++i) {
      RequestOutput last;
      const auto tokens = collect(*streams[i], &last);
      EXPECT_EQ(last.finish, FinishReason::Length) << "request " << i;
      EXPECT_EQ(static_cast<int32_t>(prompts[i].size() + tokens.size()), kContext) << "request " << i;
      EXPECT_EQ(tokens, alone[i]) << "request " << i;
    }
    const auto st = idle_stats(engine);
    EXPECT_GT(st.preemptions, 0u);
    EXPECT_EQ(st.kv_blocks_free, 6);
  }
}

// The host tier (swap space), forced on the CPU: preempted requests' blocks are copied to host
// memory as the pool evicts them and back when the requests are admitted again, so none
// recomputes more than its last partial block; every request gets exactly its tokens alone and
// every block comes back. Without the tier the same workload recomputes (what makes this test
// fail without it); with a tier of two blocks, resumes fall back to recompute, still exact.
TEST(Engine, PreemptedRequestsResumeFromTheHostTierWithTheirOwnTokens) {
  auto& f = fixture();
  constexpr int32_t kContext = 80;
  std::vector<std::vector<int32_t>> prompts, alone;
  for (uint32_t i = 0; i < 5; ++i) prompts.push_back(random_prompt(20 + 3 * i, 700 + i));
  {
    Engine engine(*f.model, {.max_concurrent = 1, .num_blocks = 64, .max_context = kContext, .prefix_cache = false});
    for (auto& p : prompts) alone.push_back(collect(*engine.submit(greedy(p, 40))));
  }
  auto run = [&](int64_t swap_space_bytes) {
    Engine engine(*f.model, {.max_concurrent = 5, .max_tokens_per_step = 32, .num_blocks = 6, .max_context = kContext,
                             .swap_space_bytes = swap_space_bytes});
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (auto& p : prompts) streams.push_back(engine.submit(greedy(p, 40)));
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(collect(*streams[i]), alone[i]) << "request " << i;
    const EngineStats st = idle_stats(engine);
    EXPECT_GT(st.preemptions, 0u);
    EXPECT_GT(st.preempted_resumes, 0u);
    EXPECT_EQ(st.kv_blocks_free, 6);
    return st;
  };
  const EngineStats recompute = run(0);
  EXPECT_FALSE(recompute.host_swap_enabled);
  EXPECT_GT(recompute.preempted_recomputed_tokens, 0u);

  const EngineStats swapped = run(int64_t{64} << 20);
  ASSERT_TRUE(swapped.host_swap_enabled);
  EXPECT_GT(swapped.swap_out_blocks, 0u);
  EXPECT_GT(swapped.swap_in_blocks, 0u);
  EXPECT_GT(swapped.swap_in_bytes, 0u);
  EXPECT_EQ(swapped.preempted_recompute_fallbacks, 0u);
  EXPECT_EQ(swapped.preempted_recomputed_tokens, 0u);
  EXPECT_EQ(swapped.swap_evictions, 0u);

  const EngineStats full = run(2 * swapped.swap_space_bytes / swapped.swap_blocks);  // two blocks
  EXPECT_EQ(full.swap_blocks, 2);
  EXPECT_GT(full.swap_evictions, 0u);
  EXPECT_GT(full.preempted_recompute_fallbacks, 0u);
}

// Without a size, a CPU engine's pool holds max_concurrent full contexts when the host has
// room for them (engine/kv_sizing.h), and a context longer than the pool is shortened to it.
TEST(Engine, PoolIsSizedFromTheHostAndTheContextFitsIt) {
  auto& f = fixture();
  Engine engine(*f.model, {.max_concurrent = 2});
  kv::KvLayout one = f.model->kv_layout(1, 16);
  one.format = engine.kv_format();  // the format the engine resolved (bf16 by default)
  const int64_t per_block = static_cast<int64_t>(one.bytes_per_block());
  const int64_t full_use = 2 * f.model->config().max_position_embeddings / 16;
  if (host_share_blocks(host_available_bytes(), per_block) >= full_use) {
    EXPECT_EQ(engine.kv_pool().num_blocks, full_use) << engine.kv_pool().why;
    EXPECT_EQ(engine.max_context(), f.model->config().max_position_embeddings);
  } else {
    EXPECT_LT(engine.kv_pool().num_blocks, full_use) << engine.kv_pool().why;
  }
  Engine small(*f.model, {.kv_memory_bytes = 10 * per_block});
  EXPECT_EQ(small.kv_pool().num_blocks, 10);
  EXPECT_EQ(small.max_context(), 160);
  EXPECT_EQ(collect(*small.submit(greedy(random_prompt(150, 4), 10))).size(), 10u);
}

}  // namespace
}  // namespace tachyon::engine
