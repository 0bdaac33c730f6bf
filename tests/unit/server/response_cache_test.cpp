// The response cache's rules (src/server/response_cache.h): what may be cached (greedy, or
// sampled with a seed; never sampled without one; only answers that finished by stop or
// length), what makes a different key (every field that changes the output), and LRU by bytes.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "server/response_cache.h"

namespace tachyon::server {
namespace {

engine::GenerationRequest greedy_request() {
  engine::GenerationRequest r;
  r.prompt = {1, 2, 3, 4, 5};
  r.sampling.temperature = 0.f;
  r.max_tokens = 16;
  r.stop_token_ids = {9};
  return r;
}

std::string key(const engine::GenerationRequest& r, const std::vector<std::string>& stop = {}, uint64_t fp = 42) {
  auto k = ResponseCache::key_of(fp, r, stop);
  EXPECT_TRUE(k.has_value());
  return k.value_or("");
}

CachedResponse answer(std::vector<int32_t> tokens, engine::FinishReason finish = engine::FinishReason::Length) {
  CachedResponse c;
  engine::RequestOutput out;
  out.tokens = std::move(tokens);
  out.finish = finish;
  c.deliveries.push_back(std::move(out));
  return c;
}

TEST(ResponseCache, SampledRequestsAreCachedOnlyWithASeed) {
  engine::GenerationRequest r = greedy_request();
  EXPECT_TRUE(ResponseCache::key_of(42, r, {}).has_value());
  r.sampling.temperature = 0.7f;
  EXPECT_FALSE(ResponseCache::key_of(42, r, {}).has_value());  // a fresh random seed per request
  r.sampling.seed = 7;
  EXPECT_TRUE(ResponseCache::key_of(42, r, {}).has_value());
}

TEST(ResponseCache, OnlyAnswersThatFinishedAreKept) {
  EXPECT_TRUE(ResponseCache::keeps(engine::FinishReason::Stop));
  EXPECT_TRUE(ResponseCache::keeps(engine::FinishReason::Length));
  EXPECT_FALSE(ResponseCache::keeps(engine::FinishReason::Abort));    // the client went away (or cancelled)
  EXPECT_FALSE(ResponseCache::keeps(engine::FinishReason::Timeout));  // cut by --request-timeout or a shutdown
  EXPECT_FALSE(ResponseCache::keeps(engine::FinishReason::Error));
  EXPECT_FALSE(ResponseCache::keeps(engine::FinishReason::None));
}

TEST(ResponseCache, EveryFieldThatChangesTheOutputChangesTheKey) {
  const engine::GenerationRequest base = greedy_request();
  const std::string k0 = key(base);
  EXPECT_EQ(key(base), k0);
  const std::vector<std::pair<const char*, std::function<void(engine::GenerationRequest&)>>> changes = {
      {"prompt", [](auto& r) { r.prompt.back() = 6; }},
      {"prompt length", [](auto& r) { r.prompt.push_back(6); }},
      {"max_tokens", [](auto& r) { r.max_tokens = 17; }},
      {"stop ids", [](auto& r) { r.stop_token_ids = {9, 10}; }},
      {"top_k", [](auto& r) { r.sampling.top_k = 5; }},
      {"top_p", [](auto& r) { r.sampling.top_p = 0.9f; }},
      {"min_p", [](auto& r) { r.sampling.min_p = 0.1f; }},
      {"repetition_penalty", [](auto& r) { r.sampling.repetition_penalty = 1.1f; }},
      {"presence_penalty", [](auto& r) { r.sampling.presence_penalty = 0.5f; }},
      {"frequency_penalty", [](auto& r) { r.sampling.frequency_penalty = 0.5f; }},
      {"logit_bias", [](auto& r) { r.sampling.logit_bias = {{3, -100.f}}; }},
      {"logprobs", [](auto& r) { r.logprobs = 2; }},
      {"prompt_logprobs", [](auto& r) { r.prompt_logprobs = true; }},
      {"grammar", [](auto& r) { r.grammar = std::make_shared<engine::Grammar>(engine::Grammar::json_object()); }},
      {"temperature with a seed", [](auto& r) { r.sampling.temperature = 0.5f, r.sampling.seed = 1; }},
  };
  for (const auto& [what, change] : changes) {
    engine::GenerationRequest r = base;
    change(r);
    EXPECT_NE(key(r), k0) << what;
  }
  EXPECT_NE(key(base, {"\n\n"}), k0) << "stop strings";
  EXPECT_NE(key(base, {}, /*fp=*/43), k0) << "model fingerprint";
  // A seed matters only when sampling; at temperature 0 it and the speculation override do not.
  engine::GenerationRequest greedy = base;
  greedy.sampling.seed = 5;
  greedy.speculate = false;
  EXPECT_EQ(key(greedy), k0);
  engine::GenerationRequest seeded = base;
  seeded.sampling.temperature = 0.5f;
  seeded.sampling.seed = 1;
  engine::GenerationRequest other_seed = seeded;
  other_seed.sampling.seed = 2;
  EXPECT_NE(key(seeded), key(other_seed));
  // Nor does speculation when sampling: a seed gives the same text with or without drafts.
  engine::GenerationRequest no_drafts = seeded;
  no_drafts.speculate = false;
  no_drafts.num_speculative_tokens = 3;
  EXPECT_EQ(key(seeded), key(no_drafts));
  // Grammars that differ in one alternative differ.
  engine::GenerationRequest g1 = base, g2 = base;
  auto a = std::make_shared<engine::Grammar>();
  a->then_literal("{\"name\": \"").then_choice({"a\"", "b\""});
  auto b = std::make_shared<engine::Grammar>();
  b->then_literal("{\"name\": \"").then_choice({"a\"", "c\""});
  g1.grammar = a;
  g2.grammar = b;
  EXPECT_NE(key(g1), key(g2));
}

TEST(ResponseCache, HitsMissesAndLeastRecentlyUsedEvictionByBytes) {
  const std::string k1 = key(greedy_request());
  engine::GenerationRequest r2 = greedy_request();
  r2.max_tokens = 2;
  engine::GenerationRequest r3 = greedy_request();
  r3.max_tokens = 3;
  const std::string k2 = key(r2), k3 = key(r3);
  const int64_t one = static_cast<int64_t>(answer({1, 2, 3}).bytes() + 2 * k1.size());
  ResponseCache cache(2 * one + 1);  // room for two answers
  EXPECT_EQ(cache.find(k1), nullptr);
  cache.insert(k1, answer({1, 2, 3}));
  cache.insert(k2, answer({4, 5, 6}));
  auto hit = cache.find(k1);  // k1 is now the most recently used
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->deliveries.at(0).tokens, (std::vector<int32_t>{1, 2, 3}));
  cache.insert(k3, answer({7, 8, 9}));  // evicts k2
  EXPECT_EQ(cache.find(k2), nullptr);
  EXPECT_NE(cache.find(k1), nullptr);
  EXPECT_NE(cache.find(k3), nullptr);
  const ResponseCacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 3u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.insertions, 3u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.entries, 2);
  EXPECT_EQ(s.bytes, 2 * one);
  // An answer larger than the whole cache is not kept (and evicts nothing).
  cache.insert(key(greedy_request(), {"x"}), answer(std::vector<int32_t>(10000, 1)));
  EXPECT_EQ(cache.stats().entries, 2);
}

}  // namespace
}  // namespace tachyon::server
