// Auto-k: the number of drafts per step that gives the most tokens per second, from two
// measurements: what a speculative step costs by the number of drafts it verified
// (SpecStepCosts, shared by all requests), and how often each draft level is accepted once
// reached (DraftAcceptance, per request).
//
// Neither is proportional or geometric in k, and assuming so chose k = 1 where k = 4 is 1.2x
// faster (CPU, the demo model's drafter on code completion: 1.9 tokens per step against 3.9):
// - A model drafter's first forward catches up on the tokens the last verification committed,
//   and the verify forward has a fixed part, whatever k is. Cost = plain step × (1 + β·k) with
//   β fitted at the k in use charges that fixed part to every draft, so at small k each draft
//   looks expensive. Here the cost is the line through every measured count's average (it has
//   an intercept), weighted by samples: a count's own average, when it ran rarely, is a few
//   noisy steps, and with it auto-k on the H200 kept k below 4 where a fixed k = 4 ran faster.
// - Acceptance rises with depth once a level is reached (a run of accepted drafts marks text the
//   drafter predicts well: the demo drafter's per-level rates are .82/.87/.88/.89). A single
//   per-draft rate, measured at k = 1, predicts too few tokens for deeper chains. Here each
//   level has its own rate; the deepest measured rate stands in for deeper levels, and every
//   kExploreEvery-th step drafts k_max so that the deep levels keep being measured.
//
//   SpecStepCosts costs;                 DraftAcceptance acceptance;
//   costs.record_plain(seconds);         acceptance.record(/*depth=*/4, /*accepted=*/2);
//   costs.record(4, seconds);            // per request: forward share + drafting
//   int32_t k = costs.best_k(acceptance, /*k_max=*/4);
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace tachyon::spec {

class DraftAcceptance {
 public:
  // A verified step that drafted `depth` levels and accepted the first `accepted` of them.
  void record(int32_t depth, int32_t accepted);
  // Expected tokens of a step with k drafts: 1 + Σ_{j≤k} Π_{i≤j} rate(i).
  double expected_tokens(int32_t k) const;
  int32_t steps() const { return steps_; }

  static constexpr int32_t kMinReached = 4;  // before a level's own rate is used

 private:
  double rate(int32_t level) const;  // 1-based; falls back to the deepest measured level
  std::vector<int32_t> reached_, accepted_;  // [level - 1]
  int32_t steps_ = 0;
};

class SpecStepCosts {
 public:
  void record_plain(double seconds);
  // A timed speculative step of one request that verified `drafts` drafts (chain or tree).
  void record(int32_t drafts, double seconds);

  // Expected seconds per request of a step verifying k drafts: the least-squares line through
  // the measured draft counts (weighted by samples), or with one count measured the line from
  // the plain step through it. 0 while nothing is measured.
  double cost(int32_t k) const;
  // cost(drafts) with each verified row's share held to [kMinRowCost, kMaxRowCost] of a plain
  // step (the plain step for 0 drafts): a line fitted to noisy steps (a busy host) may call a row
  // free or dearer than the plain step an accepted node saves, and would then keep every node or
  // none. 0 while nothing is measured. For drafters that size trees by node (spec/merged_tree.h).
  double bounded_cost(int32_t drafts) const;
  // The k in [1, k_max] with the most expected tokens per second of cost(drafts_for(k));
  // k_max while no cost is measured. drafts_for: the drafts verified at depth k (a tree's
  // nodes); null: k.
  int32_t best_k(const DraftAcceptance& acceptance, int32_t k_max,
                 const std::function<int32_t(int32_t)>& drafts_for = nullptr) const;

  double plain() const { return plain_; }

  static constexpr int32_t kMinSamples = 3;         // before a sample may be clipped to its count's average
  static constexpr double kMaxStepOverAverage = 2;  // a sample counts at most this times the average
  static constexpr double kFullWeight = 16;          // samples beyond this do not weigh more in the line
  static constexpr double kMinRowCost = 0.02, kMaxRowCost = 1.0;  // bounded_cost's, in plain steps

 private:
  struct Average {
    double seconds = 0;
    int32_t samples = 0;
  };
  double plain_ = 0;                // EMA seconds per request of a plain decode step
  std::vector<Average> by_drafts_;  // [drafts] EMA seconds per request of a speculative step
};

// How far a drafter's own node probabilities (DraftTree::node_scores) are from what the target
// accepts, by histogram binning: nodes are binned by score (bin b: scores in (2^-(b+1), 2^-b],
// the last bin everything below), and each bin keeps EMAs of its nodes' scores and of whether the
// target accepted them. A node's expected acceptance is its score times its bin's accepted over
// predicted. A drafter trained on greedy labels is sharper than the target's acceptance, and not
// evenly: on the demo's DFlash drafter a single factor left 21-node trees looking worth their rows
// on a CPU where the chain of 7 emitted more per second.
//
//   ScoreCalibration c;
//   c.record(tree.node_scores, accepted);  // accepted[i]: node i + 1 is on the target's path
//   double e = c.expected(tree.node_scores[i]);
class ScoreCalibration {
 public:
  void record(std::span<const double> scores, const std::vector<bool>& accepted);
  // The score itself until its bin has kMinNodes nodes; then score · accepted / predicted, at most 1.
  double expected(double score) const;

  static constexpr int kBins = 8;
  static constexpr int32_t kMinNodes = 16;
  static constexpr double kEmaWeight = 0.05;  // per node

 private:
  struct Bin {
    double predicted = 0, accepted = 0;  // EMAs of a node's score and of its acceptance (0 or 1)
    int32_t nodes = 0;
  };
  static int bin(double score);
  std::array<Bin, kBins> bins_{};
};

// Draft trees or chains, whichever emits more tokens per second of step cost, measured on the
// engine's steps (all requests; for drafters whose trees are worth trying, Drafter::
// trees_by_default). A tree's runner-up leaves are extra verified rows and an op-by-op verify
// step (tree shapes change from step to step, so a GPU does not replay them as graphs); whether
// the tokens they add pay for that depends on the device and the text, not on a rule: on the
// H200 chains beat trees on most demo workloads (code completion 1.56-1.60x against
// 1.45-1.51x), where the old rule (trees while a verified row costs < 0.1 plain step) always
// chose trees.
//
//   TreeOrChain choice;
//   bool tree = choice.trees(step);               // this step's shape
//   choice.record(tree, /*tokens=*/3, seconds);   // after its verification
class TreeOrChain {
 public:
  // The shape for decision number `step` (any counter that advances by one per proposal):
  // the two alternate until each has kMinSteps measured steps, then the faster one, with the
  // other every kExploreEvery-th decision (costs and acceptance drift with context and text).
  bool trees(uint64_t step) const;
  void record(bool tree, int32_t tokens, double seconds);

  static constexpr int32_t kMinSteps = 4, kExploreEvery = 16;

 private:
  struct Rate {  // EMAs of a step's tokens and seconds
    double tokens = 0, seconds = 0;
    int32_t steps = 0;
  };
  Rate tree_, chain_;
};

}  // namespace tachyon::spec
