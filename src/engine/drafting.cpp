#include "engine/drafting.h"

#include <algorithm>
#include <limits>

#include "engine/stats_recorder.h"
#include "kernels/ops.h"
#include "spec/grammar_drafts.h"

namespace tachyon::engine {

double propose_drafts(LoopState& state) {
  const auto start = Clock::now();
  if (state.policy.lanes().empty()) return 0;
  // What a recurrent state's rollback ring can undo.
  const int32_t max_k_of_state =
      state.kv.has_state() ? state.kv.layout().state_rollback_rows - 1 : std::numeric_limits<int32_t>::max();
  for (RequestId id : state.scheduler.running_ids()) {
    ActiveRequest& a = state.active.at(id);
    if (!a.speculating() || a.spec.num_drafts > 0 || a.pending.finish != FinishReason::None) continue;
    const int32_t num_tokens = static_cast<int32_t>(a.tokens.size());
    if (state.scheduler.num_computed(id) != num_tokens - 1) continue;
    spec::SpecPolicy::Room room;
    room.max_k = std::min({a.request.max_tokens - a.num_generated() - 1, state.max_context - num_tokens - 1,
                           max_k_of_state});
    room.num_tokens = num_tokens;
    room.max_new = std::min(a.request.max_tokens - a.num_generated(), state.max_context - num_tokens);
    const spec::DraftPlan plan = state.policy.plan_drafts(a.spec, room);
    if (plan.gate) {
      a.pending.spec = a.spec.usage;
      state.stats.record_gate(plan.gate);
    }
    if (plan.k <= 0) continue;
    spec::Drafter* drafter = state.policy.drafter(a.spec);
    const auto t0 = Clock::now();
    const uint64_t warmups = state.model.backend().warmup_events();
    spec::DraftTree tree;
    const spec::DraftingUnderGrammar under_grammar(*drafter, a.constraint.get());
    if (plan.num_tree_nodes > plan.k) {
      const int32_t max_depth = std::min(plan.k, kernels::kMaxTreeDepth - 1);
      tree = drafter->propose_tree(id, a.tokens, max_depth, plan.num_tree_nodes);
    } else {
      tree = spec::DraftTree::chain(drafter->propose(id, a.tokens, plan.k));
    }
    if (a.constraint) {  // drafts the grammar forbids could never be accepted: not verified
      const size_t proposed = tree.size();
      tree = spec::prune_to_grammar(std::move(tree), *a.constraint);
      state.stats.record_grammar_pruned_drafts(proposed - tree.size());
    }
    if (!tree.node_scores.empty()) state.policy.size_tree(a.spec, tree, seconds_between(t0, Clock::now()));
    a.spec.draft_depth = tree.depth();
    if (!tree.is_chain()) a.spec.tree_parents = std::move(tree.parents);
    std::vector<int32_t> drafts = std::move(tree.tokens);
    state.policy.record_proposal(a.spec, num_tokens, seconds_between(t0, Clock::now()),
                                 state.model.backend().warmup_events() != warmups);
    if (drafts.empty()) continue;
    a.tokens.insert(a.tokens.end(), drafts.begin(), drafts.end());
    a.spec.num_drafts = static_cast<int32_t>(drafts.size());
    state.scheduler.on_token_appended(id, a.spec.num_drafts);
  }
  return seconds_between(start, Clock::now());
}

}  // namespace tachyon::engine
