#include "spec/grammar_drafts.h"

#include <optional>
#include <utility>
#include <vector>

namespace tachyon::spec {

DraftTree prune_to_grammar(DraftTree tree, sampling::TokenConstraint& grammar) {
  using Snapshot = sampling::TokenConstraint::Snapshot;
  const Snapshot root = grammar.snapshot();
  // By original node index (0: the root): the grammar state after the node's path and the
  // node's index in the pruned tree; nullopt for a pruned node.
  std::vector<std::optional<Snapshot>> state_after(tree.size() + 1);
  std::vector<int32_t> kept_index(tree.size() + 1, -1);
  state_after[0] = root;
  kept_index[0] = 0;
  DraftTree kept;
  for (size_t i = 0; i < tree.size(); ++i) {
    const auto parent = static_cast<size_t>(tree.parents[i]);
    if (!state_after[parent]) continue;  // under a pruned node
    grammar.restore(*state_after[parent]);
    if (!grammar.accept(tree.tokens[i])) continue;
    state_after[i + 1] = grammar.snapshot();
    kept.tokens.push_back(tree.tokens[i]);
    kept.parents.push_back(kept_index[parent]);
    if (i < tree.node_scores.size()) kept.node_scores.push_back(tree.node_scores[i]);
    kept_index[i + 1] = static_cast<int32_t>(kept.tokens.size());
  }
  grammar.restore(root);
  return kept;
}

bool GrammarLevelWalk::pick(LevelChoice& level) {
  if (grammar_.accept(level.best)) return true;
  if (level.second < 0 || !grammar_.accept(level.second)) return false;
  std::swap(level.best, level.second);
  std::swap(level.p_best, level.p_second);
  ++runner_ups_taken_;
  return true;
}

}  // namespace tachyon::spec
