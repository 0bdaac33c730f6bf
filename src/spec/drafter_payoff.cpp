#include "spec/drafter_payoff.h"

#include "spec/ema.h"

namespace tachyon::spec {

bool DrafterPayoff::worth_drafting(int64_t prompt_tokens, int64_t max_new_tokens, double plain_step_seconds) {
  const bool explore = decisions_++ % kExploreEvery == 0;
  if (explore || speedup_ == 0 || plain_step_seconds <= 0) return true;
  if (speedup_ <= 1) return false;
  const double savings = static_cast<double>(max_new_tokens) * plain_step_seconds * (1 - 1 / speedup_);
  return savings > static_cast<double>(prompt_tokens) * catch_up_per_token_;
}

void DrafterPayoff::record_catch_up(int64_t tokens, double seconds) {
  if (tokens > 0 && seconds > 0) ema_update(catch_up_per_token_, seconds / static_cast<double>(tokens), 0.2);
}

void DrafterPayoff::record_request(int64_t spec_tokens, double spec_seconds, int64_t plain_tokens,
                                   double plain_seconds) {
  if (spec_tokens < kMinSpecTokens || plain_tokens < kMinPlainTokens || spec_seconds <= 0 || plain_seconds <= 0) return;
  const double r = (static_cast<double>(spec_tokens) / spec_seconds) / (static_cast<double>(plain_tokens) / plain_seconds);
  ema_update(speedup_, r, 0.25);
}

}  // namespace tachyon::spec
