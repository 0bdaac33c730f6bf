// Draft trees: construction, greedy verification along the target's branch, and the tree
// proposals of prompt lookup and the suffix trie.
#include <gtest/gtest.h>

#include "spec/draft_tree.h"
#include "spec/ngram.h"
#include "spec/suffix.h"

namespace tachyon::spec {
namespace {

TEST(DraftTree, AddMergesEqualChildrenAndKeepsParentsFirst) {
  DraftTree t;
  EXPECT_EQ(t.add(0, 5), 1);
  EXPECT_EQ(t.add(1, 6), 2);
  EXPECT_EQ(t.add(0, 5), 1);  // existing child
  EXPECT_EQ(t.add(0, 7), 3);
  EXPECT_EQ(t.add(3, 8), 4);
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{5, 6, 7, 8}));
  EXPECT_EQ(t.parents, (std::vector<int32_t>{0, 1, 0, 3}));
  EXPECT_FALSE(t.is_chain());
  EXPECT_EQ(t.depth(), 2);
  EXPECT_TRUE(DraftTree::chain({1, 2, 3}).is_chain());
  EXPECT_EQ(DraftTree::chain({1, 2, 3}).depth(), 3);
}

TEST(DraftTree, GreedyVerificationFollowsTheTargetsBranch) {
  // root -> 5 -> 6, root -> 7 -> 8 -> 9
  DraftTree t;
  t.add(t.add(0, 5), 6);
  t.add(t.add(t.add(0, 7), 8), 9);
  // The target picks 7 at the root, 8 after it, then 4 (not drafted): bonus 4.
  const std::vector<int32_t> best_at_node = {7, 1, 2, 8, 4, 3};
  const auto r = verify_tree_greedy(t, [&](int32_t node) { return best_at_node[static_cast<size_t>(node)]; });
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{7, 8, 4}));
  EXPECT_EQ(r.nodes, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(r.num_accepted, 2);
  // Rejected at the root: only the target's own token.
  const auto none = verify_tree_greedy(t, [](int32_t) { return 11; });
  EXPECT_EQ(none.tokens, (std::vector<int32_t>{11}));
  EXPECT_TRUE(none.nodes.empty());
}

TEST(NgramTree, FirstBranchIsTheChainAndOtherOccurrencesBranch) {
  // "1 2" occurs three times, followed by 3 4, 9 9 and 3 5; the context ends with "1 2".
  const std::vector<int32_t> tokens = {1, 2, 3, 5, 0, 1, 2, 9, 9, 0, 1, 2, 3, 4, 0, 1, 2};
  const NgramConfig config{.min_n = 2, .max_n = 2};
  const auto chain = ngram_propose(tokens, 2, config);
  const auto tree = ngram_propose_tree(tokens, 2, 16, config);
  ASSERT_GE(tree.size(), chain.size());
  for (size_t i = 0; i < chain.size(); ++i) EXPECT_EQ(tree.tokens[i], chain[i]);
  EXPECT_EQ(chain, (std::vector<int32_t>{3, 4}));
  EXPECT_GE(tree.child(0, 9), 1);
  EXPECT_GE(tree.child(tree.child(0, 3), 5), 1);  // 3 is shared by two occurrences: one node, two children
  EXPECT_EQ(tree.size(), 5u);                      // 3, 4, 9, 9, 5
  EXPECT_LE(ngram_propose_tree(tokens, 2, 3, config).size(), 3u);  // the node budget holds
}

TEST(SuffixTree, BranchesByFrequencyWithinTheBudget) {
  SuffixTrie trie(8);
  trie.add(std::vector<int32_t>{1, 2, 3, 4});
  trie.add(std::vector<int32_t>{1, 2, 3, 4});
  trie.add(std::vector<int32_t>{1, 2, 5, 6});
  const std::vector<int32_t> context = {7, 1, 2};
  const auto [match, tree] = trie.propose_tree(context, 3, 3, 2);
  EXPECT_EQ(match, 2);
  ASSERT_EQ(tree.size(), 3u);
  // Most probable first: 3 (2/3), then 4 after it (2/3), then 5 (1/3).
  EXPECT_EQ(tree.tokens, (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(tree.parents, (std::vector<int32_t>{0, 1, 0}));
  const auto [m2, chain] = trie.propose(context, 3, 2);
  EXPECT_EQ(chain, (std::vector<int32_t>{3, 4}));
}

}  // namespace
}  // namespace tachyon::spec
