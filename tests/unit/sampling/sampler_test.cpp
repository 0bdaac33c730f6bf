#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "base/error.h"

namespace tachyon::sampling {
namespace {

std::vector<float> softmax(const std::vector<float>& l, float t) {
  std::vector<float> p(l.size());
  float mx = *std::max_element(l.begin(), l.end());
  double s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += (p[i] = std::exp((l[i] - mx) / t));
  for (auto& x : p) x = static_cast<float>(x / s);
  return p;
}

// Draws n samples and checks every token's frequency against `expected` within 5 sigma.
void expect_frequencies(const SamplingParams& params, const std::vector<float>& logits,
                        const std::vector<float>& expected, int n = 200000) {
  Sampler sampler(params);
  std::vector<int> counts(logits.size());
  for (int i = 0; i < n; ++i) {
    auto l = logits;
    ++counts[sampler.sample(l, {}, i)];  // one seed's positions 0..n-1
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    const double p = expected[i], sigma = std::sqrt(n * p * (1 - p)) + 1;
    EXPECT_NEAR(counts[i], n * p, 5 * sigma) << "token " << i;
  }
}

const std::vector<float> kLogits = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f};

TEST(Sampler, TemperatureMatchesSoftmax) {
  SamplingParams p;
  p.seed = 1;
  for (float t : {0.5f, 1.0f, 2.0f}) {
    p.temperature = t;
    expect_frequencies(p, kLogits, softmax(kLogits, t));
  }
}

TEST(Sampler, TopKRenormalisesOverTheKBest) {
  SamplingParams p;
  p.seed = 2;
  p.top_k = 2;
  auto full = softmax(kLogits, 1.f);
  std::vector<float> expected(kLogits.size(), 0.f);
  expected[0] = full[0] / (full[0] + full[1]);
  expected[1] = full[1] / (full[0] + full[1]);
  expect_frequencies(p, kLogits, expected);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  SamplingParams p;
  p.seed = 3;
  auto full = softmax(kLogits, 1.f);  // ~0.53, 0.20, 0.12, 0.07, ...
  p.top_p = full[0] + full[1] + 0.01f;  // needs the first three
  const float mass = full[0] + full[1] + full[2];
  std::vector<float> expected = {full[0] / mass, full[1] / mass, full[2] / mass, 0, 0, 0};
  expect_frequencies(p, kLogits, expected);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  SamplingParams p;
  p.seed = 4;
  auto full = softmax(kLogits, 1.f);
  p.min_p = full[2] / full[0] - 1e-3f;  // keeps tokens 0..2
  const float mass = full[0] + full[1] + full[2];
  expect_frequencies(p, kLogits, {full[0] / mass, full[1] / mass, full[2] / mass, 0, 0, 0});
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  std::vector<float> l = {1, 3, 3, 2};
  EXPECT_EQ(s.sample(l, {}, 0), 1);
}

TEST(Sampler, SameSeedSameOutputs) {
  SamplingParams p;
  p.seed = 99;
  Sampler a(p), b(p);
  for (int i = 0; i < 1000; ++i) {
    auto la = kLogits, lb = kLogits;
    ASSERT_EQ(a.sample(la, {}, i), b.sample(lb, {}, i));
  }
  p.seed = 100;
  Sampler c(p);
  int differ = 0;
  Sampler a2(SamplingParams{.seed = 99});
  for (int i = 0; i < 1000; ++i) {
    auto la = kLogits, lc = kLogits;
    differ += a2.sample(la, {}, i) != c.sample(lc, {}, i);
  }
  EXPECT_GT(differ, 100);
}

// The draw for a position is a function of (seed, position) alone: the order positions are
// drawn in, and how many were drawn before, change nothing (what speculation relies on).
TEST(Sampler, TheDrawAtAPositionIgnoresEarlierDraws) {
  SamplingParams p;
  p.seed = 7;
  const Sampler in_order(p), backwards(p);
  std::vector<int32_t> forward_tokens, backward_tokens(64);
  for (int t = 0; t < 64; ++t) {
    auto l = kLogits;
    forward_tokens.push_back(in_order.sample(l, {}, t));
  }
  for (int t = 63; t >= 0; --t) {
    auto l = kLogits;
    backward_tokens[static_cast<size_t>(t)] = backwards.sample(l, {}, t);
    auto again = kLogits;
    ASSERT_EQ(backwards.sample(again, {}, t), backward_tokens[static_cast<size_t>(t)]);  // repeatable
  }
  EXPECT_EQ(forward_tokens, backward_tokens);
  EXPECT_GT(std::set<int32_t>(forward_tokens.begin(), forward_tokens.end()).size(), 2u);  // not one token
  // Neighbouring seeds (choice i of n gets seed + i) and neighbouring positions are unrelated.
  int equal_u = 0;
  for (int t = 0; t < 1000; ++t) equal_u += position_uniform(7, t) == position_uniform(8, t);
  EXPECT_EQ(equal_u, 0);
  EXPECT_NE(position_uniform(7, 1), position_uniform(8, 0));
  // An unseeded sampler gets a random seed: two of them differ.
  EXPECT_NE(Sampler(SamplingParams{}).seed(), Sampler(SamplingParams{}).seed());
}

TEST(Processors, RepetitionPenaltyFollowsTransformers) {
  SamplingParams p;
  p.repetition_penalty = 2.f;
  std::vector<float> l = {4, -4, 1, 1};
  std::vector<int32_t> prompt = {0, 1}, gen = {1};
  apply_processors(p, {prompt, gen}, l);
  EXPECT_EQ(l, (std::vector<float>{2, -8, 1, 1}));  // applied once per distinct token
}

TEST(Processors, PresenceAndFrequencyPenaltiesCountGeneratedTokensOnly) {
  SamplingParams p;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  std::vector<float> l = {0, 0, 0};
  std::vector<int32_t> prompt = {2, 2}, gen = {0, 0, 0, 1};
  apply_processors(p, {prompt, gen}, l);
  EXPECT_FLOAT_EQ(l[0], -(0.5f + 0.75f));
  EXPECT_FLOAT_EQ(l[1], -(0.5f + 0.25f));
  EXPECT_FLOAT_EQ(l[2], 0.f);
}

TEST(Processors, LogitBiasCanForceAToken) {
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias = {{5, 100.f}};
  Sampler s(p);
  auto l = kLogits;
  EXPECT_EQ(s.sample(l, {}, 0), 5);
}

TEST(SamplingParams, ValidationNamesTheField) {
  SamplingParams p;
  p.top_p = 1.5f;
  try {
    p.validate(10);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos);
  }
  p = {};
  p.logit_bias = {{11, 1.f}};
  EXPECT_THROW(p.validate(10), Error);
}

TEST(LogSoftmax, SumsToOne) {
  auto lp = log_softmax(kLogits);
  double s = 0;
  for (float x : lp) s += std::exp(x);
  EXPECT_NEAR(s, 1.0, 1e-6);
}

}  // namespace
}  // namespace tachyon::sampling
