// The speculation policy's decisions from token counts and seconds alone (spec/spec_policy.h):
// who speculates at admission, k within the room a request has, and the sticky gates.
#include "spec/spec_policy.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

namespace tachyon::spec {
namespace {

class FixedDrafter : public Drafter {
 public:
  std::string name() const override { return "fixed"; }
  std::vector<int32_t> propose(RequestKey, std::span<const int32_t>, int32_t k) override {
    return std::vector<int32_t>(static_cast<size_t>(k), 1);
  }
};

SpecPolicyConfig model_free(bool gates = true) {
  return {.num_speculative_tokens = 4, .auto_k = false, .max_tree_nodes = 0, .gates = gates,
          .model_free_drafter = true};
}

std::vector<int32_t> non_repeating(size_t n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(SpecPolicy, AdmissionDecidesWhoSpeculates) {
  FixedDrafter drafter;
  const std::vector<int32_t> prompt = non_repeating(100), repeating(100, 7);
  SpecState s;
  EXPECT_EQ(SpecPolicy(nullptr, model_free(), false).admit(s, repeating, true, -1, {}), nullptr);
  EXPECT_TRUE(s.off) << "no drafter";
  EXPECT_TRUE(s.usage.method.empty());

  SpecPolicy policy(&drafter, model_free(), false);
  s = {};
  EXPECT_EQ(policy.admit(s, repeating, true, -1, {}), nullptr);
  EXPECT_FALSE(s.off);
  EXPECT_EQ(s.usage.method, "fixed");
  s = {};
  EXPECT_EQ(policy.admit(s, repeating, /*speculate=*/false, -1, {}), nullptr);
  EXPECT_TRUE(s.off);
  s = {};
  EXPECT_STREQ(policy.admit(s, prompt, true, -1, {}), "prompt_gate");
  EXPECT_TRUE(s.off);
  EXPECT_EQ(s.usage.stopped_by, "prompt_gate");
  s = {};
  EXPECT_EQ(SpecPolicy(&drafter, model_free(/*gates=*/false), false).admit(s, prompt, true, -1, {}),
            nullptr);
  EXPECT_FALSE(s.off) << "gates off";
}

TEST(SpecPolicy, KIsTheRequestsOrTheConfigsWithinItsRoom) {
  FixedDrafter drafter;
  SpecPolicy policy(&drafter, model_free(), false);
  const std::vector<int32_t> prompt(100, 7);
  SpecState s;
  policy.admit(s, prompt, true, -1, /*num_speculative_tokens=*/3);
  EXPECT_EQ(policy.plan_drafts(s, {.max_k = 10, .num_tokens = 100, .max_new = 50}).k, 3);
  EXPECT_EQ(policy.plan_drafts(s, {.max_k = 2, .num_tokens = 100, .max_new = 3}).k, 2);
  const DraftPlan none = policy.plan_drafts(s, {.max_k = 0, .num_tokens = 100, .max_new = 1});
  EXPECT_EQ(none.k, 0);
  EXPECT_EQ(none.gate, nullptr);
  SpecState t;
  policy.admit(t, prompt, true, -1, {});
  const DraftPlan plan = policy.plan_drafts(t, {.max_k = 10, .num_tokens = 100, .max_new = 50});
  EXPECT_EQ(plan.k, 4);
  EXPECT_LE(plan.num_tree_nodes, plan.k) << "max_tree_nodes 0: chains";
}

// One verification step of `drafted` drafts, `accepted` of them accepted, timed at `seconds`.
const char* verify_step(SpecPolicy& policy, SpecState& s, int32_t drafted, int32_t accepted, double seconds) {
  s.num_drafts = drafted;
  s.draft_depth = drafted;
  policy.time_step(s, true, true, seconds, false);
  s.num_drafts = 0;
  const char* gate = policy.record_verification(s, drafted, accepted, accepted + 1);
  policy.finish_step(s, 0);
  return gate;
}

TEST(SpecPolicy, DraftsThatAreNeverAcceptedAreStoppedByTheAcceptanceGate) {
  FixedDrafter drafter;
  SpecPolicy policy(&drafter, model_free(), false);
  SpecState s;
  policy.admit(s, std::vector<int32_t>(100, 7), true, -1, {});
  const char* gate = nullptr;
  int32_t steps = 0;
  while (!gate && steps < 100) {
    gate = verify_step(policy, s, 4, 0, 0.001);
    ++steps;
    if (s.probe_plain > 0) s.probe_plain = 0;  // no plain steps here: the acceptance gate alone
  }
  EXPECT_STREQ(gate, "acceptance_gate");
  EXPECT_TRUE(s.off);
  EXPECT_EQ(s.usage.stopped_by, "acceptance_gate");
  EXPECT_EQ(s.usage.num_steps, steps);
  EXPECT_EQ(s.usage.num_drafted, 4 * steps);
}

TEST(SpecPolicy, SpeculationSlowerThanPlainStepsIsStoppedByTheThroughputGate) {
  FixedDrafter drafter;
  SpecPolicy policy(&drafter, model_free(), false);
  SpecState s;
  policy.admit(s, std::vector<int32_t>(100, 7), true, -1, {});
  for (int i = 0; i < 8; ++i) {  // plain decode: a token per millisecond
    policy.time_step(s, true, true, 0.001, /*plain_decode_row=*/true);
    policy.finish_step(s, 0);
  }
  EXPECT_EQ(s.plain_tokens, 8);
  const char* gate = nullptr;
  for (int i = 0; i < 100 && !gate; ++i) gate = verify_step(policy, s, 2, 2, 0.010);  // 3 tokens per 10 ms
  EXPECT_STREQ(gate, "throughput_gate");
  EXPECT_TRUE(s.off);
  EXPECT_GE(s.spec_tokens, 64);
}

// The request's plain steps, which the throughput gate and the drafter choice compare its
// speculative steps with, are spread over its first steps: one every 4 verifications, not four in
// a row that one burst of the host's load would all slow down.
TEST(SpecPolicy, PlainProbesAreSpreadOverTheFirstSteps) {
  FixedDrafter drafter;
  SpecPolicy policy(&drafter, model_free(), false);
  SpecState s;
  policy.admit(s, std::vector<int32_t>(100, 7), true, -1, {});
  std::vector<int> plain_at;  // step numbers of the plain steps
  for (int step = 0; step < 40; ++step) {
    if (policy.plan_drafts(s, {.max_k = 4, .num_tokens = 100, .max_new = 1000}).k == 0) {
      plain_at.push_back(step);
      policy.time_step(s, true, true, 0.001, /*plain_decode_row=*/true);
      policy.finish_step(s, 0);
    } else {
      ASSERT_EQ(verify_step(policy, s, 4, 3, 0.002), nullptr);
    }
  }
  EXPECT_EQ(s.plain_tokens, 4);
  EXPECT_EQ(plain_at, (std::vector<int>{4, 9, 14, 19}));
}

// A model drafter's forward pushes the target's weights out of the caches, so the plain step right
// after one is slower than plain decoding (5-37% on the demo, CPU: bench/results/drafter-choice-
// 7a3cace.md), which made its speculation look cheaper than it was against its probes. Its probes
// come in pairs: the first brings the weights back and is not timed, the second is the plain step.
TEST(SpecPolicy, AModelDraftersPlainProbesComeInPairsTheFirstUntimed) {
  FixedDrafter drafter;
  SpecPolicy policy(&drafter, {.num_speculative_tokens = 4, .auto_k = false, .max_tree_nodes = 0, .gates = true,
                               .model_free_drafter = false},
                    false);
  SpecState s;
  policy.admit(s, std::vector<int32_t>(100, 7), true, -1, {});
  std::vector<int> plain_at;
  for (int step = 0; step < 40; ++step) {
    if (policy.plan_drafts(s, {.max_k = 4, .num_tokens = 100, .max_new = 1000}).k == 0) {
      const bool first_of_pair = plain_at.size() % 2 == 0;
      plain_at.push_back(step);
      policy.time_step(s, true, true, first_of_pair ? 0.005 : 0.001, /*plain_decode_row=*/true);
      policy.finish_step(s, 0);
    } else {
      ASSERT_EQ(verify_step(policy, s, 4, 3, 0.002), nullptr);
    }
  }
  EXPECT_EQ(plain_at, (std::vector<int>{4, 5, 10, 11, 16, 17, 22, 23}));
  EXPECT_EQ(s.plain_tokens, 4);
  EXPECT_NEAR(s.plain_seconds, 0.004, 1e-12) << "only the second step of each pair is timed";
}

// A drafter whose trees carry node probabilities (DFlash's DDTree: Drafter::scores_tree_nodes).
class ScoredDrafter : public FixedDrafter {
 public:
  bool proposes_trees() const override { return true; }
  bool trees_by_default() const override { return true; }
  bool scores_tree_nodes() const override { return true; }
};

// Root → 1 (.9) → 2 (.8) → 3 (.5); 4 (.3) under the root; 5 (.1) under node 2: best first.
DraftTree scored_tree() {
  DraftTree t;
  t.tokens = {1, 2, 3, 4, 5};
  t.parents = {0, 1, 2, 0, 2};
  t.node_scores = {0.9, 0.8, 0.5, 0.3, 0.1};
  return t;
}

// Verify forwards of `drafts` drafts measured at `seconds` each, after a plain step of 1 s.
void measure(SpecPolicy& policy, SpecState& s, int32_t drafts, double seconds) {
  policy.record_step_cost(1.0, 1, 0);
  for (int i = 0; i < SpecStepCosts::kMinSamples; ++i) {
    s.num_drafts = drafts;
    policy.time_step(s, /*timed=*/true, /*decode_only=*/true, seconds, false);
  }
  s.num_drafts = 0;
}

// Issue #48's node budget "from measured step cost": in the automatic mode, on the steps that
// draft trees (TreeOrChain's first is one), the policy asks a scoring drafter for
// kOwnTreeNodesPerLevel nodes per level and keeps the prefix with the most expected tokens
// (1 + Σ calibrated scores) per second of the lane's measured verify forward.
TEST(SpecPolicy, ScoredTreesAreSizedByTheMeasuredRowCostAndCalibratedScores) {
  ScoredDrafter drafter;
  const SpecPolicyConfig automatic{.num_speculative_tokens = 4, .auto_k = true, .max_tree_nodes = -1, .gates = false};
  const std::vector<int32_t> prompt(100, 7);
  SpecPolicy policy(&drafter, automatic, false);
  SpecState s;
  policy.admit(s, prompt, true, -1, {});
  const DraftPlan plan = policy.plan_drafts(s, {.max_k = 10, .num_tokens = 100, .max_new = 50});
  EXPECT_EQ(plan.k, 4);
  EXPECT_EQ(plan.num_tree_nodes, SpecPolicy::kOwnTreeNodesPerLevel * 4);

  DraftTree tree = scored_tree();
  policy.size_tree(s, tree, 0.0);
  EXPECT_EQ(tree.size(), 5u) << "costs unmeasured: the whole tree";

  // Rows at half a plain step (the CPU's shape): 1 + Σp over 1 + n/2 is best at 2 nodes
  // (2.7 / 2.0); a third node adds .5 tokens for .5 s at a rate below that.
  measure(policy, s, 4, 3.0);
  tree = scored_tree();
  policy.size_tree(s, tree, 0.0);
  EXPECT_EQ(tree.tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(tree.node_scores.size(), 2u);
  EXPECT_EQ(s.tree_scores, (std::vector<double>{0.9, 0.8}));
  // This step's drafting counts in every size's seconds: 20 s of it make rows relatively cheap.
  tree = scored_tree();
  policy.size_tree(s, tree, 20.0);
  EXPECT_EQ(tree.size(), 5u);

  // The target accepts none of what the drafter predicts: calibrated scores shrink the tree to
  // one node (never none, so the calibration can still learn).
  for (int i = 0; i < ScoreCalibration::kMinNodes; ++i) {
    tree = scored_tree();
    policy.size_tree(s, tree, 0.0);
    policy.record_verification(s, static_cast<int32_t>(tree.size()), 0, 1);
  }
  tree = scored_tree();
  policy.size_tree(s, tree, 0.0);
  EXPECT_EQ(tree.size(), 1u);

  // Its exploring turns: one tree in kSizeExploreEvery at twice the chosen size, one at half of it,
  // so that the cost line keeps points on both sides.
  SpecPolicy exploring(&drafter, automatic, false);
  SpecState e;
  exploring.admit(e, prompt, true, -1, {});
  ASSERT_GT(exploring.plan_drafts(e, {.max_k = 10, .num_tokens = 100, .max_new = 50}).num_tree_nodes, 4);
  measure(exploring, e, 4, 3.0);
  std::vector<size_t> sizes;
  for (uint64_t i = 0; i < SpecPolicy::kSizeExploreEvery; ++i) {
    tree = scored_tree();
    exploring.size_tree(e, tree, 0.0);
    sizes.push_back(tree.size());
  }
  std::vector<size_t> want(SpecPolicy::kSizeExploreEvery, 2);
  want[0] = 4;
  want[SpecPolicy::kSizeExploreEvery / 2] = 1;
  EXPECT_EQ(sizes, want);

  // Nearly free rows (a GPU's shape): the whole tree.
  SpecPolicy flat(&drafter, automatic, false);
  SpecState f;
  flat.admit(f, prompt, true, -1, {});
  ASSERT_GT(flat.plan_drafts(f, {.max_k = 10, .num_tokens = 100, .max_new = 50}).num_tree_nodes, 4);
  measure(flat, f, 4, 1.0);
  tree = scored_tree();
  flat.size_tree(f, tree, 0.0);
  EXPECT_EQ(tree.size(), 5u);

  // A node count the user gave is kept as it is.
  SpecPolicy fixed(&drafter, {.num_speculative_tokens = 4, .auto_k = false, .max_tree_nodes = 5, .gates = false},
                   false);
  SpecState x;
  fixed.admit(x, prompt, true, -1, {});
  measure(fixed, x, 4, 3.0);
  EXPECT_EQ(fixed.plan_drafts(x, {.max_k = 10, .num_tokens = 100, .max_new = 50}).num_tree_nodes, 5);
  tree = scored_tree();
  fixed.size_tree(x, tree, 0.0);
  EXPECT_EQ(tree.size(), 5u);
}

}  // namespace
}  // namespace tachyon::spec
