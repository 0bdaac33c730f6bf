// Draft trees: several candidate continuations verified in one target forward. The target
// computes every node's logits (each row attends only to its own branch, kernels/ops.h
// kMaxTreeDepth), and verification follows the branch the target itself would have
// generated (its argmax, or its position-keyed draw: sampling/sampler.h), so the output is plain
// decoding's whatever the tree holds. A chain is the
// one-branch tree; trees raise the accepted length per step where extra rows are cheap.
//
//   DraftTree tree = drafter->propose_tree(request, tokens, /*max_depth=*/4, /*max_nodes=*/8);
//   ... forward over [last token, tree.tokens...] with Batch::add_tree ...
//   VerifyResult r = verify_tree_greedy(tree, [&](size_t node) { return argmax of node's row; });
//   // r.nodes: the accepted nodes; their K/V move to consecutive positions (KvCache::copy_position)
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/ops.h"
#include "spec/verify.h"

namespace tachyon::spec {

// Node 0 is the root (the last committed token, implicit); node i >= 1 is tokens[i - 1], a
// child of node parents[i - 1] < i. Parents come before their children, so any prefix of the
// nodes is a tree too (the engine may verify fewer nodes than were drafted).
struct DraftTree {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;
  // Per node, where the drafter knows it: its probability under the drafter that the target's
  // path reaches it, best first (non-increasing, so every prefix is the best tree of its size:
  // a block drafter's best-first tree, spec/block_tree.h). Empty: unscored. truncate and
  // prune_to_grammar keep it in step.
  std::vector<double> node_scores;

  size_t size() const { return tokens.size(); }
  bool is_chain() const;
  int32_t depth() const;  // longest root-to-leaf path in drafted nodes
  // Appends `token` under `parent` unless that child exists; returns the child's node index.
  int32_t add(int32_t parent, int32_t token);
  // The child of `node` holding `token`, or -1.
  int32_t child(int32_t node, int32_t token) const;
  void truncate(size_t num_nodes);
  static DraftTree chain(std::vector<int32_t> tokens);
};

// What a model-based drafter (draft model, MTP head) sees at each level of its chain: the
// token it chose and its runner-up, with their probabilities under the drafter
// (kernels::TopTwo, computed on the device by Backend::top_two or here from host logits).
using LevelChoice = kernels::TopTwo;
LevelChoice level_choice(std::span<const float> logits);
// The chain of best tokens plus, beside each chain token, its level's runner-up as a leaf:
// they cost the drafter nothing (same forward) and catch the commonest miss. Runner-ups are
// added most probable first (probability of reaching the level × the runner-up's) until
// max_nodes. The chain's nodes come first, so trimming the tree keeps the chain.
DraftTree chain_with_runner_ups(const std::vector<LevelChoice>& levels, int32_t max_nodes);

// Greedy verification: from the root, while the target's choice at the current node (`best`,
// given the node index) is one of its children, accept that child. The first choice without a
// matching child is the bonus token. result.tokens = accepted drafts + bonus; result.nodes = the
// accepted nodes in depth order.
VerifyResult verify_tree_greedy(const DraftTree& tree, const std::function<int32_t(int32_t node)>& best);

// Verification as above from each node's logits (`row(node)`, node 0 the root): the token
// chosen at a node is the sampler's own (Sampler::choose: argmax at temperature 0, else the
// position-keyed draw for the node's depth), so the output is plain decoding's for that seed
// whatever the tree holds, as verify_chain's is. The request's logits
// processors see the branch so far as generated history, and under a grammar (null: none; in
// its state after `generated`) each node's row is masked with the grammar's state after the
// node's branch, as verify_chain does (spec/verify.h). The grammar is left as it was given.
VerifyResult verify_tree(const DraftTree& tree, const LogitsRow& row, const sampling::Sampler& sampler,
                         std::span<const int32_t> prompt, std::span<const int32_t> generated,
                         sampling::TokenConstraint* grammar = nullptr);

}  // namespace tachyon::spec
