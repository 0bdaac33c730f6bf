// The commit stage of a step: a forward's outputs become its requests' tokens. Prompt rows add
// prompt logprobs; a completing row's token is sampled (or taken as the backend picked it);
// drafts are verified (spec/verify.h, spec/draft_tree.h; a constrained request's rows masked
// with its grammar), the accepted ones and the bonus token
// appended and the rest rolled back in the scheduler and the KV cache (a tree's accepted branch
// first moved into place). Every appended token is checked against the request's stop
// conditions. The speculation policy hears of each verification and may switch a request's
// speculation off.
//
//   Commit commit(state);
//   const auto totals = commit.commit_step(plan, batch, out);
//   for (const auto& c : plan.chunks) deliver(...);
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/loop_state.h"
#include "spec/verify.h"

namespace tachyon::engine {

class Commit {
 public:
  explicit Commit(LoopState& state) : state_(state) {}

  struct Totals {
    uint64_t computed_prompt_tokens = 0, generated_tokens = 0;
  };
  // Commits the outputs `out` of the forward of `batch` (plan's chunks, in order; `batch` may be
  // empty for a step issued ahead, which returns no hidden rows).
  Totals commit_step(const StepPlan& plan, const model::Batch& batch, const model::StepOutput& out);

 private:
  uint64_t verify_drafts(const ScheduledChunk& c, ActiveRequest& a, const model::StepOutput& out, size_t logit_row,
                         std::span<const float> hidden);
  spec::VerifyResult verify_tree(ActiveRequest& a, std::span<const int32_t> drafts, const model::StepOutput& out,
                                 size_t logit_row, std::span<const int32_t> prompt, std::span<const int32_t> generated);
  void emit(RequestId id, ActiveRequest& a, int32_t token);
  // The request's grammar allows no token of the vocabulary: it ends with an error.
  static void fail_stuck_grammar(ActiveRequest& a);
  // Of a's first `computed` tokens, how many the prefix cache may share. A model with decode
  // weights (--quantize-decode) shares its prompt's blocks only: KV written by decode rows came
  // from the decode copies, and a later prompt reading it would not get the bits of its own
  // prefill (so a hit never changes a request's output).
  int32_t cacheable_tokens(const ActiveRequest& a, int32_t computed) const;

  LoopState& state_;
  std::vector<float> row_;                               // scratch: a logits row to sample from
  std::vector<float> hidden_scratch_;                    // scratch: a drafter's layers of a step's hidden rows
  std::vector<std::pair<int32_t, int32_t>> tree_moves_;  // scratch: a verified branch's KV moves
};

// Drops the last n of a's drafts (the step computes only the others, or the request lost its
// KV): its tokens and the scheduler's count roll back; parents precede children, so what
// remains of a tree is still a tree.
void trim_drafts(LoopState& state, RequestId id, ActiveRequest& a, int32_t n);

}  // namespace tachyon::engine
