// The merged draft tree (spec/merged_tree.h) and the merged drafter (spec/merged_drafter.h) from
// token ids and counts alone: merging shares prefixes and keeps branches, scores follow the
// members' measured rates, pruning keeps a tree of the best nodes at the best measured rate, the
// outcome of a verification feeds the rates, and the drafter's costly members run only where
// their measured gain pays.
#include <gtest/gtest.h>

#include "base/error.h"
#include "spec/merged_drafter.h"
#include "spec/spec_policy.h"

namespace tachyon::spec {
namespace {

// root -> 1 -> 2 -> 3 (member 0's chain); member 1: root -> 1 -> 2 -> 4 and root -> 5 (its side line).
SourcedTree two_members() {
  SourcedTree merged;
  merge_into(merged, DraftTree::chain({1, 2, 3}), 0);
  DraftTree other = DraftTree::chain({1, 2, 4});
  other.add(0, 5);
  merge_into(merged, other, 1);
  return merged;
}

TEST(MergedTree, SharedPrefixesAreOneNodeAndBranchesStay) {
  const SourcedTree t = two_members();
  EXPECT_EQ(t.tree.tokens, (std::vector<int32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(t.tree.parents, (std::vector<int32_t>{0, 1, 2, 2, 0}));
  EXPECT_EQ(t.sources(0), 3u) << "1 is both members' first token";
  EXPECT_EQ(t.sources(1), 3u);
  EXPECT_EQ(t.main_line[2], 1u);
  EXPECT_EQ(t.main_line[3], 2u);
  EXPECT_EQ(t.side_line[4], 2u) << "5 is member 1's second child of the root";
  EXPECT_EQ(t.members(), 3u);
}

TEST(MergedTree, ScoresFollowTheMeasuredRatesAndNeverExceedTheParent) {
  const SourcedTree t = two_members();
  MergedFigures figures;
  for (int i = 0; i < 64; ++i)
    for (int32_t depth = 1; depth <= 3; ++depth) {
      figures.record(0, 0, depth, i % 10 < 9);  // member 0: 90% of its main line accepted
      figures.record(1, 0, depth, i % 10 < 3);  // member 1: 30%
    }
  const auto scores = score_nodes(t, figures);
  ASSERT_EQ(scores.size(), 5u);
  EXPECT_GT(scores[0], 0.9) << "proposed by both: more likely than by either";
  EXPECT_GT(scores[2], scores[3]) << "member 0's token beats member 1's at the same place";
  for (size_t i = 0; i < scores.size(); ++i) {
    const int32_t parent = t.tree.parents[i];
    if (parent > 0) {
      EXPECT_LE(scores[i], scores[static_cast<size_t>(parent - 1)]);
    }
  }
  EXPECT_LE(scores[2] + scores[3], scores[1] + 1e-12) << "siblings exclude each other";
  EXPECT_LT(scores[4], 0.12) << "an unmeasured side line starts at its low prior";
}

TEST(MergedTree, BestNodeCountMaximisesTokensPerSecondOfTheCostLine) {
  const std::vector<double> scores = {0.05, 0.9, 0.1, 0.8};
  // A plain step 1 s, each verified row 0.2 s: (1 + .9 + .8) / 1.4 beats both fewer and more rows.
  EXPECT_EQ(best_node_count(scores, [](int32_t n) { return 1 + 0.2 * n; }), 2);
  EXPECT_EQ(best_node_count(scores, [](int32_t n) { return 1 + 0.01 * n; }), 4) << "rows nearly free: all";
  EXPECT_EQ(best_node_count(scores, [](int32_t n) { return 1 + 2.0 * n; }), 0) << "rows dearer than steps: none";
  EXPECT_EQ(best_node_count(scores, [](int32_t) { return 0.0; }), 4) << "unmeasured: verify everything";
}

TEST(MergedTree, KeepBestKeepsATreeOfTheBestNodes) {
  const SourcedTree t = two_members();
  const std::vector<double> scores = {0.9, 0.8, 0.2, 0.5, 0.3};
  const SourcedTree kept = keep_best(t, scores, 3);
  EXPECT_EQ(kept.tree.tokens, (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(kept.tree.parents, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(kept.main_line[2], 2u) << "sources move with their nodes";
  EXPECT_EQ(keep_best(t, scores, 0).tree.size(), 0u);
  EXPECT_EQ(keep_best(t, scores, 9).tree.size(), 5u);
}

TEST(MergedTree, OutcomesFeedTheRatesAndTellEachMembersGain) {
  const SourcedTree t = two_members();
  MergedFigures figures;
  const std::vector<int32_t> actual = {1, 2, 4, 7};  // member 1's branch, then the target's own 7
  record_outcome(t, actual, figures);
  EXPECT_EQ(figures.reached(0, 0, 1), 1);
  EXPECT_EQ(figures.reached(1, 1, 1), 1) << "5 was reached and rejected";
  EXPECT_GT(figures.rate(1, 0, 3), figures.rate(0, 0, 3)) << "4 accepted, 3 rejected";
  EXPECT_LT(figures.rate(1, 1, 1), MergedFigures::kPriorSide);
  EXPECT_EQ(accepted_depth(t, actual), 3);
  EXPECT_EQ(accepted_depth(t, actual, /*without member 1=*/~2u), 2) << "member 1 added one accepted node";
  EXPECT_EQ(accepted_depth(t, actual, ~1u), 3);
  EXPECT_EQ(accepted_depth(t, std::vector<int32_t>{9}), 0);
}

TEST(MergedDrafter, CostlyMembersRunOnlyWhereTheirGainPays) {
  // A step of 2 expected tokens at 1 ms: a member adding 0.5 tokens pays for 0.2 ms, not for 0.3 ms.
  EXPECT_TRUE(member_pays(0.5, 8, 4, 0.2e-3, 2, 1e-3));
  EXPECT_FALSE(member_pays(0.5, 8, 4, 0.3e-3, 2, 1e-3));
  EXPECT_TRUE(member_pays(0.0, 3, 4, 0.3e-3, 2, 1e-3)) << "too few gains measured: it runs";
  EXPECT_TRUE(member_pays(0.0, 8, 4, 0.3e-3, 2, 0)) << "step cost unmeasured: it runs";
}

class ListDrafter final : public Drafter {
 public:
  ListDrafter(std::string name, std::vector<int32_t> chain) : name_(std::move(name)), chain_(std::move(chain)) {}
  std::string name() const override { return name_; }
  std::vector<int32_t> propose(RequestKey, std::span<const int32_t>, int32_t k) override {
    ++calls;
    return {chain_.begin(), chain_.begin() + std::min<int32_t>(k, static_cast<int32_t>(chain_.size()))};
  }
  void on_finish(RequestKey, std::span<const int32_t>, int32_t) override { ++finished; }
  int calls = 0, finished = 0;

 private:
  std::string name_;
  std::vector<int32_t> chain_;
};

TEST(MergedDrafter, MergesItsMembersTreesAndLearnsFromTheTargetsTokens) {
  ListDrafter lookup("lookup", {1, 2, 3}), model("model", {1, 2, 4});
  MergedDrafter merged({{&lookup, false}, {&model, true}});
  merged.begin_request(7, RequestKind::CodeNovel);
  std::vector<int32_t> tokens = {9, 9};
  const DraftTree first = merged.propose_tree(7, tokens, 3, 12);
  EXPECT_EQ(first.tokens, (std::vector<int32_t>{1, 2, 3, 4})) << "unmeasured costs: every node verified";
  EXPECT_EQ(merged.counters().multi_source_trees, 1u);
  EXPECT_EQ(model.calls, 1) << "a costly member's first proposal always runs (its catch-up)";
  // The target took the model's branch: the next proposal learns it and scores 4 above 3.
  tokens.insert(tokens.end(), {1, 2, 4, 5});
  merged.propose_tree(7, tokens, 3, 12);
  EXPECT_EQ(merged.counters().runs[1], 2u);
  EXPECT_EQ(merged.counters().nodes[0], 3u + 3u);
  // Chains: the first member with a draft, whatever was measured.
  EXPECT_EQ(merged.propose(7, tokens, 2), (std::vector<int32_t>{1, 2}));
  merged.on_finish(7, tokens, 2);
  EXPECT_EQ(lookup.finished, 1);
  EXPECT_EQ(merged.parts(), (std::vector<Drafter*>{&lookup, &model}));
  EXPECT_THROW(MergedDrafter({{&lookup, false}}), Error) << "one drafter is not a merge";
}

// The policy leaves a merged drafter's tree size to it (admission takes no temperature: sampled
// draws are keyed by position, sampling/sampler.h, so a tree's verification emits plain sampling's
// tokens whatever it holds, and greedy and sampled requests speculate alike).
TEST(MergedDrafter, ThePolicyLetsItSizeItsOwnTrees) {
  ListDrafter lookup("lookup", {1, 2, 3}), model("model", {1, 2, 4});
  MergedDrafter merged({{&lookup, false}, {&model, true}});
  SpecPolicy policy(&merged, {.num_speculative_tokens = 4, .auto_k = true, .max_tree_nodes = -1, .gates = false},
                    false);
  const std::vector<int32_t> prompt(100, 7);
  SpecState state;
  policy.admit(state, prompt, true, -1, {});
  const DraftPlan tree = policy.plan_drafts(state, {.max_k = 10, .num_tokens = 100, .max_new = 50});
  EXPECT_EQ(tree.k, 4);
  EXPECT_EQ(tree.num_tree_nodes, SpecPolicy::kOwnTreeNodesPerLevel * 4);
}

}  // namespace
}  // namespace tachyon::spec
