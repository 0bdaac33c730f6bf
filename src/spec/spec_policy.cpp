#include "spec/spec_policy.h"

#include <algorithm>
#include <limits>

#include "spec/ema.h"
#include "spec/merged_tree.h"
#include "spec/ngram.h"

namespace tachyon::spec {

namespace {
// Evidence before a sticky gate may stop a request's speculation. The first steps of a
// generation are unrepresentative (prompt lookup on code completion accepts ~0.6 drafts per
// step over its first 8-16 steps and ~1.4 over 384 tokens on the demo model): with 8 steps and
// 16 tokens the gates stopped it at 1.0x where it runs at 1.47x (CPU, bench/results).
constexpr int32_t kAcceptanceEvidenceSteps = 32;
constexpr int32_t kThroughputEvidenceTokens = 64;
// Auto-k: the first steps, and every kExploreEvery-th, draft k_max.
constexpr int32_t kFirstStepsAtKMax = 2, kExploreEvery = 8;
constexpr int32_t kPromptGateMinTokens = 64;  // the prompt gate judges prompts this long
constexpr int32_t kPlainProbes = 4, kProbeEvery = 4;  // plain steps the throughput gate measures, and their spacing
}  // namespace

namespace {
std::vector<DrafterLane> one_lane(Drafter* drafter, const SpecPolicyConfig& config) {
  if (!drafter) return {};
  return {{drafter, config.model_free_drafter, config.num_speculative_tokens}};
}
}  // namespace

SpecPolicy::SpecPolicy(std::vector<DrafterLane> lanes, const SpecPolicyConfig& config, bool has_recurrent_state)
    : lanes_(std::move(lanes)),
      config_(config),
      has_recurrent_state_(has_recurrent_state),
      choice_(static_cast<int32_t>(lanes_.size())) {
  lanes_state_.reserve(lanes_.size());  // drafters keep pointers to their lane's costs
  for (const DrafterLane& l : lanes_) {
    lanes_state_.push_back(Lane{.drafter = l});
    l.drafter->attach_step_costs(&lanes_state_.back().forward_costs);
  }
}

SpecPolicy::SpecPolicy(Drafter* drafter, const SpecPolicyConfig& config, bool has_recurrent_state)
    : SpecPolicy(one_lane(drafter, config), config, has_recurrent_state) {}

// Prompt-time gate: a model-free drafter only helps on text that repeats itself.
bool SpecPolicy::prompt_gate_fires(const DrafterLane& lane, std::span<const int32_t> prompt) const {
  return config_.gates && lane.model_free && prompt.size() >= kPromptGateMinTokens &&
         trigram_repetition(prompt) < config_.min_prompt_repetition;
}

const char* SpecPolicy::admit(SpecState& s, std::span<const int32_t> prompt, bool speculate, int32_t logprobs,
                              std::optional<int32_t> num_speculative_tokens, RequestKind kind) {
  s.logprobs = logprobs >= 0;
  s.num_speculative_tokens = num_speculative_tokens;
  s.kind = kind;
  s.off = true;
  s.lane = -1;
  if (lanes_.empty()) return nullptr;
  s.lane = 0;
  if (lanes_.size() > 1 && speculate) {
    // The drafters whose prompt gate lets them run this request compete; where none may, the
    // first one takes it and its prompt gate turns speculation off, as with one drafter.
    std::vector<bool> eligible(lanes_.size());
    bool any = false;
    for (size_t i = 0; i < lanes_.size(); ++i) any |= (eligible[i] = !prompt_gate_fires(lanes_[i], prompt));
    // Sampled requests too: with position-keyed draws (sampling/sampler.h) the drafter changes
    // how fast a seeded request's text comes, not the text.
    if (any) {
      const DrafterChoice::Decision d = choice_.choose(kind, eligible);
      s.usage.choice = d.why;
      if (d.drafter < 0) {  // every measured drafter was slower than plain decoding on this kind
        s.usage.stopped_by = "choice_gate";
        return "choice_gate";
      }
      s.lane = d.drafter;
    }
  }
  s.usage.method = lanes_[static_cast<size_t>(s.lane)].drafter->name();
  s.usage.kind = kind_name(kind);
  s.off = !speculate;
  const char* gate = nullptr;
  if (speculate && prompt_gate_fires(lanes_[static_cast<size_t>(s.lane)], prompt)) {
    s.off = true;
    s.usage.stopped_by = gate = "prompt_gate";
  }
  return gate;
}

// Trees are verified from every node's logits (the target's argmax or its position-keyed draw
// at each node: spec/draft_tree.h), so they serve requests without per-token logprobs, on
// models whose only per-sequence state is the paged KV (a recurrent state follows one branch).
bool SpecPolicy::trees_possible(const SpecState& s) const {
  return lane(s).drafter.drafter->proposes_trees() && !has_recurrent_state_ && !s.logprobs;
}

// Auto (max_tree_nodes -1): trees of 2k nodes or chains, whichever measures faster
// (TreeOrChain), for drafters whose trees are worth trying.
bool SpecPolicy::auto_tree_eligible(const SpecState& s) const {
  return config_.max_tree_nodes < 0 && lane(s).drafter.drafter->trees_by_default() && trees_possible(s) &&
         !sizes_own_trees(s);
}

// Auto mode, a drafter that scores its nodes (DFlash), on a step TreeOrChain gave to trees: the
// tree is asked for kOwnTreeNodesPerLevel nodes per level and cut by size_tree. Trees still compete
// with chains: on a CPU, sized trees of chain-like size ran 10-15% slower per step than auto-k's
// chains (the top-k log-probabilities over the vocabulary, the tree verify's bookkeeping).
bool SpecPolicy::sizes_scored_trees(const SpecState& s) const {
  return s.tree_step && config_.max_tree_nodes < 0 && lane(s).drafter.drafter->scores_tree_nodes() &&
         trees_possible(s);
}

// A drafter that sizes its own trees (the merged drafter) drafts trees wherever trees are
// possible and not turned off (max_tree_nodes 0): up to kOwnTreeNodesPerLevel nodes per level (or
// max_tree_nodes), pruned by the drafter itself.
bool SpecPolicy::sizes_own_trees(const SpecState& s) const {
  return config_.max_tree_nodes != 0 && lane(s).drafter.drafter->sizes_own_trees() && trees_possible(s);
}

// Nodes of the request's next draft tree; <= k means a chain.
int32_t SpecPolicy::tree_nodes(const SpecState& s, int32_t k) const {
  if (!trees_possible(s)) return 0;
  if (config_.max_tree_nodes >= 0) return config_.max_tree_nodes;
  if (sizes_own_trees(s) || sizes_scored_trees(s)) return kOwnTreeNodesPerLevel * k;
  return s.tree_step ? 2 * k : 0;
}

// Auto-k: the k with the most expected tokens per second (spec/spec_step_costs.h), from the
// request's measured acceptance per draft level and the measured cost of steps by drafts
// verified. The first steps, and every kExploreEvery-th, draft k_max: they measure the deep
// levels that shorter chains never reach.
int32_t SpecPolicy::choose_k(const SpecState& s) const {
  const int32_t k_max = s.num_speculative_tokens.value_or(lane(s).drafter.num_speculative_tokens);
  if (!config_.auto_k || s.num_speculative_tokens || sizes_own_trees(s) || sizes_scored_trees(s) ||
      s.acceptance.steps() < kFirstStepsAtKMax ||
      s.acceptance.steps() % kExploreEvery == 0)
    return k_max;
  const bool tree = tree_nodes(s, k_max) > k_max;
  return (tree ? lane(s).tree_costs : lane(s).spec_costs).best_k(s.acceptance, k_max,
                                                   [&](int32_t k) { return std::max(k, tree_nodes(s, k)); });
}

DraftPlan SpecPolicy::plan_drafts(SpecState& s, const Room& room) {
  DraftPlan plan;
  if (s.lane < 0) return plan;
  Lane& l = lane(s);
  s.shape_measured = auto_tree_eligible(s);
  s.tree_step = s.shape_measured && l.tree_or_chain.trees(l.shape_decisions++);
  const int32_t k = std::min(choose_k(s), room.max_k);
  if (k <= 0) return plan;
  if (s.probe_plain > 0) {  // a few plain steps measure what speculation competes with
    s.probe_warming = s.probe_plain > 1;
    --s.probe_plain;
    return plan;
  }
  // Payoff gate: a model drafter's first proposal pays its catch-up over the whole prompt.
  if (config_.gates && !l.drafter.model_free && !s.payoff_checked) {
    s.payoff_checked = true;
    if (!l.payoff.worth_drafting(room.num_tokens, room.max_new, l.spec_costs.plain())) {
      s.off = true;
      s.usage.stopped_by = plan.gate = "payoff_gate";
      return plan;
    }
  }
  plan.k = k;
  plan.num_tree_nodes = tree_nodes(s, k);
  return plan;
}

void SpecPolicy::record_proposal(SpecState& s, int64_t num_tokens, double seconds, bool warmup) {
  // The first proposal also catches a model drafter up over the whole prompt (its own
  // prefill): a one-time cost like the target's prefill, kept out of the per-token costs
  // that the throughput gate and auto-k compare (it made the gate switch draft/MTP off
  // on long prompts where they then ran faster).
  if (!s.drafter_primed && !lane(s).drafter.model_free) lane(s).payoff.record_catch_up(num_tokens, seconds);
  const bool catch_up = !s.drafter_primed || warmup;
  s.drafter_primed = true;
  s.draft_warmup = catch_up;
  if (!catch_up) s.draft_seconds += seconds;
}

void SpecPolicy::size_tree(SpecState& s, DraftTree& tree, double drafting_seconds) {
  s.tree_scores.clear();
  if (s.lane < 0 || !sizes_scored_trees(s) || tree.node_scores.size() != tree.size() || tree.size() == 0) return;
  Lane& l = lane(s);
  std::vector<double> expected(tree.node_scores.size());
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = l.calibration.expected(tree.node_scores[i]);
  const int32_t n = best_prefix_count(expected, [&](int32_t nodes) {
    // No drafts at all is not this choice (a tree keeps a node, below; the gates judge whether
    // drafting pays), and without plain steps (gates off) its cost is not measured.
    if (nodes == 0) return std::numeric_limits<double>::infinity();
    const double forward = l.forward_costs.bounded_cost(nodes);
    return forward > 0 ? forward + drafting_seconds : 0.0;
  });
  // Every kSizeExploreEvery-th tree of the lane is verified at twice the chosen size (at most the
  // whole tree) and the one half-way between at half of it, so the cost line keeps points on both
  // sides of the sizes it compares (without plain steps, gates off, a single count measured reads
  // as a flat line and every tree would stay whole). Not the whole tree: on a CPU a row costs
  // 0.2-0.3 plain steps (verify_cost), so a whole 21-node tree costs 4-6 plain steps there.
  const uint64_t turn = l.sized_trees++ % kSizeExploreEvery;
  const int32_t size = static_cast<int32_t>(tree.size());
  const int32_t keep = turn == 0 ? std::min(size, 2 * std::max(1, n)) : turn == kSizeExploreEvery / 2 ? (n + 1) / 2 : n;
  // node_scores are best first: the prefix is the best `keep`. At least one node, so that a drafter
  // whose scores look worthless is still verified (its calibration can recover; the gates judge it).
  tree.truncate(static_cast<size_t>(std::max(1, keep)));
  s.tree_scores = tree.node_scores;
}

// Step-cost model from measured forwards: per-request time of plain decode steps, and of
// steps that verify drafts with the drafts they verified (per verified row beyond the first).
void SpecPolicy::record_step_cost(double seconds, size_t num_requests, int32_t num_drafts) {
  const double n = static_cast<double>(std::max<size_t>(1, num_requests)), per_request = seconds / n;
  if (num_drafts == 0) {
    for (Lane& l : lanes_state_) {  // the target's plain step is every drafter's baseline
      l.tree_costs.record_plain(per_request);
      l.spec_costs.record_plain(per_request);
      l.forward_costs.record_plain(per_request);
    }
    return;
  }
  ema_update(spec_step_cost_, per_request, 0.1);
  ema_update(spec_step_drafts_, num_drafts / n, 0.1);
}

double SpecPolicy::marginal_row_cost() const {
  const double plain = lanes_state_.empty() ? 0 : lanes_state_.front().spec_costs.plain();
  if (plain <= 0 || spec_step_cost_ <= 0) return 0.1;  // until measured
  return std::max(0.0, spec_step_cost_ / plain - 1.0) / std::max(1.0, spec_step_drafts_);
}

void SpecPolicy::time_step(SpecState& s, bool timed, bool decode_only, double share, bool plain_decode_row) {
  s.step_timed = timed && !s.draft_warmup;
  s.step_seconds = s.step_timed && s.num_drafts > 0 ? share + s.draft_seconds : 0;
  s.clock = SpecState::Clock::None;
  if (s.step_timed && s.num_drafts > 0) {
    s.spec_seconds += share + s.draft_seconds;
    if (decode_only) {
      (s.tree_parents.empty() ? lane(s).spec_costs : lane(s).tree_costs).record(s.num_drafts, share + s.draft_seconds);
      lane(s).forward_costs.record(s.num_drafts, share);
    }
    ++s.spec_steps;
    s.clock = SpecState::Clock::Spec;
  } else if (s.step_timed && plain_decode_row && !s.off && !s.probe_warming) {
    s.plain_seconds += share;
    ++s.plain_tokens;
    s.clock = SpecState::Clock::Plain;
  }
  s.draft_seconds = 0;
  s.draft_warmup = false;
  s.probe_warming = false;
}

const char* SpecPolicy::record_verification(SpecState& s, int32_t num_drafted, int32_t num_accepted,
                                            int32_t emitted, std::span<const int32_t> accepted_nodes) {
  s.acceptance.record(std::min(s.draft_depth, num_drafted), num_accepted);
  if (!s.tree_scores.empty()) {
    std::vector<bool> accepted(s.tree_scores.size(), false);
    if (accepted_nodes.empty()) {  // a chain (a sized tree cut to one branch): its first nodes
      std::fill_n(accepted.begin(), std::clamp<size_t>(static_cast<size_t>(std::max(0, num_accepted)), 0, accepted.size()),
                  true);
    } else {
      for (const int32_t node : accepted_nodes)  // tree nodes are 1-based (DraftTree)
        if (node >= 1 && static_cast<size_t>(node) <= accepted.size()) accepted[static_cast<size_t>(node - 1)] = true;
    }
    lane(s).calibration.record(s.tree_scores, accepted);
    s.tree_scores.clear();
  }
  s.usage.num_drafted += num_drafted;
  s.usage.num_accepted += num_accepted;
  ++s.usage.num_steps;
  if (s.step_timed) s.spec_tokens += emitted;
  if (s.shape_measured && s.step_seconds > 0) s.step_tokens = 1 + num_accepted;  // recorded with the step's rest
  if (!config_.gates) return nullptr;
  // Throughput gate (sticky): speculation stays only while it emits more tokens per second
  // than plain decoding of the same request, both measured.
  // Plain probes, one every kProbeEvery verifications until kPlainProbes are timed: spread over the
  // request's first steps rather than back to back, so that one burst of the host's load does not
  // set the request's plain rate (the drafter choice ranks drafters by their steps' cost in these).
  // After a model drafter's forward the target's weights are partly out of the caches, so a
  // plain step right after one runs slower than plain decoding does (5-37% on the demo, CPU:
  // bench/results/drafter-choice-7a3cace.md), which flattered the drafter's cost ratio: its
  // probes come in pairs, the first untimed.
  if (s.usage.num_steps % kProbeEvery == 0 && s.plain_tokens < kPlainProbes)
    s.probe_plain = lane(s).drafter.model_free ? 1 : 2;
  if (s.spec_tokens >= kThroughputEvidenceTokens && s.plain_tokens >= kPlainProbes && s.spec_seconds > 0 &&
      s.plain_seconds > 0 && s.spec_tokens / s.spec_seconds < s.plain_tokens / s.plain_seconds) {
    s.off = true;
    s.usage.stopped_by = "throughput_gate";
    return "throughput_gate";
  }
  // Acceptance gate (sticky): after enough evidence, stop when the accepted tokens per step no
  // longer pay for the measured extra cost of verifying them.
  if (s.usage.num_steps >= kAcceptanceEvidenceSteps) {
    const double accepted_per_step = static_cast<double>(s.usage.num_accepted) / s.usage.num_steps;
    // A verified row is never free (at least its share of the step and the bookkeeping): with
    // the floor, drafts that are never accepted are stopped even where a timing sample made
    // rows look free. Nor is it charged more than a plain step (an accepted draft saves one):
    // with the ceiling, drafts that are always accepted are never stopped here, even where a
    // sample on a busy host made rows look dearer than steps; whether speculation still pays
    // then is the throughput gate's measurement.
    const double row_cost = std::clamp(marginal_row_cost(), SpecStepCosts::kMinRowCost, SpecStepCosts::kMaxRowCost);
    const double extra_cost = row_cost * static_cast<double>(s.usage.num_drafted) / s.usage.num_steps;
    if (accepted_per_step < extra_cost) {
      s.off = true;
      s.usage.stopped_by = "acceptance_gate";
      return "acceptance_gate";
    }
  }
  return nullptr;
}

void SpecPolicy::finish_step(SpecState& s, double rest_share) {
  // The rest of the iteration (scheduling, verification, sampling, emitting: host work that a
  // speculative step spreads over several tokens) counts for the throughput gate too, so it
  // compares tokens per second of wall time.
  if (s.clock == SpecState::Clock::Spec) s.spec_seconds += rest_share;
  else if (s.clock == SpecState::Clock::Plain) s.plain_seconds += rest_share;
  s.clock = SpecState::Clock::None;
  // Trees and chains are compared on whole iterations too: a tree's verification moves the
  // accepted branch's KV and walks the tree on the host.
  if (s.step_tokens > 0) lane(s).tree_or_chain.record(s.tree_step, s.step_tokens, s.step_seconds + rest_share);
  s.step_tokens = 0;
}

void SpecPolicy::record_finished(const SpecState& s) {
  if (s.lane < 0) return;
  if (!lane(s).drafter.model_free)
    lane(s).payoff.record_request(s.spec_tokens, s.spec_seconds, s.plain_tokens, s.plain_seconds);
  if (s.usage.stopped_by == "payoff_gate" && s.usage.num_steps == 0)
    return choice_.record_gated(s.kind, s.lane, lane(s).payoff.speedup());
  choice_.record(s.kind, s.lane,
                 {.verify_steps = s.usage.num_steps, .accepted = s.usage.num_accepted, .spec_steps = s.spec_steps,
                  .spec_tokens = s.spec_tokens, .spec_seconds = s.spec_seconds, .plain_tokens = s.plain_tokens,
                  .plain_seconds = s.plain_seconds});
}

}  // namespace tachyon::spec
