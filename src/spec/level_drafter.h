// The common shape of the model-based drafters (draft model, MTP head): they run a greedy
// chain one level per forward and know each level's runner-up for free, so their chain is the
// best tokens and their tree is the chain plus the runner-ups as leaves (spec/draft_tree.h).
#pragma once

#include <vector>

#include "kernels/backend.h"
#include "spec/drafter.h"

namespace tachyon::spec {

// How many of the first token ids a model drafter scores (Model::set_draft_vocabulary,
// MtpHead::set_draft_vocabulary) unless told: half the vocabulary, at least 2048 ids (the demo
// model's acceptance and drafting cost per size: measured with bench/spec/spec_bench.cpp).
int64_t default_draft_vocabulary(int64_t vocab_size);

// A model drafter's forward of at most this many rows repeats its shape step after step (a
// chain level feeds one token, the catch-up after a verification at most k + 1), so it is
// hinted as repeating (kernels::RepeatingStepHint) and a GPU replays it as a graph; a longer
// one (the first catch-up over a whole prompt) is issued directly.
inline constexpr size_t kMaxRepeatingDraftRows = 16;

// Device memory for a chain's levels (model::StepOutputs::top_two_on_device): each level's
// forward writes its TopTwo here and the next embeds its best token from here, so a chain of k
// forwards waits for the device once, when the levels are read back (a GPU records the whole
// chain as one graph).
class DeviceLevels {
 public:
  explicit DeviceLevels(kernels::Backend& backend) : backend_(backend) {}
  ~DeviceLevels() {
    if (data_) backend_.deallocate(data_);
  }
  DeviceLevels(const DeviceLevels&) = delete;
  DeviceLevels& operator=(const DeviceLevels&) = delete;

  kernels::TopTwo* get(int32_t k);  // room for k levels (grows; same address while it fits)
  // Level i's best token, where the next forward reads it (Batch::device_tokens).
  const int32_t* best_token(int32_t i) const { return reinterpret_cast<const int32_t*>(data_ + i); }
  // The first n levels, read back (one wait).
  std::vector<LevelChoice> read(int32_t n);
  // Level i alone (a chain under a grammar reads each level before choosing the next token).
  LevelChoice read_level(int32_t i);

 private:
  kernels::Backend& backend_;
  kernels::TopTwo* data_ = nullptr;
  size_t capacity_ = 0;  // levels
};

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
  void draft_under(sampling::TokenConstraint* grammar) final { grammar_ = grammar; }

 protected:
  // The request's grammar while drafting under one (Drafter::draft_under): the chain then runs
  // level by level on the host's choice (GrammarLevelWalk, spec/grammar_drafts.h) instead of
  // the device's best token.
  sampling::TokenConstraint* grammar() const { return grammar_; }

  // Up to k levels of the drafter's greedy chain (best token and runner-up per level).
  virtual std::vector<LevelChoice> draft_levels(RequestKey request, std::span<const int32_t> tokens, int32_t k) = 0;

 private:
  sampling::TokenConstraint* grammar_ = nullptr;
};

}  // namespace tachyon::spec
