// The merged drafter: several drafters' candidates as one tree, verified in one forward
// (issue #48 item 4; spec/merged_tree.h builds, scores and prunes the tree). It is one more
// drafter to the engine ("merged"), so the drafter choice (spec/drafter_choice.h) weighs it
// against each member alone by its own live figures.
//
// Per step: the cheap members (prompt lookup, suffix trees: no forward) always propose; each
// costly member (a draft model, MTP: forwards of their own, a third to a half of a plain step on
// the CPU) proposes only where its measured gain pays for its measured drafting time. Its gain is
// the accepted depth the tree reached with its nodes over the depth without them, kept per kind of
// request and apart for steps where the cheap members had nothing and where they had a candidate.
// A step of E expected tokens costing T seconds gains from a member adding g tokens for d seconds
// when (E + g) / (T + d) > E / T, that is g·T > d·E. Every kExploreEvery-th step of a request runs
// every member and keeps up to twice the best node count, so gains and the costs of larger trees
// stay measured; a member's first proposal of a request (its catch-up over the prompt) always runs.
//
// Chains (sampled requests, per-token logprobs): the first member in order with a draft, a
// function of the tokens alone, so a seeded sampled request's drafts, and with them its text, do
// not depend on live figures.
//
//   MergedDrafter merged({{ngram.get(), false}, {draft_model.get(), true}});
//   config.drafters.push_back({&merged, /*model_free=*/false, k});  // beside ngram's and the draft model's lanes
#pragma once

#include <array>
#include <unordered_map>

#include "spec/drafter.h"
#include "spec/merged_tree.h"

namespace tachyon::spec {

struct MergedMember {
  Drafter* drafter = nullptr;  // owned by the caller, outliving the merged drafter
  bool costly = false;         // its drafting runs forwards: the per-step payoff decides whether it runs
  // Levels it drafts at most (0: the tree's depth): a model drafter pays a forward per level, so
  // it keeps its own k where the merged tree goes deeper on prompt lookup's long matches.
  int32_t max_depth = 0;
};

// What the merged drafter did, for tests and the bench.
struct MergedCounters {
  uint64_t trees = 0;               // trees proposed with at least one node
  uint64_t multi_source_trees = 0;  // of which held nodes of at least two members
  std::array<uint64_t, kMaxMergedMembers> nodes{};  // nodes proposed per member (a shared node counts for each)
  std::array<uint64_t, kMaxMergedMembers> runs{}, skips{};  // costly members: steps drafted, steps the payoff skipped
};

// Whether a costly member drafts this step: its measured gain (accepted nodes it adds) and
// drafting seconds against the step's expected tokens and seconds without it, g·T > d·E; true
// while any of them is unmeasured (fewer than min_samples gains, zero seconds).
bool member_pays(double gain, int32_t samples, int32_t min_samples, double member_seconds, double step_tokens,
                 double step_seconds);

class MergedDrafter final : public Drafter {
 public:
  explicit MergedDrafter(std::vector<MergedMember> members);

  std::string name() const override { return "merged"; }
  std::vector<int32_t> propose(RequestKey request, std::span<const int32_t> tokens, int32_t k) override;
  DraftTree propose_tree(RequestKey request, std::span<const int32_t> tokens, int32_t max_depth,
                         int32_t max_nodes) override;
  bool proposes_trees() const override { return true; }
  bool trees_by_default() const override { return true; }
  bool sizes_own_trees() const override { return true; }
  void attach_step_costs(const SpecStepCosts* forward_costs) override { forward_costs_ = forward_costs; }
  void draft_under(sampling::TokenConstraint* grammar) override;
  void on_finish(RequestKey request, std::span<const int32_t> tokens, int32_t num_prompt) override;
  bool wants_hidden() const override { return hidden_member_ >= 0; }
  std::vector<int32_t> hidden_layers() const override;
  void observe_hidden(RequestKey request, int32_t first_position, std::span<const float> hidden,
                      int32_t count) override;
  void begin_request(RequestKey request, RequestKind kind) override;
  std::vector<Drafter*> parts() const override;

  const MergedCounters& counters() const { return counters_; }
  const std::vector<MergedMember>& members() const { return members_; }

  static constexpr uint64_t kExploreEvery = 16;
  static constexpr int32_t kMinGainSamples = 4;  // steps a costly member runs per case before its payoff judges
  static constexpr double kEmaWeight = 0.1;

 private:
  struct RequestState {
    RequestKind kind = RequestKind::TextNovel;
    SourcedTree last;         // the last tree proposed, for its outcome
    size_t base = 0;          // the tokens it followed; 0: none pending
    uint32_t ran = 0;         // the costly members that drafted it
    bool cheap_empty = false; // the cheap members had nothing for it
    uint64_t steps = 0;
    uint32_t primed = 0;      // costly members that caught up on this request
  };
  // A costly member's measured payoff on one kind, [0] where the cheap members had a candidate,
  // [1] where they had none.
  struct Payoff {
    std::array<double, 2> gain{};  // EMA accepted nodes it added
    std::array<int32_t, 2> samples{};
    double seconds = 0;            // EMA drafting seconds (catch-ups excluded)
  };
  void record_last_outcome(RequestState& s, std::span<const int32_t> tokens);
  // Seconds of a verify forward of `nodes` drafts as the lane measured them; 0 while unmeasured.
  double forward_seconds(int32_t nodes) const;
  Payoff& payoff(RequestKind kind, size_t member);

  std::vector<MergedMember> members_;
  int32_t hidden_member_ = -1;
  const SpecStepCosts* forward_costs_ = nullptr;
  std::unordered_map<RequestKey, RequestState> requests_;
  std::array<MergedFigures, kNumRequestKinds> figures_{};
  std::vector<Payoff> payoffs_;  // [kind][member]
  MergedCounters counters_;
};

}  // namespace tachyon::spec
