// Whether a model drafter is worth starting on a request, from what this engine measured on
// earlier ones. A model drafter's first proposal catches it up on the whole prompt (its own
// prefill), and that is paid before any draft is verified: on the CPU the demo drafter's
// catch-up over a 1267-token agent-loop prompt took ~60 ms, a quarter of a 256-token answer,
// and the drafts it then made were rarely accepted, so the request ran at 0.66-0.78x of plain
// decoding although the acceptance gate stopped it after 32 steps.
//
// Measured: the catch-up's seconds per prompt token, and the speedup R of earlier requests'
// speculative steps over their plain steps (tokens per second, both timed per request). A
// request drafts when R > 1 and the most it can save, max_new × plain step × (1 − 1/R),
// exceeds its catch-up (prompt tokens × seconds per token); every kExploreEvery-th request
// drafts anyway, so a drafter switched off by one workload is measured again on the next.
//
//   DrafterPayoff payoff;
//   if (!payoff.worth_drafting(prompt_tokens, max_new, plain_step_seconds)) { /* plain */ }
//   payoff.record_catch_up(prompt_tokens, seconds);
//   payoff.record_request(spec_tokens, spec_seconds, plain_tokens, plain_seconds);  // at its end
#pragma once

#include <cstdint>

namespace tachyon::spec {

class DrafterPayoff {
 public:
  // Decision for the next request (counts it for exploration).
  bool worth_drafting(int64_t prompt_tokens, int64_t max_new_tokens, double plain_step_seconds);
  void record_catch_up(int64_t tokens, double seconds);
  // A finished request's speculative and plain decode steps (its own timing; ignored with too
  // little of either).
  void record_request(int64_t spec_tokens, double spec_seconds, int64_t plain_tokens, double plain_seconds);

  double speedup() const { return speedup_; }  // 0 until measured

  static constexpr int64_t kMinSpecTokens = 16, kMinPlainTokens = 4;
  static constexpr int64_t kExploreEvery = 8;

 private:
  double speedup_ = 0;            // EMA over requests
  double catch_up_per_token_ = 0; // EMA, seconds
  int64_t decisions_ = 0;
};

}  // namespace tachyon::spec
