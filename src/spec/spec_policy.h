// Speculation policy: whether a request drafts at all (the prompt, payoff, acceptance and
// throughput gates), how many drafts per step (auto-k), trees or chains, all from measured
// step costs and acceptance. The engine owns the loop and calls in at fixed points; the
// policy sees token counts and seconds, never tensors or requests.
//
// A server may hold several drafters (DrafterLane): at admission the policy picks the request's
// one from live figures per kind of text (spec/drafter_choice.h), and every later call works on
// that drafter's measurements (step costs, tree-or-chain, payoff). Per request the policy keeps a
// SpecState; the engine's one call per point of the step:
//
//   SpecPolicy policy(lanes, config, has_recurrent_state);
//   policy.admit(state, prompt, speculate, logprobs, k, kind);  // at admission
//   Drafter* d = policy.drafter(state);                                 // null: none
//   auto d = policy.plan_drafts(state, room);     // before the step: k and tree nodes, or a gate
//   policy.size_tree(state, tree, drafting_seconds);  // a scored tree (Drafter::scores_tree_nodes)
//   policy.record_proposal(state, tokens, seconds, warmup);
//   policy.record_step_cost(seconds, num_requests, num_drafts);             // after the forward
//   policy.time_step(state, timed, decode_only, share, plain_decode_row);
//   const char* gate = policy.record_verification(state, drafted, accepted, emitted);
//   policy.finish_step(state, rest_share);        // the iteration's host work, shared
//   policy.record_finished(state);                // at the request's end
//
// A gate is sticky: once it returns a name (kSpecGates), the request decodes plainly to its end.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "spec/drafter.h"
#include "spec/drafter_choice.h"
#include "spec/drafter_payoff.h"
#include "spec/spec_step_costs.h"
#include "spec/spec_usage.h"

namespace tachyon::spec {

struct SpecPolicyConfig {
  int32_t num_speculative_tokens = 4;   // the single drafter's (the one-drafter constructor)
  bool auto_k = true;                   // pick k per request from measured acceptance and step cost
  int32_t max_tree_nodes = -1;          // engine::EngineConfig::max_tree_nodes
  bool gates = true;                    // prompt, payoff, acceptance and throughput gates
  bool model_free_drafter = false;      // the single drafter's: the prompt gate applies, the payoff gate does not
  double min_prompt_repetition = 0.02;  // prompt gate: 3-gram repetition below this turns it off
};

// One of the server's drafters, with what the policy needs to know of it.
struct DrafterLane {
  Drafter* drafter = nullptr;
  bool model_free = false;             // prompt lookup, suffix trees: the prompt gate applies, the payoff gate does not
  int32_t num_speculative_tokens = 4;  // its k_max (a block drafter: its block - 1)
};

// One request's speculation: its pending drafts, measurements and gate clocks.
struct SpecState {
  // The request, fixed at admission.
  int32_t lane = -1;                            // its drafter (SpecPolicy's lanes); -1: none
  RequestKind kind = RequestKind::TextNovel;    // its kind of text, for the drafter choice
  bool logprobs = false;                        // per-token logprobs: chains only
  std::optional<int32_t> num_speculative_tokens;  // per-request k (no auto-k)

  bool off = true;                    // no drafts (no drafter, not asked, or gated)
  SpecUsage usage;                    // totals reported to the client
  int32_t num_drafts = 0;             // unverified draft tokens at the end of the request's tokens
  std::vector<int32_t> tree_parents;  // the drafts' parents when they form a tree (DraftTree); empty: a chain
  int32_t draft_depth = 0;            // levels of the pending drafts (a chain: its length)
  bool tree_step = false;             // the pending drafts' shape, as chosen by TreeOrChain
  bool shape_measured = false;        // ... and the choice was TreeOrChain's (auto trees)
  std::vector<double> tree_scores;    // a sized tree's node scores, for its lane's ScoreCalibration
  DraftAcceptance acceptance;         // per draft level, for auto-k

  // Timing of the current step.
  double step_seconds = 0;     // this step's timed cost (forward share + drafting), or 0
  int32_t step_tokens = 0;     // tokens this step's verification yielded, for TreeOrChain
  double draft_seconds = 0;    // this step's drafting
  bool draft_warmup = false;   // this step's drafting did one-time work (a catch-up, a graph captured)
  bool step_timed = true;      // this step's time counts for the throughput gate
  // This plain step only brings the target's weights back into the caches after a model
  // drafter's forward evicted them (the first of a probe pair): its time is not a plain step's.
  bool probe_warming = false;
  enum class Clock { None, Spec, Plain } clock = Clock::None;  // the gate clock this step counts on

  // Throughput gate: seconds and tokens of the request's speculative steps (drafting included)
  // and of its plain decode steps, each step's time shared among its requests.
  double spec_seconds = 0, plain_seconds = 0;
  int32_t spec_tokens = 0, plain_tokens = 0, probe_plain = 0;
  int32_t spec_steps = 0;       // timed speculative steps (the drafter choice's seconds per step)
  bool drafter_primed = false;  // the drafter has seen this request once (record_proposal)
  bool payoff_checked = false;  // the payoff gate decided whether a model drafter starts on it
};

// The drafts of one request's next step.
struct DraftPlan {
  int32_t k = 0;              // draft levels; 0: none this step
  int32_t num_tree_nodes = 0; // > k: a tree of this many nodes; else a chain of k
  const char* gate = nullptr; // the gate that switched speculation off instead, or null
};

class SpecPolicy {
 public:
  // `lanes` empty: speculation is off for every request. has_recurrent_state: the model keeps
  // a recurrent state, which follows one branch (no trees).
  SpecPolicy(std::vector<DrafterLane> lanes, const SpecPolicyConfig& config, bool has_recurrent_state);
  // Nodes per draft level a drafter that sizes its own trees (the merged drafter) may propose.
  static constexpr int32_t kOwnTreeNodesPerLevel = 3;
  // size_tree verifies one tree in this many at twice its chosen size, and one at half of it.
  static constexpr uint64_t kSizeExploreEvery = 16;
  // One drafter (or none), k and model_free_drafter from `config`.
  SpecPolicy(Drafter* drafter, const SpecPolicyConfig& config, bool has_recurrent_state);

  // At admission: the request's drafter (with several: the drafter choice over those whose
  // prompt gate lets it run), then the prompt gate (model-free drafters, text that does not
  // repeat itself). Returns the gate that switched it off, or null. Constrained requests
  // speculate like any other (their drafts are checked against the grammar:
  // spec/grammar_drafts.h, spec/verify.h).
  const char* admit(SpecState& s, std::span<const int32_t> prompt, bool speculate, int32_t logprobs,
                    std::optional<int32_t> num_speculative_tokens, RequestKind kind = RequestKind::TextNovel);

  // The request's drafter, or null.
  Drafter* drafter(const SpecState& s) const { return s.lane < 0 ? nullptr : lanes_[static_cast<size_t>(s.lane)].drafter; }
  const std::vector<DrafterLane>& lanes() const { return lanes_; }
  const DrafterChoice& choice() const { return choice_; }

  // The next step's drafts for a request whose only pending token is its last sampled one.
  // room.max_k: drafts it may still take (max_tokens, context, a recurrent state's ring);
  // num_tokens: its tokens; max_new: tokens it may still generate. Applies the payoff gate.
  struct Room {
    int32_t max_k = 0;
    int64_t num_tokens = 0, max_new = 0;
  };
  DraftPlan plan_drafts(SpecState& s, const Room& room);
  // The drafter proposed in `seconds`; warmup: it did one-time work (Backend::warmup_events).
  // A model drafter's first proposal is its catch-up over the prompt, kept out of per-token costs.
  void record_proposal(SpecState& s, int64_t num_tokens, double seconds, bool warmup);
  // Auto mode, a drafter that scores its trees' nodes: trims `tree` to the prefix with the most
  // expected tokens per second, each node's score calibrated by the lane's ScoreCalibration,
  // against the lane's verify forward cost by drafts (SpecStepCosts::bounded_cost) plus this
  // step's `drafting_seconds`; the whole tree until that cost is measured. Other trees are left
  // as they are. (After any grammar pruning: the scores must be the verified tree's.)
  void size_tree(SpecState& s, DraftTree& tree, double drafting_seconds);

  // A decode step's forward (timed, no one-time work): seconds over its requests and the drafts
  // it verified, for auto-k's step-cost model.
  void record_step_cost(double seconds, size_t num_requests, int32_t num_drafts);
  // A request's share of the step's forward: counted on its speculative or plain gate clock.
  // plain_decode_row: its chunk is one completing row without drafts.
  void time_step(SpecState& s, bool timed, bool decode_only, double share, bool plain_decode_row);
  // A verification committed `emitted` tokens, `num_accepted` of `num_drafted` drafts accepted
  // (a tree's: the accepted nodes, spec/verify.h VerifyResult::nodes; a chain's are its first).
  // Returns the gate (throughput or acceptance) that switched speculation off, or null.
  const char* record_verification(SpecState& s, int32_t num_drafted, int32_t num_accepted, int32_t emitted,
                                  std::span<const int32_t> accepted_nodes = {});
  // The iteration's host work beyond the forward and drafting, this request's share: on its
  // gate clock, and on its step's tree-or-chain measurement.
  void finish_step(SpecState& s, double rest_share);
  // The request ended: its speculative and plain rates for the payoff gate and the drafter choice.
  void record_finished(const SpecState& s);

 private:
  // One drafter's measurements.
  struct Lane {
    DrafterLane drafter;
    // Auto-k: plain and speculative steps by drafts verified, chains and trees apart (a tree of
    // n nodes is an op-by-op step of n rows, a chain step of n drafts a graph replay: mixing
    // them in one line made the chains' k look expensive where both ran).
    SpecStepCosts spec_costs, tree_costs;
    SpecStepCosts forward_costs;  // the verify forward alone (chains and trees), for drafters that size their trees
    TreeOrChain tree_or_chain;  // auto trees: which shape emits faster
    ScoreCalibration calibration;  // scored trees (size_tree): the drafter's node scores vs accepted drafts
    uint64_t sized_trees = 0;      // trees size_tree cut, for its exploring turns
    DrafterPayoff payoff;       // whether a model drafter starts on a request
    uint64_t shape_decisions = 0;
  };
  Lane& lane(const SpecState& s) { return lanes_state_[static_cast<size_t>(s.lane)]; }
  const Lane& lane(const SpecState& s) const { return lanes_state_[static_cast<size_t>(s.lane)]; }
  bool prompt_gate_fires(const DrafterLane& lane, std::span<const int32_t> prompt) const;
  bool trees_possible(const SpecState& s) const;
  bool auto_tree_eligible(const SpecState& s) const;
  bool sizes_own_trees(const SpecState& s) const;
  bool sizes_scored_trees(const SpecState& s) const;
  int32_t tree_nodes(const SpecState& s, int32_t k) const;
  int32_t choose_k(const SpecState& s) const;
  double marginal_row_cost() const;

  std::vector<DrafterLane> lanes_;
  std::vector<Lane> lanes_state_;
  SpecPolicyConfig config_;
  bool has_recurrent_state_;
  DrafterChoice choice_;
  double spec_step_cost_ = 0;    // EMA seconds per request of a verifying forward
  double spec_step_drafts_ = 0;  // EMA drafts per request of a verifying step
};

}  // namespace tachyon::spec
