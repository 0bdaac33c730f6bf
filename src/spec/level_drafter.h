// The common shape of the model-based drafters (draft model, MTP head): they run a greedy
// chain one level per forward and know each level's runner-up for free, so their chain is the
// best tokens and their tree is the chain plus the runner-ups as leaves (spec/draft_tree.h).
#pragma once

#include "spec/drafter.h"

namespace tachyon::spec {

class LevelDrafter : public Drafter {
 public:
  std::vector<int32_t> propose(RequestKey request, std::span<const int32_t> tokens, int32_t k) final {
    std::vector<int32_t> drafts;
    for (const auto& level : draft_levels(request, tokens, k)) drafts.push_back(level.best);
    return drafts;
  }
  DraftTree propose_tree(RequestKey request, std::span<const int32_t> tokens, int32_t max_depth,
                         int32_t max_nodes) final {
    return chain_with_runner_ups(draft_levels(request, tokens, max_depth), max_nodes);
  }
  bool proposes_trees() const final { return true; }
  bool trees_by_default() const final { return true; }

 protected:
  // Up to k levels of the drafter's greedy chain (best token and runner-up per level).
  virtual std::vector<LevelChoice> draft_levels(RequestKey request, std::span<const int32_t> tokens, int32_t k) = 0;
};

}  // namespace tachyon::spec
