// Auto-k's measurements (spec/spec_step_costs.h): step costs with an intercept, acceptance
// per draft level, and the k they choose; the measured choice between draft trees and chains.
#include "spec/spec_step_costs.h"

#include <gtest/gtest.h>

namespace tachyon::spec {
namespace {

// Costs of the CPU demo drafter's shape: a plain step 1.0, a speculative step 1.2 + 0.25·k
// (a catch-up forward and the verify's fixed part do not grow with k).
double affine(int32_t k) { return 1.2 + 0.25 * k; }

TEST(SpecStepCosts, MeasuredCountsAreUsedAndOthersReadOffTheirLine) {
  SpecStepCosts costs;
  EXPECT_EQ(costs.cost(3), 0);  // nothing measured
  costs.record_plain(1.0);
  for (int i = 0; i < SpecStepCosts::kMinSamples; ++i) costs.record(4, affine(4));
  // One count measured: the line from the plain step through it.
  EXPECT_DOUBLE_EQ(costs.cost(4), affine(4));
  EXPECT_DOUBLE_EQ(costs.cost(2), 1.0 + (affine(4) - 1.0) * 2 / 4);
  for (int i = 0; i < SpecStepCosts::kMinSamples; ++i) costs.record(1, affine(1));
  // Two counts: the line through them, intercept included.
  EXPECT_NEAR(costs.cost(2), affine(2), 1e-12);
  EXPECT_NEAR(costs.cost(6), affine(6), 1e-12);
  // A count with few samples pulls the line by its weight only.
  costs.record(3, 9.0);
  EXPECT_GT(costs.cost(3), affine(3));
  EXPECT_LT(costs.cost(3), 9.0);
}

// On the H200 a fixed k = 4 ran faster than auto-k, which kept choosing 2-3: the deepest count
// runs only on the exploring steps, and its own average of a few noisy steps (one slow step
// lifts an average by 10% of its excess for many steps) decided.
TEST(SpecStepCosts, ARarelyRunCountsNoisyAverageDoesNotDecide) {
  DraftAcceptance acceptance;  // level rates .8, .9, .95, .95
  for (int i = 0; i < 100; ++i) acceptance.record(4, i < 20 ? 0 : i < 28 ? 1 : i < 32 ? 2 : i < 34 ? 3 : 4);
  SpecStepCosts costs;
  costs.record_plain(1.0);
  for (int i = 0; i < 40; ++i)
    for (int k = 1; k <= 3; ++k) costs.record(k, affine(k));
  for (int i = 0; i < SpecStepCosts::kMinSamples + 2; ++i) costs.record(4, affine(4));
  ASSERT_EQ(costs.best_k(acceptance, 4), 4);
  costs.record(4, 3 * affine(4));  // one slow step at the rarely run count
  EXPECT_NEAR(costs.cost(4), affine(4), 0.1 * affine(4));
  EXPECT_EQ(costs.best_k(acceptance, 4), 4);
}

TEST(SpecStepCosts, NoisyCostsThatFallWithKAreTakenAsFlat) {
  SpecStepCosts costs;
  for (int i = 0; i < SpecStepCosts::kMinSamples; ++i) {
    costs.record(1, 2.0);
    costs.record(4, 1.9);
  }
  EXPECT_DOUBLE_EQ(costs.cost(8), costs.cost(2));
  EXPECT_GT(costs.cost(8), 0);
}

TEST(DraftAcceptance, EachLevelHasItsOwnRateAndDeeperLevelsTakeTheDeepestMeasured) {
  DraftAcceptance acceptance;
  EXPECT_DOUBLE_EQ(acceptance.expected_tokens(3), 1.0);  // nothing measured: no draft is expected to pass
  // Level 1 accepted 3 times in 4, level 2 (reached 3 times) always.
  acceptance.record(2, 2);
  acceptance.record(2, 2);
  acceptance.record(2, 2);
  acceptance.record(2, 0);
  acceptance.record(1, 1);  // a one-level step: level 1 reached and accepted
  const double r1 = 4.0 / 5, r2 = 1.0;
  EXPECT_DOUBLE_EQ(acceptance.expected_tokens(1), 1 + r1);
  // Level 2 was reached only 3 times (< kMinReached): level 1's rate stands in.
  EXPECT_DOUBLE_EQ(acceptance.expected_tokens(2), 1 + r1 + r1 * r1);
  acceptance.record(2, 2);
  EXPECT_DOUBLE_EQ(acceptance.expected_tokens(2), 1 + (5.0 / 6) + (5.0 / 6) * r2);
  // Level 3 never ran: level 2's rate stands in.
  EXPECT_DOUBLE_EQ(acceptance.expected_tokens(3), 1 + (5.0 / 6) + (5.0 / 6) * r2 + (5.0 / 6) * r2 * r2);
}

// The case that motivated both: acceptance that rises with depth and a cost with an
// intercept. A per-draft rate with cost = plain × (1 + β·k) fitted at k = 1 picks a short
// chain; the measured levels and line pick the deepest one.
TEST(SpecStepCosts, DeepChainsWinWhenDeepLevelsAreAcceptedAndCostsHaveAnIntercept) {
  DraftAcceptance acceptance;
  // Level rates .8, .9, .95, .95 (each level reached 40+ times).
  for (int i = 0; i < 100; ++i) {
    const int accepted = i < 20 ? 0 : i < 28 ? 1 : i < 32 ? 2 : i < 34 ? 3 : 4;
    acceptance.record(4, accepted);
  }
  SpecStepCosts costs;
  costs.record_plain(1.0);
  for (int i = 0; i < SpecStepCosts::kMinSamples; ++i) {
    costs.record(1, affine(1));
    costs.record(4, affine(4));
  }
  EXPECT_EQ(costs.best_k(acceptance, 4), 4);
  // The old model: α = accepted per drafted level, cost 1 + β·k with β = (cost(1) − 1) / 1.
  const double alpha = 0.8, beta = affine(1) - 1.0;
  int32_t old_best = 1;
  double best_rate = 0;
  for (int32_t k = 1; k <= 4; ++k) {
    double tokens = 1, reach = 1;
    for (int32_t j = 1; j <= k; ++j) tokens += reach *= alpha;
    if (tokens / (1 + beta * k) > best_rate) best_rate = tokens / (1 + beta * k), old_best = k;
  }
  EXPECT_EQ(old_best, 2);
  // Costs that grow steeply with k make short chains win again.
  SpecStepCosts steep;
  for (int i = 0; i < SpecStepCosts::kMinSamples; ++i) {
    steep.record(1, 1.3);
    steep.record(4, 4.0);
  }
  EXPECT_EQ(steep.best_k(acceptance, 4), 1);
  // Nothing measured: k_max.
  EXPECT_EQ(SpecStepCosts{}.best_k(acceptance, 3), 3);
}

// A row's share of the fitted line is held between kMinRowCost and kMaxRowCost plain steps.
TEST(SpecStepCosts, BoundedCostHoldsEachRowBetweenFreeAndAPlainStep) {
  SpecStepCosts costs;
  EXPECT_EQ(costs.bounded_cost(4), 0);
  costs.record_plain(1.0);
  EXPECT_DOUBLE_EQ(costs.bounded_cost(0), 1.0);
  for (int i = 0; i < SpecStepCosts::kMinSamples; ++i) costs.record(4, 1.4);
  EXPECT_NEAR(costs.bounded_cost(8), 1.8, 1e-12);  // within the bounds: the line
  SpecStepCosts flat;
  flat.record_plain(1.0);
  for (int i = 0; i < SpecStepCosts::kMinSamples; ++i) flat.record(4, 1.0);
  EXPECT_NEAR(flat.bounded_cost(10), 1.0 + 10 * SpecStepCosts::kMinRowCost, 1e-12) << "a row is never free";
  SpecStepCosts steep;
  steep.record_plain(1.0);
  for (int i = 0; i < SpecStepCosts::kMinSamples; ++i) steep.record(2, 9.0);
  EXPECT_NEAR(steep.bounded_cost(2), 1.0 + 2 * SpecStepCosts::kMaxRowCost, 1e-12) << "nor dearer than a plain step";
}

// Histogram binning of a drafter's node scores: a score is its own estimate until its bin (scores
// within a factor of 2) has seen kMinNodes nodes, then it is scaled by the bin's accepted over
// predicted; bins are apart, so an overconfident runner-up does not borrow the main line's rate.
TEST(ScoreCalibration, ScalesEachScoreByItsBinsAcceptedOverPredicted) {
  ScoreCalibration c;
  EXPECT_EQ(c.expected(0.8), 0.8);
  // Main-line nodes scored .8 and accepted 3 times in 4; runner-ups scored .2 and never accepted.
  for (int i = 0; i < 400; ++i) c.record(std::vector<double>{0.8, 0.2}, {i % 4 != 0, false});
  EXPECT_NEAR(c.expected(0.8), 0.75, 0.03);
  EXPECT_NEAR(c.expected(0.6), 0.6 * 0.75 / 0.8, 0.03) << "the same bin";
  EXPECT_NEAR(c.expected(0.2), 0.0, 1e-6);
  EXPECT_EQ(c.expected(0.05), 0.05) << "a bin with no nodes: the score itself";
  // An underconfident bin is scaled up, never past 1.
  ScoreCalibration under;
  for (int i = 0; i < 100; ++i) under.record(std::vector<double>{0.4}, {true});
  EXPECT_NEAR(under.expected(0.4), 1.0, 1e-9);
  EXPECT_NEAR(under.expected(0.3), 0.75, 1e-9);
  // Fewer than kMinNodes: not yet trusted.
  ScoreCalibration few;
  for (int i = 0; i + 1 < ScoreCalibration::kMinNodes; ++i) few.record(std::vector<double>{0.9}, {false});
  EXPECT_EQ(few.expected(0.9), 0.9);
  few.record(std::vector<double>{0.9}, {false});
  EXPECT_EQ(few.expected(0.9), 0.0);
}

TEST(TreeOrChain, AlternatesUntilBothAreMeasuredThenTakesTheFasterAndExploresTheOther) {
  TreeOrChain choice;
  uint64_t step = 1;
  int trees = 0, chains = 0;
  // Trees: 4 tokens per 1.0 s; chains: 3 tokens per 0.5 s (the H200's case: chains win).
  while (trees < TreeOrChain::kMinSteps || chains < TreeOrChain::kMinSteps) {
    const bool tree = choice.trees(step++);
    (tree ? trees : chains) += 1;
    choice.record(tree, tree ? 4 : 3, tree ? 1.0 : 0.5);
    ASSERT_LE(trees + chains, 2 * TreeOrChain::kMinSteps) << "both shapes are measured within the first steps";
  }
  for (uint64_t s = 1; s < TreeOrChain::kExploreEvery; ++s) EXPECT_FALSE(choice.trees(s)) << s;
  EXPECT_TRUE(choice.trees(TreeOrChain::kExploreEvery));  // the slower shape, now and then
  // The trees get faster (e.g. the text turns predictable): the choice follows the measurements.
  for (int i = 0; i < 200; ++i) choice.record(true, 5, 0.4);
  EXPECT_TRUE(choice.trees(1));
  EXPECT_FALSE(choice.trees(TreeOrChain::kExploreEvery));
}

}  // namespace
}  // namespace tachyon::spec
