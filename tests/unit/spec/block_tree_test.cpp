// DDTree's best-first tree over a block drafter's per-position top-k (spec/block_tree.h): it holds
// exactly the max_nodes best-scoring prefixes, parents first, with their probabilities best first,
// and a chain when the budget is the depth and each position's best token leads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "spec/block_tree.h"

namespace tachyon::spec {
namespace {

std::vector<PositionTopK> random_positions(std::mt19937& rng, int depth, int k, int vocab) {
  std::vector<PositionTopK> out;
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  for (int d = 0; d < depth; ++d) {
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (float& x : logits) x = u(rng);
    out.push_back(top_k_log_probs(logits, k));
  }
  return out;
}

// Every prefix's score, by brute force over the top-k at each position.
std::vector<double> all_prefix_scores(const std::vector<PositionTopK>& ps) {
  std::vector<double> scores;
  std::function<void(size_t, double)> walk = [&](size_t depth, double s) {
    if (depth == ps.size()) return;
    for (size_t r = 0; r < ps[depth].tokens.size(); ++r) {
      scores.push_back(s + ps[depth].log_probs[r]);
      walk(depth + 1, s + ps[depth].log_probs[r]);
    }
  };
  walk(0, 0.0);
  std::sort(scores.rbegin(), scores.rend());
  return scores;
}

TEST(BlockTree, TopKLogProbsAreTheLargestLogSoftmaxValues) {
  const std::vector<float> logits = {1.f, 3.f, 2.f, 3.f};
  const PositionTopK t = top_k_log_probs(logits, 3);
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{1, 3, 2}));  // tie: lower id first
  double z = 0;
  for (float x : logits) z += std::exp(x);
  EXPECT_NEAR(t.log_probs[0], 3.0 - std::log(z), 1e-5);
  EXPECT_NEAR(t.log_probs[2], 2.0 - std::log(z), 1e-5);
}

// Over a whole vocabulary with ties: the ids a full sort ranks first (larger logit, then lower
// id), their log-softmax values within 1e-5 of the double-precision definition.
TEST(BlockTree, TopKLogProbsOverAVocabularyMatchTheDefinition) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(-400, 40);
  for (const int32_t k : {1, 4, 9}) {
    std::vector<float> logits(8192 + 5);
    for (float& x : logits) x = 0.05f * static_cast<float>(level(rng));  // many equal values
    std::vector<int32_t> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    double z = 0;
    for (float x : logits) z += std::exp(static_cast<double>(x) - logits[static_cast<size_t>(ids[0])]);
    const double log_z = logits[static_cast<size_t>(ids[0])] + std::log(z);
    const PositionTopK t = top_k_log_probs(logits, k);
    ASSERT_EQ(t.tokens, std::vector<int32_t>(ids.begin(), ids.begin() + k));
    for (int32_t i = 0; i < k; ++i)
      EXPECT_NEAR(t.log_probs[static_cast<size_t>(i)], logits[static_cast<size_t>(ids[static_cast<size_t>(i)])] - log_z, 1e-5);
  }
}

TEST(BlockTree, HoldsExactlyTheBestScoringPrefixesParentsFirst) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    const auto ps = random_positions(rng, 5, 3, 12);
    const auto best = all_prefix_scores(ps);
    for (int32_t budget : {1, 4, 9, 20}) {
      const DraftTree tree = best_first_tree(ps, budget);
      ASSERT_EQ(tree.size(), static_cast<size_t>(budget));
      std::vector<double> scores(tree.size() + 1, 0.0);  // node 0: the root
      for (size_t i = 0; i < tree.size(); ++i) {
        const int32_t parent = tree.parents[i];
        ASSERT_LE(parent, static_cast<int32_t>(i)) << "a child before its parent";
        int32_t depth = 0;
        for (int32_t n = parent; n > 0; n = tree.parents[static_cast<size_t>(n - 1)]) ++depth;
        const PositionTopK& p = ps[static_cast<size_t>(depth)];
        const auto it = std::find(p.tokens.begin(), p.tokens.end(), tree.tokens[i]);
        ASSERT_NE(it, p.tokens.end());
        scores[i + 1] = scores[static_cast<size_t>(parent)] + p.log_probs[static_cast<size_t>(it - p.tokens.begin())];
      }
      // node_scores: each node's path probability, best first (the order size_tree trims in).
      ASSERT_EQ(tree.node_scores.size(), tree.size());
      for (size_t i = 0; i < tree.size(); ++i) {
        EXPECT_NEAR(tree.node_scores[i], std::exp(scores[i + 1]), 1e-12);
        if (i > 0) {
          EXPECT_LE(tree.node_scores[i], tree.node_scores[i - 1]);
        }
      }
      std::vector<double> got(scores.begin() + 1, scores.end());
      std::sort(got.rbegin(), got.rend());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], best[i], 1e-9) << "budget " << budget;
    }
  }
}

TEST(BlockTree, ABudgetOfTheDepthIsTheGreedyChainWhenEachBestTokenLeads) {
  std::vector<PositionTopK> ps;
  for (int d = 0; d < 4; ++d) ps.push_back({{10 + d, 20 + d}, {-0.01f, -5.f}});
  const DraftTree tree = best_first_tree(ps, 4);
  EXPECT_TRUE(tree.is_chain());
  EXPECT_EQ(tree.tokens, (std::vector<int32_t>{10, 11, 12, 13}));
  // One more node: the most probable runner-up, the first position's.
  const DraftTree five = best_first_tree(ps, 5);
  EXPECT_EQ(five.tokens.back(), 20);
  EXPECT_EQ(five.parents.back(), 0);
}

}  // namespace
}  // namespace tachyon::spec
