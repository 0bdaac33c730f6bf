// Draft trees: construction, greedy and sampled verification along the target's branch, and the tree
// proposals of prompt lookup and the suffix trie.
#include <gtest/gtest.h>

#include <algorithm>

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

// Sampled trees: at each node the target's position-keyed draw picks the child, so the tokens
// are plain sampling's for the seed, whether the tree holds the draw (accepted) or not.
TEST(DraftTree, SampledVerificationFollowsTheTargetsDrawAndEqualsPlainSampling) {
  const std::vector<std::vector<float>> by_depth = {
      {2.0f, 1.5f, 0.3f, -0.5f, 0.0f, -2.0f}, {0.1f, 2.5f, 1.0f, 0.2f, -1.0f, 0.0f}, {1.0f, 0.0f, 1.0f, 0.5f, 0.5f, -3.0f}};
  DraftTree full, partial;  // full: every token at depths 1 and 2; partial: only 1 -> 1
  std::vector<int32_t> depth = {0};
  for (int32_t a = 0; a < 6; ++a) {
    const int32_t child = full.add(0, a);
    depth.push_back(1);
    for (int32_t b = 0; b < 6; ++b) {
      full.add(child, b);
      depth.push_back(2);
    }
  }
  partial.add(partial.add(0, 1), 1);
  const LogitsRow full_rows = [&](size_t node) { return std::span<const float>(by_depth[depth[node]]); };
  const LogitsRow partial_rows = [&](size_t node) { return std::span<const float>(by_depth[node]); };
  sampling::SamplingParams params;
  params.temperature = 0.8f;
  params.top_p = 0.95f;
  int partial_accepted = 0;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    params.seed = seed;
    const sampling::Sampler sampler(params);
    std::vector<int32_t> plain;
    for (size_t t = 0; t < by_depth.size(); ++t) plain.push_back(sampler.choose(by_depth[t], static_cast<int64_t>(t)));
    const auto r = verify_tree(full, full_rows, sampler, {}, {});
    EXPECT_EQ(r.tokens, plain) << "seed " << seed;
    ASSERT_EQ(r.nodes.size(), 2u);
    EXPECT_EQ(full.tokens[static_cast<size_t>(r.nodes[1] - 1)], plain[1]);
    const auto p = verify_tree(partial, partial_rows, sampler, {}, {});
    ASSERT_EQ(p.tokens.size(), static_cast<size_t>(p.num_accepted) + 1);
    EXPECT_TRUE(std::equal(p.tokens.begin(), p.tokens.end(), plain.begin())) << "seed " << seed;
    partial_accepted += p.num_accepted;
  }
  EXPECT_GT(partial_accepted, 0);
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

// The server's trie takes back its oldest outputs (SuffixConfig::max_global_tokens): their nodes
// must go with them, or a server that runs for days holds every suffix it ever produced.
TEST(SuffixTree, TakenBackSuffixesFreeTheirNodes) {
  SuffixTrie trie(8);
  const auto sequence = [](int32_t i) {
    std::vector<int32_t> t(12);
    for (int32_t j = 0; j < 12; ++j) t[static_cast<size_t>(j)] = 1000 * i + j;  // no suffix shared between i
    return t;
  };
  SuffixTrie one(8);
  one.add(sequence(0));
  const size_t per_sequence = one.num_nodes() - 1;  // the root aside
  trie.add(sequence(0));
  for (int32_t i = 1; i <= 200; ++i) {
    trie.add(sequence(i));
    trie.add(sequence(i - 1), -1);
    ASSERT_EQ(trie.num_nodes(), 1 + per_sequence) << "after " << i << " replacements";
  }
  // The last sequence still drafts; the taken-back ones do not.
  EXPECT_EQ(trie.propose(std::vector<int32_t>{200000, 200001}, 3, 2).second, (std::vector<int32_t>{200002, 200003, 200004}));
  EXPECT_TRUE(trie.propose(std::vector<int32_t>{199000, 199001}, 3, 2).second.empty());
  // A suffix stored twice stays after one copy is taken back.
  SuffixTrie twice(8);
  twice.add(std::vector<int32_t>{5, 6, 7});
  twice.add(std::vector<int32_t>{5, 6, 7});
  twice.add(std::vector<int32_t>{5, 6, 7}, -1);
  EXPECT_EQ(twice.propose(std::vector<int32_t>{5, 6}, 1, 2).second, (std::vector<int32_t>{7}));
  twice.add(std::vector<int32_t>{5, 6, 7}, -1);
  EXPECT_EQ(twice.num_nodes(), 1u);
}

}  // namespace
}  // namespace tachyon::spec
