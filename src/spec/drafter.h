// A drafter proposes tokens that the target model will likely produce next; the target then
// verifies them all in one forward (spec/verify.h). Drafters never change what is generated,
// only how fast: acceptance is exact at temperature 0 and distribution-preserving above.
//
//   auto drafter = make_ngram_drafter({});
//   std::vector<int32_t> draft = drafter->propose(request_id, committed_tokens, /*k=*/4);
//   ... verify ...
//   drafter->on_finish(request_id);
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "spec/draft_tree.h"
#include "spec/request_kind.h"
#include "spec/spec_step_costs.h"

namespace tachyon::sampling {
class TokenConstraint;
}

namespace tachyon::spec {

using RequestKey = uint64_t;

// Drafts per step at most (k_max) for drafters that run no forward to draft (prompt lookup,
// suffix trees) where no k is given; the model drafters keep the engine's 4, and a block drafter
// its block - 1. Their drafts cost only verify rows, and auto-k shortens k where acceptance runs
// short. On the demo model (CPU, bench/results/model-free-k-cpu-d9472c6.md) 6 against 4 took the
// default drafter choice from 1.95x to 2.21x plain decoding on code completion, 2.11x to 2.30x on
// prose, 2.24x to 2.81x on JSON and 2.49x to 2.72x on code edits; 8 and 12 gained only on JSON,
// and 6 drafts and the anchor fill the CPU matmul's widest tile (7 rows). Through the server with
// 8 clients it holds only because each request pays for its own rows (engine/step_shares.h;
// bench/results/serve-ngram-k-cpu-b40c09c.md).
constexpr int32_t kModelFreeMaxDrafts = 6;

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // Up to k tokens that may follow `tokens` (the request's committed prompt + output).
  // A chain (the one-branch tree). May return fewer, or none.
  virtual std::vector<int32_t> propose(RequestKey request, std::span<const int32_t> tokens, int32_t k) = 0;
  // A draft tree of at most `max_nodes` nodes and `max_depth` levels (spec/draft_tree.h).
  // Drafters that know alternatives branch; the default is the chain of propose().
  virtual DraftTree propose_tree(RequestKey request, std::span<const int32_t> tokens, int32_t max_depth,
                                 int32_t max_nodes) {
    return DraftTree::chain(propose(request, tokens, std::min(max_depth, max_nodes)));
  }
  virtual bool proposes_trees() const { return false; }
  // A constrained request's grammar, in its state after the committed tokens, for the next
  // propose / propose_tree (null after it: spec/grammar_drafts.h DraftingUnderGrammar).
  // Drafters that choose tokens by score (the model drafters) then choose among the tokens
  // the grammar allows; the others draft as usual and prune_to_grammar cuts what it forbids.
  // A drafter leaves the grammar in the state it was given in.
  virtual void draft_under(sampling::TokenConstraint* grammar) {}
  // Whether the engine's automatic mode uses this drafter's trees where verify rows are cheap:
  // only where they measured a clear gain in accepted tokens per step
  // (measured on the H200, docs/perf/cuda.md and git history of bench/results: the model drafters' runner-up leaves did; prompt
  // lookup's and the suffix trie's extra branches did not pay for their rows).
  virtual bool trees_by_default() const { return false; }
  // Drafters whose trees carry each node's probability (DraftTree::node_scores: DFlash's DDTree).
  // In the automatic mode, on the steps that draft trees, the policy asks them for
  // kOwnTreeNodesPerLevel nodes per level and keeps the prefix with the most expected tokens per
  // second of the lane's measured verify cost (SpecPolicy::size_tree): the node budget follows
  // the device's step cost rather than a rule.
  virtual bool scores_tree_nodes() const { return false; }
  // The request ended with `tokens` committed (prompt first, `num_prompt` of them): drop
  // per-request state; drafters that learn from past outputs record them here.
  virtual void on_finish(RequestKey request, std::span<const int32_t> tokens, int32_t num_prompt) {}

  // Drafters that read the target's hidden states (MTP) say so; the engine then hands them
  // the last layer's output (before the final norm) of every committed position it computes:
  // `hidden` is [count, hidden_size] for positions [first_position, first_position + count).
  virtual bool wants_hidden() const { return false; }
  // Drafters that read other layers (DFlash) name them: `hidden` then holds, per position, the
  // outputs of these target layers (the residual stream after each, before any final norm)
  // concatenated in this order, [count, size() · hidden_size]. Empty: the last layer's output.
  virtual std::vector<int32_t> hidden_layers() const { return {}; }
  virtual void observe_hidden(RequestKey request, int32_t first_position, std::span<const float> hidden,
                              int32_t count) {}

  // The request's kind of text (spec/request_kind.h), told at admission to the drafter that will
  // draft for it: drafters that keep figures per kind (the merged drafter) read them by it.
  virtual void begin_request(RequestKey request, RequestKind kind) {}
  // Drafters that size their own trees (the merged drafter: from each node's score and the
  // measured verify cost) get a node cap from the policy instead of its tree-or-chain choice,
  // and the costs of their lane's verify forwards by drafts verified, drafting excluded
  // (spec/spec_step_costs.h; the policy outlives them).
  virtual bool sizes_own_trees() const { return false; }
  virtual void attach_step_costs(const SpecStepCosts* forward_costs) {}
  // Drafters made of other drafters name them: the engine tells each drafter of a request's end
  // once, so parts that are also lanes of their own are not told twice.
  virtual std::vector<Drafter*> parts() const { return {}; }
};

}  // namespace tachyon::spec
