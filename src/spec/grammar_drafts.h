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

namespace tachyon::spec {

// The nodes of `tree` whose whole root-to-node path the grammar accepts from its current
// state, in their original order (parents before children, so the result is a tree; a chain
// stays a chain).
DraftTree prune_to_grammar(DraftTree tree, sampling::TokenConstraint& grammar);

}  // namespace tachyon::spec
