// Drafts under a grammar (constrained requests: sampling::TokenConstraint). A draft token the
// grammar forbids after the draft's earlier tokens could never be emitted, since verification
// masks the target's logits with the same grammar (spec/verify.h): it and everything drafted
// below it is cut before the target spends a row on it. A chain ends at its first forbidden
// token; a tree loses each forbidden node with its subtree, so a runner-up the grammar allows
// still stands where the drafter's best choice broke the grammar.
//
//   spec::DraftTree tree = drafter->propose_tree(...);       // or DraftTree::chain(propose(...))
//   tree = spec::prune_to_grammar(std::move(tree), *constraint);
//
// The constraint is walked node by node (snapshot, accept, restore) and left in the state it
// was given in.
#pragma once

#include "sampling/token_mask.h"
#include "spec/draft_tree.h"
#include "spec/drafter.h"

namespace tachyon::spec {

// The nodes of `tree` whose whole root-to-node path the grammar accepts from its current
// state, in their original order (parents before children, so the result is a tree; a chain
// stays a chain).
DraftTree prune_to_grammar(DraftTree tree, sampling::TokenConstraint& grammar);

// Hands a request's grammar to `drafter` for the proposals made in this scope.
class DraftingUnderGrammar {
 public:
  DraftingUnderGrammar(Drafter& drafter, sampling::TokenConstraint* grammar) : drafter_(drafter) {
    drafter_.draft_under(grammar);
  }
  ~DraftingUnderGrammar() { drafter_.draft_under(nullptr); }
  DraftingUnderGrammar(const DraftingUnderGrammar&) = delete;
  DraftingUnderGrammar& operator=(const DraftingUnderGrammar&) = delete;

 private:
  Drafter& drafter_;
};

// A model drafter's greedy chain under a grammar, one level at a time: each level takes its
// best token if the grammar allows it after the levels before, else its runner-up if allowed
// (then the best allowed token: the cheap part of masking, from the top two the drafter
// computes anyway), else the chain ends there. The grammar is back in its first state when
// the walk ends.
class GrammarLevelWalk {
 public:
  explicit GrammarLevelWalk(sampling::TokenConstraint& grammar) : grammar_(grammar), start_(grammar.snapshot()) {}
  ~GrammarLevelWalk() { grammar_.restore(start_); }
  GrammarLevelWalk(const GrammarLevelWalk&) = delete;
  GrammarLevelWalk& operator=(const GrammarLevelWalk&) = delete;

  // Chooses the level's token (swapping best and runner-up when the runner-up is taken) and
  // advances the grammar past it; false: neither is allowed, the chain ends before this level.
  bool pick(LevelChoice& level);
  // Levels whose best token the grammar forbade and whose runner-up stood in.
  int32_t runner_ups_taken() const { return runner_ups_taken_; }

 private:
  sampling::TokenConstraint& grammar_;
  sampling::TokenConstraint::Snapshot start_;
  int32_t runner_ups_taken_ = 0;
};

}  // namespace tachyon::spec
