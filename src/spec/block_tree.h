// DDTree (arXiv 2604.12989): a draft tree built best-first from a block drafter's per-position
// distributions. A block drafter (DFlash) scores every position of the block in one forward, each
// position independently of the tokens chosen before it, so a root-to-node path d_1..d_j scores
//   s(d_1..d_j) = Σ_i log p_i(d_i)
// and the tree of the `max_nodes` best-scoring prefixes is found exactly by a best-first search
// over each position's top-k: pop the best frontier prefix, add it, push its first child (the
// best token of the next position) and its next sibling (the next-ranked token at its own
// position). Children never outscore their parent, so parents come before children and any
// prefix of the nodes is a tree (spec/draft_tree.h). With max_nodes = depth it is the greedy chain.
// Each node's exp(score), the drafter's probability of its path, goes to DraftTree::node_scores.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "spec/draft_tree.h"

namespace tachyon::spec {

// One block position's candidates, best first: token ids and their log-probabilities.
struct PositionTopK {
  std::vector<int32_t> tokens;
  std::vector<float> log_probs;
};

// The top `k` tokens of a row of logits with their log-softmax values (ties: lower id first).
PositionTopK top_k_log_probs(std::span<const float> logits, int32_t k);

// The best-first tree over `positions` (position i: depth i + 1) with at most `max_nodes` nodes.
DraftTree best_first_tree(const std::vector<PositionTopK>& positions, int32_t max_nodes);

}  // namespace tachyon::spec
